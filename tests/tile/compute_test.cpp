// Tile programs, compute: broadcast blocks (4,1) (1,4) (1,1), reductions over rows and columns,
// unary math, single- and multi-core matmul with K accumulation, f32 and bf16.
#include <cmath>
#include <tuple>

#include "example_kernels.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
using namespace kiln::tile_examples;

namespace {

using tile::Grid;
using tile::Program;

TEST(TileBroadcast, ColumnVectorBlocks4x1) {
  // y = a * b + c with c a 256 x 1 column vector, blocks of 4 x 2 tiles, two cores
  Tensor a = tile_input({256, 128}, 21), b = tile_input({256, 128}, 22), c = tile_input({256, 1}, 23);
  Program p = Program::from_library("broadcast/mul_add_col.cpp", Grid::cores(2));
  p.input("a", a).input("b", b).input("cvec", c).output("y", {256, 128}, DType::F32);
  p.cb("a_cb", 4, 2, DType::F32).cb("b_cb", 4, 2, DType::F32).cb("c_cb", 4, 1, DType::F32);
  p.cb("y_cb", 4, 2, DType::F32).constant("BR", 4).constant("BC", 2);
  p.runtime_args({"start", "count"}).set_runtime_args(0, {0, 1}).set_runtime_args(1, {1, 1});
  p.run();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  std::vector<float> want(av.size());
  for (int i = 0; i < 256; i++)
    for (int j = 0; j < 128; j++) want[i * 128 + j] = av[i * 128 + j] * bv[i * 128 + j] + cv[i];
  expect_near_all(p.result("y"), want, 1e-6, 1e-6);
}

// y = a + bcast(v): one block of 4 x 4 tiles; v's CB shape picks the broadcast. One block per CB is
// all it takes (buffer factor 1): two f32 blocks of 4 x 4 tiles per CB would not fit a core's CB memory.
void run_bcast(const std::string& name, const std::string& expr, Shape vshape, int vr, int vc,
               const std::function<float(float a, const std::vector<float>& v, int i, int j)>& ref) {
  Tensor a = tile_input({128, 128}, 31), v = tile_input(vshape, 32);
  Program p(name, bcast_kernel(expr), Grid::cores(1));
  p.input("a", a).input("v", v).output("y", {128, 128}, DType::F32);
  p.cb("a_cb", 4, 4, DType::F32, 1).cb("v_cb", vr, vc, DType::F32).cb("y_cb", 4, 4, DType::F32, 1);
  p.run();
  auto av = a.to_vector<float>(), vv = v.to_vector<float>();
  std::vector<float> want(av.size());
  for (int i = 0; i < 128; i++)
    for (int j = 0; j < 128; j++) want[i * 128 + j] = ref(av[i * 128 + j], vv, i, j);
  expect_near_all(p.result("y"), want, 1e-6, 1e-6);
}

TEST(TileBroadcast, ColumnBlock4x1) {
  run_bcast("bcast_cols", "ab + bcast_cols(vb)", {128, 1}, 4, 1,
            [](float a, const std::vector<float>& v, int i, int) { return a + v[i]; });
}

TEST(TileBroadcast, RowBlock1x4) {
  run_bcast("bcast_rows", "ab - bcast_rows(vb)", {1, 128}, 1, 4,
            [](float a, const std::vector<float>& v, int, int j) { return a - v[j]; });
}

TEST(TileBroadcast, ScalarBlock1x1) {
  run_bcast("bcast_scalar", "ab * bcast_scalar(vb)", {1, 1}, 1, 1,
            [](float a, const std::vector<float>& v, int, int) { return a * v[0]; });
}

// A row vector read down a column: v (1 x 128, one block of 1 x 4 tiles) gives row i its element i.
TEST(TileBroadcast, RowVectorDownAColumn) {
  run_bcast("col_of", "ab * bcast_cols(col_of<32, 4>(vb))", {1, 128}, 1, 4,
            [](float a, const std::vector<float>& v, int i, int) { return a * v[i]; });
}

// Two row reductions side by side in one scratch block (to_col), read back by column (bcast_col).
TEST(TileBroadcast, ReductionsSideBySideReadBackByColumn) {
  const std::string src = R"(
void reader() {
  auto ab = a_cb.scoped_reserve();
  dma(a.slice(0, 0, 4, 4), ab).wait();
}
void compute() {
  auto ab = a_cb.scoped_wait();
  auto s = s_cb.scoped_scratch();
  s.store(to_col<0>(reduce_sum<1>(ab)) + to_col<3>(reduce_max<1>(ab)));
  auto yb = y_cb.scoped_reserve();
  yb.store(bcast_col<0>(s) * 2.0f + bcast_col<3>(s) + bcast_col<1>(s));  // column 1 holds 0
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0, 4, 4)).wait();
}
)";
  Tensor a = tile_input({128, 128}, 33);
  Program p("to_col", src, Grid::cores(1));
  p.input("a", a).output("y", {128, 128}, DType::F32);
  p.cb("a_cb", 4, 4, DType::F32, 1).cb("s_cb", 4, 1, DType::F32, 1).cb("y_cb", 4, 4, DType::F32, 1);
  p.run();
  auto av = a.to_vector<float>();
  std::vector<float> want(av.size());
  for (int i = 0; i < 128; i++) {
    float sum = 0, mx = av[i * 128];
    for (int j = 0; j < 128; j++) sum += av[i * 128 + j], mx = std::max(mx, av[i * 128 + j]);
    for (int j = 0; j < 128; j++) want[i * 128 + j] = 2 * sum + mx;
  }
  expect_near_all(p.result("y"), want, 1e-5, 1e-5);
}

