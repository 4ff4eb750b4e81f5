// Sizes beyond int64: every op that computes a shape checks its sums and products, and fails with a
// kiln::Error naming the op and the values (never a wrapped, negative or tiny shape).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
constexpr int64_t k31 = int64_t{1} << 31, k32 = int64_t{1} << 32, k62 = int64_t{1} << 62;

void expect_error(const std::function<void()>& f, const std::string& part) {
  std::string e = error_of(f);
  EXPECT_NE(e.find(part), std::string::npos) << e;
}
}  // namespace

TEST(SizeOverflow, ABufferLargerThanMemoryCanAddressIsAnError) {
  Tensor t = zeros({k62}) + 1;  // lazy: 2^62 elements are countable
  EXPECT_EQ(t.numel(), k62);
  expect_error([&] { t.realize(); },
               "4611686018427387904 elements of f32 are more bytes than memory can address");
}

TEST(SizeOverflow, AShapeOfMoreElementsThanInt64IsAnErrorAndAHugeLazyOneIsNot) {
  expect_error(
      [] {
        zeros({k32, k32}).slice(0, 0, 2).sum();
      },
      "kiln.zeros: shape (4294967296, 4294967296) has more elements than int64 can count");
  expect_error([] { ones({0, k32, k32}); }, "kiln.ones: shape (0, 4294967296, 4294967296)");
  // 2^62 elements, never stored: the slice of a constant is a constant
  Tensor t = zeros({k31, k31}) + 1;
  EXPECT_EQ(t.slice(0, 0, 2).slice(1, 5, 8).sum().item<float>(), 6.0f);
}

TEST(SizeOverflow, ArangeNamesItsValues) {
  expect_error([] { arange(0, 1e30); },
               "kiln.arange: start 0, end 1e+30, step 1 make 1e+30 elements, more than int64");
  expect_error([] { arange(0, 1e10, 1e-10); },
               "kiln.arange: start 0, end 1e+10, step 1e-10 make 1e+20 elements");
  expect_error([] { arange(0, NAN); },
               "kiln.arange: start, end and step must be finite, got start 0, end nan");
  expect_error([] { arange(-INFINITY, 0); }, "must be finite, got start -inf, end 0, step 1");
  expect_error([] { arange(0, 10, INFINITY); }, "must be finite, got start 0, end 10, step inf");
  expect_error([] { arange(0, 10, NAN); }, "step nan");
  expect_error([] { arange(0, 10, 0); }, "kiln.arange: step must be nonzero, got start 0, end 10, step 0");
  EXPECT_EQ(arange(0, 4.5).shape(), (Shape{5}));
}

