// F::layer_norm through the tile kernels (KILN_LAYERNORM=tile): forward values and gradients of
// input, weight and bias against the generated kernels in f32 and in f64 (the tile kernels take f32
// and bf16, so f64 falls back to the LAYER_NORM composite), on shapes that are not multiples of 32.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"

namespace kiln::testing {
namespace {

namespace F = nn::functional;

// Sets settings().layernorm for one scope.
struct LayerNormMode {
  explicit LayerNormMode(const char* mode) : prev(settings().layernorm) { settings().layernorm = mode; }
  ~LayerNormMode() { settings().layernorm = prev; }
  std::string prev;
};

struct Result {
  std::vector<double> y, dx, dw, db;
};

// y = layer_norm(x) and the gradients of sum(y * r), for x of `shape` normalized over `norm`.
Result run(const char* mode, DType t, const Shape& shape, const Shape& norm) {
  LayerNormMode m(mode);
  Tensor x = random_tensor(shape, DType::F32, -1, 2, 7).to(t),
         w = random_tensor(norm, DType::F32, 0.5, 1.5, 8).to(t);
  Tensor b = random_tensor(norm, DType::F32, -1, 1, 9).to(t),
         r = random_tensor(shape, DType::F32, -1, 1, 10).to(t);
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  Tensor y = F::layer_norm(x, norm, w, b);
  (y * r).sum().backward();
  return {y.to_vector<double>(), x.grad().to_vector<double>(), w.grad().to_vector<double>(),
          b.grad().to_vector<double>()};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol) << what;
}

void expect_same(const Result& got, const Result& want, double tol) {
  expect_close(got.y, want.y, tol, "y");
  expect_close(got.dx, want.dx, tol, "dx");
  expect_close(got.dw, want.dw, 10 * tol, "dweight");  // sums over rows
  expect_close(got.db, want.db, 10 * tol, "dbias");
}

TEST(LayerNormTile, MatchesGeneratedKernelsForwardAndBackward) {
  for (auto [shape, norm] :
       std::vector<std::pair<Shape, Shape>>{{{2, 35, 100}, {100}}, {{33, 65}, {65}}, {{7, 5, 13}, {5, 13}}}) {
    SCOPED_TRACE(shape_str(shape));
    int64_t launches = stats().tile_launches;
    Result tile = run("tile", DType::F32, shape, norm);
    EXPECT_GE(stats().tile_launches, launches + 2);  // forward and backward ran as tile programs
    expect_same(tile, run("generated", DType::F32, shape, norm), 2e-5);
  }
}

TEST(LayerNormTile, F32TileMatchesF64GeneratedKernels) {
  Shape shape{70, 100}, norm{100};
  expect_same(run("tile", DType::F32, shape, norm), run("generated", DType::F64, shape, norm), 2e-5);
}

TEST(LayerNormTile, Bf16) {
  Shape shape{33, 65}, norm{65};
  expect_same(run("tile", DType::BF16, shape, norm), run("generated", DType::F64, shape, norm), 3e-2);
}

// f64 LAYER_NORM nodes take their composite (the tile kernels take f32 and bf16): its backward is
// the closed form, not autograd through the generated path's graph, so they agree to rounding
TEST(LayerNormTile, F64FallsBackToTheComposite) {
  int64_t launches = stats().tile_launches;
  Result tile = run("tile", DType::F64, {33, 65}, {65});
  EXPECT_EQ(stats().tile_launches, launches);
  expect_same(tile, run("generated", DType::F64, {33, 65}, {65}), 1e-12);
}

TEST(LayerNormTile, WithoutWeightAndBiasAndWithoutGradients) {
  LayerNormMode m("tile");
  Tensor x = random_tensor({33, 65}, DType::F32, -1, 1, 11);
  std::vector<double> got = F::layer_norm(x, {65}).to_vector<double>();
  settings().layernorm = "generated";
  expect_close(got, F::layer_norm(x, {65}).to_vector<double>(), 2e-5, "y");
}

// Rows of a symbolic count: each binding's layer norm runs a tile program split for its own rows
// (the layer norm's result has concrete dims, so kernels after it are made per size).
TEST(LayerNormTile, SymbolicRowsAtSeveralBindings) {
  Var R("R", 1, 256);
  for (int64_t rows : {40, 7, 130, 40}) {
    SCOPED_TRACE("rows = " + std::to_string(rows));
    Tensor x = random_tensor({rows, 65}, DType::F32, -1, 2, 20 + rows).symbolic(0, R);
    Tensor w = random_tensor({65}, DType::F32, 0.5, 1.5, 8), b = random_tensor({65}, DType::F32, -1, 1, 9);
    std::vector<double> got, want;
    {
      LayerNormMode m("tile");
      int64_t launches = stats().tile_launches;
      got = F::layer_norm(x, {65}, w, b).to_vector<double>();
      EXPECT_GT(stats().tile_launches, launches);
    }
    {
      LayerNormMode m("generated");
      want = F::layer_norm(x, {65}, w, b).to_vector<double>();
    }
    expect_close(got, want, 2e-5, "y");
  }
}

TEST(LayerNormTile, UnknownModeIsAnError) {
  LayerNormMode m("fast");
  Tensor x = random_tensor({3, 4}, DType::F32, -1, 1, 12);
  try {
    F::layer_norm(x, {4});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("KILN_LAYERNORM (settings().layernorm) must be 'tile' or 'generated'"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::testing