TEST(TileCompute, ReduceOverRowsAndColumnsAndUnaryMath) {
  Tensor x = tile_input({64, 64}, 41, DType::F32, -2, 2);
  Program p("reduce_math", kReduceMath, Grid::cores(1));
  p.input("x", x).output("sums", {1, 64}, DType::F32).output("maxes", {64, 1}, DType::F32);
  p.output("math", {64, 64}, DType::F32);
  p.cb("x_cb", 2, 2, DType::F32).cb("s_cb", 1, 2, DType::F32).cb("m_cb", 2, 1, DType::F32);
  p.cb("u_cb", 2, 2, DType::F32);
  p.run();
  auto xv = x.to_vector<float>();
  std::vector<float> sums(64, 0), maxes(64, -INFINITY), math(xv.size());
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      float v = xv[i * 64 + j];
      sums[j] += v;
      maxes[i] = std::max(maxes[i], v);
      math[i * 64 + j] = 1 / (1 + std::exp(-v)) + std::tanh(v) + std::max(v, 0.0f) + std::abs(v) - v +
                         std::exp(v) * 0.5f + std::log(std::abs(v) + 1) + std::sqrt(std::abs(v)) +
                         1 / std::sqrt(std::abs(v) + 1) - v / 3;
    }
  expect_near_all(p.result("sums"), sums, 1e-5, 1e-5);
  expect_near_all(p.result("maxes"), maxes, 0, 0);
  expect_near_all(p.result("math"), math, 1e-5, 1e-5);
}

std::vector<float> matmul_ref(const Tensor& a, const Tensor& b, int M, int K, int N) {
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> y(M * N, 0);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < N; j++) y[i * N + j] += av[i * K + k] * bv[k * N + j];
  return y;
}

// The shipped matmul kernel on `cores` cores, run.
Tensor run_matmul(const Tensor& a, const Tensor& b, int cores, int bm, int bk, int bn, DType t) {
  Program p = matmul_program(a, b, cores, bm, bk, bn, t);
  p.run();
  return p.result("y");
}

// Column sums across blocks (ColSums, also added in a store's pass: sum_into): blocks of as many rows
// as warps, fewer rows than warps (a row shared by several warps on a GPU), a last block of padded
// rows; a data-movement role may not hold them.
TEST(TileCompute, ColumnSumsAcrossBlocks) {
  for (auto [n, c, br, warps] :
       {std::tuple{70, 768, 8, 8}, std::tuple{9, 256, 2, 8}, std::tuple{33, 96, 4, 4}}) {
    Tensor x = tile_input({n, c}, 41);
    Program p = column_sums_program(x, br, warps);
    p.run();
    auto xv = x.to_vector<float>();
    std::vector<float> want(3 * c, 0.0f);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < c; j++) {
        const float v = xv[i * c + j];
        want[j] += v * v + v;
        want[c + j] += v;
        want[2 * c + j] += 2 * v;
      }
    expect_near_all(p.result("y"), want, 1e-5, 1e-5);
  }
  std::string bad = kColumnSums;
  bad.replace(bad.find("void reader() {") + 15, 0, "\n  col_sums(x_cb).add(x_cb.reserve());");
  Program p = column_sums_program(tile_input({8, 64}, 42), 8, 8, bad.c_str());
  std::string err = error_of([&] { p.run(); });
  EXPECT_NE(
      err.find(
          "ColSums::add in data-movement role 'reader': column sums are held by the compute role's threads"),
      std::string::npos)
      << err;
}

TEST(TileMatmul, SingleCoreAccumulatesOverK) {
  Tensor a = tile_input({64, 128}, 51), b = tile_input({128, 96}, 52);
  expect_near_all(run_matmul(a, b, 1, 1, 1, 1, DType::F32), matmul_ref(a, b, 64, 128, 96), 1e-4, 1e-4);
}

TEST(TileMatmul, MultiCoreWithBlocks) {
  Tensor a = tile_input({128, 128}, 53), b = tile_input({128, 128}, 54);
  expect_near_all(run_matmul(a, b, 3, 2, 2, 1, DType::F32), matmul_ref(a, b, 128, 128, 128), 1e-4, 1e-4);
}

TEST(TileMatmul, Bf16) {
  Tensor a = tile_input({64, 64}, 55, DType::BF16), b = tile_input({64, 64}, 56, DType::BF16);
  expect_near_all(run_matmul(a, b, 2, 1, 1, 1, DType::BF16), matmul_ref(a, b, 64, 64, 64), 2e-2, 5e-2);
}

}  // namespace
}  // namespace kiln::testing
