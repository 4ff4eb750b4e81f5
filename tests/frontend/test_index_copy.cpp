// Tensor::index_copy and index_copy_ (src/frontend/index_copy.cpp): values against host loops and
// the reference interpreter; in place where nothing else reads the old value (the same buffer, one
// kernel over the new slices), a new buffer where something does (another handle, a reader in the
// same schedule); out-of-range indices; gradients; replays of a captured step; the CUDA kernel.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "ir/node.h"
#include "runtime/buffer.h"
#include "schedule/schedule.h"

namespace kiln {
namespace {

using kiln::testing::LaunchLog;

const void* data_of(const Tensor& t) { return t.realize().node()->buffer->data; }

// dst with slices index[t] along d set to src's slices t (host loops, the later duplicate wins)
std::vector<double> host_index_copy(std::vector<double> dst, const Shape& s, int64_t d,
                                    const std::vector<int64_t>& index, const std::vector<double>& src) {
  int64_t outer = 1, inner = 1, n = s[size_t(d)], m = int64_t(index.size());
  for (int64_t k = 0; k < d; k++) outer *= s[size_t(k)];
  for (size_t k = size_t(d) + 1; k < s.size(); k++) inner *= s[k];
  for (int64_t t = 0; t < m; t++) {
    int64_t j = index[size_t(t)];
    if (j < 0 || j >= n) continue;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t e = 0; e < inner; e++)
        dst[size_t((o * n + j) * inner + e)] = src[size_t((o * m + t) * inner + e)];
  }
  return dst;
}

Tensor ramp(const Shape& s, double from) {
  int64_t n = 1;
  for (int64_t k : s) n *= k;
  return arange(from, from + double(n), 1, DType::F32).reshape(s).realize();
}

// Every dim, one slice and several, out-of-range ones among them: in place (a realized destination
// nothing else holds) and from a lazy destination (the composite), against host loops and the
// reference interpreter.
TEST(IndexCopy, ValuesEveryDim) {
  const Shape s{2, 3, 5, 4};
  for (int64_t d = 0; d < 4; d++)
    for (std::vector<int64_t> idx : {std::vector<int64_t>{1}, {0, 2, -1, 9}}) {
      if (idx.size() > 1 && s[size_t(d)] < 3) idx = {1, -2, 0};
      Shape ss = s;
      ss[size_t(d)] = int64_t(idx.size());
      Tensor src = ramp(ss, 100), index = tensor(idx);
      auto want = host_index_copy(ramp(s, 0).to_vector<double>(), s, d, idx, src.to_vector<double>());
      Tensor dst = ramp(s, 0);
      dst.index_copy_(d, index, src);
      EXPECT_TRUE(kiln::testing::expect_values(dst, want)) << "dim " << d << ", " << idx.size() << " slices";
      Tensor lazy = (ramp(s, 0) * 1.0).index_copy(d, index, src);
      EXPECT_TRUE(kiln::testing::expect_matches_reference(lazy)) << "dim " << d;
      EXPECT_TRUE(kiln::testing::expect_values(lazy, want)) << "dim " << d;
    }
}

// A decoding step's write: the destination's buffer is updated in place by one kernel whose loops
// run over the new column (B, H, 1, D), not over the cache (B, H, max_len, D).
TEST(IndexCopy, OneColumnIsOneKernelOverTheColumnInPlace) {
  const int64_t B = 2, H = 3, L = 16, D = 8;
  Tensor cache = zeros({B, H, L, D}).contiguous().realize();
  const void* before = data_of(cache);
  Tensor col = tensor(std::vector<int64_t>{5}), x = ramp({B, H, 1, D}, 1);
  LaunchLog log;
  cache.index_copy_(2, col, x);
  cache.realize();
  ASSERT_EQ(log.runs.size(), 1u);
  EXPECT_EQ(log.runs[0].out, before) << log.runs[0].name;
  EXPECT_EQ(log.runs[0].loop_elems, B * H * D) << log.runs[0].name;
  EXPECT_EQ(data_of(cache), before);
  auto v = cache.to_vector<double>();
  EXPECT_EQ(v[size_t(5 * D)], 1);              // (0, 0, 5, 0)
  EXPECT_EQ(v[size_t(4 * D)], 0);              // (0, 0, 4, 0)
  EXPECT_EQ(v[size_t(L * D + 5 * D)], 1 + D);  // (0, 1, 5, 0)
}

// A handle that shares the tensor (a copy of the Tensor) sees the update, as after assign_: the
// write stays in place.
TEST(IndexCopy, SharedHandleSeesTheUpdate) {
  Tensor a = zeros({4, 3}).contiguous().realize();
  const void* before = data_of(a);
  Tensor same = a;
  a.index_copy_(0, tensor(std::vector<int64_t>{2}), full({1, 3}, 7.0));
  EXPECT_TRUE(kiln::testing::expect_values(same, {0, 0, 0, 0, 0, 0, 7, 7, 7, 0, 0, 0}));
  EXPECT_EQ(data_of(a), before);
}

// Another value computed from the old one and not realized yet (a view, a copy kept by the user)
// must still read the old values: the update goes to a new buffer instead.
TEST(IndexCopy, OldValueHeldElsewhereIsNotOverwritten) {
  Tensor a = ramp({4, 3}, 0);
  const void* before = data_of(a);
  Tensor old_view = a.reshape({12}), old_copy = a.detach();
  a.index_copy_(0, tensor(std::vector<int64_t>{1}), full({1, 3}, -1.0));
  a.realize();
  EXPECT_NE(data_of(a), before);
  EXPECT_TRUE(kiln::testing::expect_values(a, {0, 1, 2, -1, -1, -1, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(kiln::testing::expect_values(old_view, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(kiln::testing::expect_values(old_copy, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  // once nothing else holds it, the next write is in place again
  old_view = Tensor(), old_copy = Tensor();
  const void* now = data_of(a);
  a.index_copy_(0, tensor(std::vector<int64_t>{3}), full({1, 3}, -2.0));
  EXPECT_EQ(data_of(a), now);
  EXPECT_TRUE(kiln::testing::expect_values(a, {0, 1, 2, -1, -1, -1, 6, 7, 8, -2, -2, -2}));
}

// A reader of the old value in the same schedule (its sum, realized with the update) gets the old
// values: the update does not overwrite what that kernel reads.
TEST(IndexCopy, OldValueReadInTheSameScheduleIsNotOverwritten) {
  Tensor a = ramp({4, 3}, 0);
  Tensor old_sum = a.sum();
  a.index_copy_(0, tensor(std::vector<int64_t>{0, 3}), full({2, 3}, 100.0));
  realize({a, old_sum});
  EXPECT_TRUE(kiln::testing::expect_values(old_sum, {66}));
  EXPECT_TRUE(kiln::testing::expect_values(a, {100, 100, 100, 3, 4, 5, 6, 7, 8, 100, 100, 100}));
}

// The updated value read in the same schedule (attention over the cache after its write) reads the
// new values, after the write.
TEST(IndexCopy, NewValueReadInTheSameSchedule) {
  Tensor a = zeros({4, 3}).contiguous().realize();
  const void* before = data_of(a);
  a.index_copy_(0, tensor(std::vector<int64_t>{2}), full({1, 3}, 2.0));
  Tensor s = a.sum();
  realize({a, s});
  EXPECT_EQ(data_of(a), before);
  EXPECT_TRUE(kiln::testing::expect_values(s, {6}));
}

// Out-of-range indices (negative, past the dim) write nothing; KILN_VALIDATE=1 reports them.
TEST(IndexCopy, OutOfRangeIndicesWriteNothing) {
  Tensor a = zeros({3, 2}).contiguous().realize();
  a.index_copy_(0, tensor(std::vector<int64_t>{-1, 3, 1000000, 1}), ramp({4, 2}, 1));
  EXPECT_TRUE(kiln::testing::expect_values(a, {0, 0, 7, 8, 0, 0}));
  Settings saved = settings();
  settings().validate = true;
  std::string err = kiln::testing::error_of([] {
    zeros({3, 2}).index_copy(0, tensor(std::vector<int64_t>{3}), ones({1, 2})).realize();
  });
  settings() = saved;
  EXPECT_NE(err.find("index 3 (element 0) is out of range for dim 0 of size 3"), std::string::npos) << err;
}

TEST(IndexCopy, ArgumentErrors) {
  Tensor a = zeros({3, 2});
  auto err = [&](const Tensor& idx, const Tensor& src) {
    return kiln::testing::error_of([&] { a.index_copy(0, idx, src); });
  };
  EXPECT_NE(err(tensor(std::vector<double>{1}), ones({1, 2})).find("integer"), std::string::npos);
  EXPECT_NE(err(tensor(std::vector<int64_t>{1, 2}), ones({1, 2})).find("of shape (2, 2)"), std::string::npos);
  EXPECT_NE(err(tensor(std::vector<int64_t>{1}), ones({1, 2}, {.dtype = DType::F64})).find("f32"),
            std::string::npos);
}

TEST(IndexCopy, Gradients) {
  using Ts = std::vector<Tensor>;
  Tensor idx = tensor(std::vector<int64_t>{2, 0});
  kiln::testing::expect_gradients_match([&](const Ts& x) { return x[0].index_copy(1, idx, x[1]) * x[0]; },
                                        {kiln::testing::random_tensor({2, 3, 2}, DType::F64, -1, 1, 1),
                                         kiln::testing::random_tensor({2, 2, 2}, DType::F64, -1, 1, 2)},
                                        3);
}

// A captured step that writes a column of a state tensor each call: replays keep writing into the
// same buffer, at the column each call's input gives.
TEST(IndexCopy, CapturedStepKeepsWritingInPlace) {
  Tensor state = zeros({2, 6, 3}).contiguous().realize();
  Jit step([&](const std::vector<Tensor>& in) {
    state.index_copy_(1, in[0], in[1]);
    return std::vector<Tensor>{state.sum()};
  });
  const void* at = data_of(state);
  for (int64_t c = 0; c < 6; c++) {
    step({tensor(std::vector<int64_t>{c}), full({2, 1, 3}, double(c + 1)).contiguous().realize()});
    EXPECT_EQ(data_of(state), at) << "call " << c;
  }
  EXPECT_TRUE(step.captured());
  std::vector<double> want;
  for (int64_t b = 0; b < 2; b++)
    for (int64_t c = 0; c < 6; c++) want.insert(want.end(), 3, double(c + 1));
  EXPECT_TRUE(kiln::testing::expect_values(state, want));
}

// The CUDA renderer's kernel for an in-place write: a gated store at the index read from the
// index buffer (lowered for CUDA's limits; needs no GPU).
TEST(IndexCopy, CudaKernelGatesItsStore) {
  Tensor dst = zeros({2, 4, 8, 16}).contiguous().realize();
  Tensor x = dst.index_copy(2, tensor(std::vector<int64_t>{3}), ramp({2, 4, 1, 16}, 0));
  schedule::Schedule s = schedule::make_schedule({x.node()});
  ASSERT_EQ(s.kernels.size(), 1u);
  ASSERT_TRUE(s.kernels[0].in_place);
  codegen::Lowered low = codegen::lower(s.kernels[0].ast, codegen::Target::CUDA, {});
  EXPECT_EQ(low.program.name, "E_8_16") << low.source;  // (B, H) merged, the column's D
  EXPECT_NE(low.source.find("{ if ("), std::string::npos) << low.source;
  codegen::Lowered cpu = codegen::lower(s.kernels[0].ast, codegen::Target::CPU, {});
  EXPECT_NE(cpu.source.find("if ("), std::string::npos) << cpu.source;
}

class CudaIndexCopy : public kiln::testing::GpuTest {};

// On the GPU: values (in place and composite), the same buffer, and a captured step's replays.
TEST_F(CudaIndexCopy, InPlaceValuesAndReplays) {
  const Shape s{2, 3, 8, 4};
  Tensor src = ramp({2, 3, 2, 4}, 100).to(gpu), index = tensor(std::vector<int64_t>{6, 1}).to(gpu);
  auto want = host_index_copy(ramp(s, 0).to_vector<double>(), s, 2, {6, 1}, src.to_vector<double>());
  Tensor dst = ramp(s, 0).to(gpu).realize();
  const void* before = data_of(dst);
  dst.index_copy_(2, index, src);
  EXPECT_TRUE(kiln::testing::expect_values(dst, want));
  EXPECT_EQ(data_of(dst), before);
  Tensor held = ramp(s, 0).to(gpu).realize(), view = held.reshape({-1});
  held.index_copy_(2, index, src);
  EXPECT_TRUE(kiln::testing::expect_values(held, want));
  EXPECT_TRUE(kiln::testing::expect_values(view, ramp(s, 0).reshape({-1}).to_vector<double>()));
  Tensor state = zeros({2, 6, 3}, {.device = gpu}).contiguous().realize();
  Jit step([&](const std::vector<Tensor>& in) {
    state.index_copy_(1, in[0], in[1]);
    return std::vector<Tensor>{state.sum()};
  });
  const void* at = data_of(state);
  for (int64_t c = 0; c < 6; c++)
    step({tensor(std::vector<int64_t>{c}).to(gpu),
          full({2, 1, 3}, double(c + 1)).to(gpu).contiguous().realize()});
  EXPECT_TRUE(step.captured());
  EXPECT_EQ(data_of(state), at);
  EXPECT_TRUE(kiln::testing::expect_values(state.sum(), {2 * 3 * 21}));
}

}  // namespace
}  // namespace kiln
