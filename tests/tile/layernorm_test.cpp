// The layernorm kernels: forward over rows, backward with one core, over columns and over rows with
// the cross-core reduction on a 2D grid, gradient accumulation; shapes not multiples of 32, several
// core counts, f32 and bf16, each against the float64 reference with its error report; rows of the
// benchmarks' lengths streamed in chunks whose CBs fit a GPU core's shared memory.
#include "tile/kernel_report.h"

namespace kiln::testing {
namespace {

using tile::Grid;
using tile::WeightGrads;

constexpr double kEps = 1e-5;

struct Case {
  Tensor x, w, b, dout;
  int64_t N, C;
};

Case make_case(int64_t N, int64_t C, DType t) {
  // an offset mean makes a masking mistake (padded columns in the variance) visible
  return Case{tile_input({N, C}, 111, t, 0.5, 2.5),
              tile_input({C}, 112, t, 0.5, 1.5),
              tile_input({C}, 113, t),
              tile_input({N, C}, 114, t),
              N,
              C};
}

std::string shape_name(const Case& k) { return std::to_string(k.N) + "x" + std::to_string(k.C); }

void check_forward(int64_t N, int64_t C, int cores, DType t) {
  Case k = make_case(N, C, t);
  auto got = tile::layernorm_forward(k.x, k.w, k.b, kEps, cores);
  auto want = tile::ref::layernorm_forward(ref_values(k.x), ref_values(k.w), ref_values(k.b), N, C, kEps);
  std::string name = "layernorm fwd " + shape_name(k) + " on " + std::to_string(cores);
  bool f32 = t == DType::F32;
  report_errors(name + " out", t, got.out, want.out, f32 ? 2e-5 : 5e-2);
  report_errors(name + " mean", t, got.mean, want.mean, f32 ? 1e-6 : 1e-5);
  report_errors(name + " rstd", t, got.rstd, want.rstd, f32 ? 1e-5 : 1e-4);
}

TEST(TileLayerNorm, ForwardOverRows) {
  for (int cores : {1, 3, 8}) check_forward(70, 100, cores, DType::F32);
  check_forward(33, 65, 3, DType::F32);
  check_forward(64, 96, 2, DType::F32);  // aligned
}

// A call like an earlier one (shapes, dtypes, cores) runs the program kept from it on its own
// tensors; calls at other shapes in between keep their own programs.
TEST(TileLayerNorm, RepeatedCallsRunOnTheirOwnTensors) {
  check_forward(70, 100, 3, DType::F32);
  Case k = make_case(70, 100, DType::F32);
  Tensor x2 = tile_input({70, 100}, 121, DType::F32, -1.0, 3.0);
  auto first = tile::layernorm_forward(k.x, k.w, k.b, kEps, 3);
  check_forward(33, 65, 3, DType::F32);
  auto second = tile::layernorm_forward(x2, k.w, k.b, kEps, 3);
  auto want1 = tile::ref::layernorm_forward(ref_values(k.x), ref_values(k.w), ref_values(k.b), 70, 100, kEps);
  auto want2 = tile::ref::layernorm_forward(ref_values(x2), ref_values(k.w), ref_values(k.b), 70, 100, kEps);
  report_errors("layernorm fwd first call out", DType::F32, first.out, want1.out, 2e-5);
  report_errors("layernorm fwd second call out", DType::F32, second.out, want2.out, 2e-5);
  report_errors("layernorm fwd second call rstd", DType::F32, second.rstd, want2.rstd, 1e-5);
}

TEST(TileLayerNorm, ForwardBf16) { check_forward(70, 100, 3, DType::BF16); }

// Backward checked against the reference fed with the forward's own mean and rstd.
void check_backward(int64_t N, int64_t C, WeightGrads s, Grid grid, DType t, bool accumulate) {
  Case k = make_case(N, C, t);
  auto fwd = tile::layernorm_forward(k.x, k.w, k.b, kEps, 2);
  Tensor dw_in, db_in;
  if (accumulate) dw_in = tile_input({C}, 115, t), db_in = tile_input({C}, 116, t);
  auto got = tile::layernorm_backward(k.dout, k.x, k.w, fwd.mean, fwd.rstd, dw_in, db_in, s, grid);
  auto want = tile::ref::layernorm_backward(ref_values(k.dout), ref_values(k.x), ref_values(k.w),
                                            ref_values(fwd.mean), ref_values(fwd.rstd), N, C);
  if (accumulate) {
    auto dw0 = ref_values(dw_in), db0 = ref_values(db_in);
    for (int64_t j = 0; j < C; j++) want.dweight[j] += dw0[j], want.dbias[j] += db0[j];
  }
  const char* sname = s == WeightGrads::SingleCore    ? "single"
                      : s == WeightGrads::OverColumns ? "cols"
                                                      : "rows";
  std::string name = std::string("layernorm bwd ") + sname + (accumulate ? " += " : " ") + shape_name(k) +
                     " on " + std::to_string(grid.rows) + "x" + std::to_string(grid.cols);
  bool f32 = t == DType::F32;
  EXPECT_EQ(got.dx.shape(), k.x.shape());
  EXPECT_EQ(got.dweight.shape(), Shape{C});
  report_errors(name + " dx", t, got.dx, want.dx, f32 ? 1e-4 : 8e-2);
  report_errors(name + " dweight", t, got.dweight, want.dweight, f32 ? 2e-4 : 0.25);
  report_errors(name + " dbias", t, got.dbias, want.dbias, f32 ? 2e-4 : 0.25);
}

TEST(TileLayerNorm, BackwardSingleCore) {
  check_backward(70, 100, WeightGrads::SingleCore, Grid::cores(1), DType::F32, false);
  check_backward(33, 65, WeightGrads::SingleCore, Grid::cores(1), DType::F32, false);
}

TEST(TileLayerNorm, BackwardWeightGradsOverColumns) {
  for (int cores : {1, 3, 8})
    check_backward(70, 100, WeightGrads::OverColumns, Grid::cores(cores), DType::F32, false);
  check_backward(33, 65, WeightGrads::OverColumns, Grid::cores(3), DType::F32, false);
}

TEST(TileLayerNorm, BackwardWeightGradsOverRowsReducedAcrossTheGrid) {
  check_backward(70, 100, WeightGrads::OverRows, Grid::grid2d(1, 3), DType::F32, false);
  check_backward(70, 100, WeightGrads::OverRows, Grid::grid2d(3, 1), DType::F32, false);
  check_backward(70, 100, WeightGrads::OverRows, Grid::grid2d(2, 4), DType::F32, false);
  check_backward(33, 65, WeightGrads::OverRows, Grid::grid2d(2, 2), DType::F32, false);
}

TEST(TileLayerNorm, BackwardAccumulatesIntoExistingGradients) {
  check_backward(70, 100, WeightGrads::SingleCore, Grid::cores(1), DType::F32, true);
  check_backward(70, 100, WeightGrads::OverColumns, Grid::cores(3), DType::F32, true);
  check_backward(70, 100, WeightGrads::OverRows, Grid::grid2d(2, 4), DType::F32, true);
}

TEST(TileLayerNorm, BackwardBf16) {
  check_backward(70, 100, WeightGrads::SingleCore, Grid::cores(1), DType::BF16, true);
  check_backward(70, 100, WeightGrads::OverColumns, Grid::cores(3), DType::BF16, true);
  check_backward(70, 100, WeightGrads::OverRows, Grid::grid2d(2, 2), DType::BF16, true);
}

TEST(TileLayerNorm, OverRowsNeedsA2DGrid) {
  Case k = make_case(33, 65, DType::F32);
  auto fwd = tile::layernorm_forward(k.x, k.w, k.b, kEps, 1);
  std::string err = error_of([&] {
    tile::layernorm_backward(k.dout, k.x, k.w, fwd.mean, fwd.rstd, {}, {}, WeightGrads::OverRows,
                             Grid::cores(4));
  });
  EXPECT_NE(err.find("WeightGrads::OverRows reduces across a 2D grid"), std::string::npos) << err;
}

// The row lengths of the benchmark shapes (G2/G3 layernorm: C = 768; G4: C = 4096 and 8192): rows
// that fit a core's shared memory are held whole (the rows kernels, BR rows a block), longer ones
// (f32 C = 8192) stream in chunks of K tiles; either way the programs' CBs fit. A few rows (N = 40,
// a partial last block or chunk) keep the test fast.
TEST(TileLayerNorm, BenchmarkRowLengthsFitTheCBBudget) {
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t C : {768, 4096, 8192}) {
      Case k = make_case(40, C, t);
      std::string name = std::string("layernorm ") + dtype_name(t) + " C=" + std::to_string(C);
      Tensor mean = zeros({40}), rstd = ones({40}), dw = zeros({C}).to(t), db = zeros({C}).to(t);
      report_cb_bytes(name + " fwd", tile::ops::layernorm_forward_program(k.x, k.w, k.b, kEps, 2), "BR", "K");
      report_cb_bytes(name + " bwd rows",
                      tile::ops::layernorm_backward_program(k.dout, k.x, k.w, mean, rstd, dw, db, true,
                                                            Grid::grid2d(2, 2)),
                      "BR", "K");
      report_cb_bytes(name + " bwd wgrad cols",
                      tile::ops::layernorm_wgrad_cols_program(k.dout, k.x, mean, rstd, dw, db, 2), "BR");
      check_forward(40, C, 2, t);
      check_backward(40, C, WeightGrads::OverRows, Grid::grid2d(2, 2), t, true);
    }
  check_backward(40, 768, WeightGrads::OverColumns, Grid::cores(2), DType::F32, false);
  check_backward(40, 768, WeightGrads::SingleCore, Grid::cores(1), DType::BF16, false);
}

// Which kernel a row length gets: whole rows where they fit, chunks where they do not; a long row
// that is not a multiple of 32 goes through the chunked kernels' masking.
TEST(TileLayerNorm, LongRowsStreamInChunks) {
  Case k = make_case(33, 8200, DType::F32);
  Tensor mean = zeros({33}), rstd = ones({33}), dw = zeros({8200}), db = zeros({8200});
  auto uses = [](const tile::Program& p, const std::string& kernel) {  // the kernel's file, by #line
    return p.generated_source().find("#line 1 \"kernels/layernorm/" + kernel + "\"") != std::string::npos;
  };
  EXPECT_TRUE(uses(tile::ops::layernorm_forward_program(k.x, k.w, k.b, kEps, 2), "forward.cpp"));
  EXPECT_TRUE(uses(
      tile::ops::layernorm_backward_program(k.dout, k.x, k.w, mean, rstd, dw, db, true, Grid::grid2d(1, 2)),
      "backward.cpp"));
  Case s = make_case(33, 768, DType::F32);
  EXPECT_TRUE(uses(tile::ops::layernorm_forward_program(s.x, s.w, s.b, kEps, 2), "forward_rows.cpp"));
  EXPECT_TRUE(
      uses(tile::ops::layernorm_backward_program(s.dout, s.x, s.w, zeros({33}), ones({33}), zeros({768}),
                                                 zeros({768}), true, Grid::grid2d(1, 2)),
           "backward_rows.cpp"));
  check_forward(33, 8200, 2, DType::F32);
  check_backward(33, 8200, WeightGrads::OverRows, Grid::grid2d(1, 2), DType::F32, true);
}

}  // namespace
}  // namespace kiln::testing