TEST(SizeOverflow, ViewsCheckTheirShapes) {
  expect_error(
      [] {
        zeros({4}).reshape({-1, k32, k32});
      },
      "kiln.reshape: shape (-1, 4294967296, 4294967296)");
  expect_error([] { zeros({1, 1}).expand({k32, k32}); }, "kiln.expand: shape (4294967296, 4294967296)");
  expect_error(
      [] {
        zeros({2, 2}).repeat({k32, k32});
      },
      "kiln.repeat: [4294967296, 4294967296] repeats of shape (2, 2) make more elements");
  expect_error([] { zeros({4}).repeat_interleave(k62); },
               "kiln.repeat_interleave: shape (4, 4611686018427387904)");
  expect_error(
      [] {
        zeros({4}).pad({k62, k62});
      },
      "kiln.pad: padding (4611686018427387904, 4611686018427387904) of dim 0 of shape (4,) gives a size "
      "int64 cannot hold");
  expect_error([] { zeros({4}).pad({INT64_MAX, 1}); }, "kiln.pad: padding (9223372036854775807, 1)");
  expect_error(
      [] {
        zeros({4, 4}).pad({0, 0, k62, 0});
      },
      "kiln.pad: shape (4611686018427387908, 4) has more");
  expect_error([] { zeros({4}).unflatten(0, {k62, k62, 0}); }, "kiln.unflatten: sizes (4611686018427387904");
  expect_error(
      [] {
        zeros({4}).split(std::vector<int64_t>{INT64_MAX, 5});
      },
      "kiln.split: split sizes [9223372036854775807, 5] add up to more than int64 can count");
  expect_error([] { zeros({4}).narrow(0, 2, INT64_MAX); },
               "kiln.narrow: start 2 + length 9223372036854775807");
  // a step past int64's end keeps the first element; one that divides the range pads to its end
  EXPECT_EQ(arange(5).slice(0, 1, INT64_MAX, INT64_MAX).to_vector<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_EQ(arange(10).slice(0, 1, 9, 3).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(zeros({4}).chunk(INT64_MAX).size(), 4u);
}

TEST(SizeOverflow, CatStackAndMatmulCheckTheirOutputs) {
  Tensor big = zeros({k62});
  expect_error(
      [&] {
        cat({big, big});
      },
      "kiln.cat: the sizes in dim 0 of the 2 tensors (the first of shape (4611686018427387904,)) add up to "
      "more than int64 can count");
  expect_error([&] { stack({big, big, big, big}); }, "kiln.stack: shape (4, 4611686018427387904)");
  expect_error(
      [] {
        zeros({k32, 1}).matmul(zeros({1, k32}));
      },
      "kiln.matmul: shape (4294967296, 4294967296) has more elements");
  // the output fits, the broadcast product kiln sums does not
  expect_error(
      [] {
        zeros({k31, k31}).matmul(zeros({k31, 4}));
      },
      "kiln.matmul: shapes (2147483648, 2147483648) and (2147483648, 4): the product is computed as a "
      "broadcast multiply of shape (2147483648, 4, 2147483648)");
}

TEST(SizeOverflow, ConvolutionAndPoolingSizesAreChecked) {
  Tensor x = full({1, 1, 8}, 1.0f), w = full({1, 1, 2}, 1.0f);
  expect_error([&] { F::conv1d(x, w, std::nullopt, {1}, {k62}); },
               "kiln.conv1d: input (1, 1, 8) padded by [4611686018427387904] has a size int64 cannot hold");
  expect_error([&] { F::conv1d(x, w, std::nullopt, {1}, {0}, {k62}); },
               "kiln.conv1d: output size is not positive");
  expect_error(
      [&] {
        F::conv1d(zeros({k31, 1, k31}), zeros({k31, 1, 1}));
      },
      "kiln.conv1d: input (2147483648, 1, 2147483648) and weight (2147483648, 1, 1): the convolution is a "
      "broadcast product");
  expect_error([&] { F::conv_transpose1d(x, w, std::nullopt, {k62}); },
               "kiln.conv_transpose1d: output size of spatial dim 0 is more than int64 can count");
  expect_error(
      [&] {
        F::conv_transpose1d(zeros({1, 1, 4}), zeros({1, 1, 1}), std::nullopt, {int64_t{1} << 61});
      },
      "kiln.conv_transpose1d: the input dilated by the stride (4 x 2305843009213693952 elements");
  expect_error(
      [] {
        F::interpolate(zeros({1, 1, 4, 4}), std::vector<int64_t>{k62, k62});
      },
      "kiln.interpolate: shape (1, 1, 4611686018427387904, 4611686018427387904)");
  expect_error(
      [] {
        F::interpolate(zeros({1, 1, 4, 4}), 1e300);
      },
      "kiln.interpolate: scale_factor 1e+300 makes an output size");
  // windows far apart: one window, taps dilation apart, no padding to a multiple of the stride
  EXPECT_EQ(F::conv1d(x, w, std::nullopt, {k62}, {0}, {7}).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(F::max_pool1d(arange(0, 4, 1, DType::F32).reshape({1, 1, 4}), {2}, {k62}).to_vector<float>(),
            (std::vector<float>{1}));
}
