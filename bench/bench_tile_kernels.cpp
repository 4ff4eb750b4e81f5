// Tile kernels on the CPU (llm.c dev/cuda style): per kernel family, every variant is first checked
// against the float64 reference (max abs / max rel error printed), then timed next to kiln's
// generated kernels for the same op. Shapes: C1 (G1 at 2048x2048) and C2 (layernorm 4096x768, llm.c
// B*T x C). Cores = the runtime's threads (KILN_THREADS). Never asserts on time.
#include <kiln/kiln.h>
#include <kiln/tile_ops.h>

#include <cstdio>
#include <string>

#include "bench_util.h"
#include "runtime/thread_pool.h"
#include "tile/ops/reference.h"

using namespace kiln;
namespace F = nn::functional;

namespace {

double median_ms(const std::function<void()>& f) { return bench::median_ms(f, 5, 1); }

// Without ms: another output of the variant timed on a row above.
void row(const std::string& name, DType t, tile::ref::Errors e, double ms = -1) {
  char time[32] = "";
  if (ms >= 0) std::snprintf(time, sizeof time, "%.2f", ms);
  std::printf("| %-58s | %-4s | %9.2e | %9.2e | %9s |\n", name.c_str(), dtype_name(t), e.max_abs, e.max_rel,
              time);
}
void row(const std::string& name, DType t, double ms) {
  std::printf("| %-58s | %-4s | %9s | %9s | %9.2f |\n", name.c_str(), dtype_name(t), "-", "-", ms);
}
void header(const char* title) {
  std::printf("\n%s\n| %-58s | %-4s | %9s | %9s | %9s |\n|---|---|---|---|---|\n", title, "variant", "type",
              "max abs", "max rel", "ms");
}

void g1(DType t, int cores) {
  const int64_t n = 2048;
  Tensor a = rand({n, n}).to(t).realize(), b = rand({n, n}).to(t).realize(), c = rand({1, n}).to(t).realize();
  auto want = tile::ref::mul_add_tanh(tile::ref::values(a), tile::ref::values(b), tile::ref::values(c), n, n);
  for (auto [split, name] : {std::pair{tile::Split::Rows, "tile mul_add_tanh, split over rows"},
                             std::pair{tile::Split::Cols, "tile mul_add_tanh, split over columns"}}) {
    tile::ref::Errors e = tile::ref::errors(tile::mul_add_tanh(a, b, c, split, cores), want);
    row(name, t, e, median_ms([&] { tile::mul_add_tanh(a, b, c, split, cores); }));
  }
  Tensor y = (a * b + c.tanh()).realize();
  row("kiln generated kernel", t, tile::ref::errors(y, want),
      median_ms([&] { (a * b + c.tanh()).realize(); }));
}

void layernorm(DType t, int cores) {
  const int64_t N = 4096, C = 768;
  const double eps = 1e-5;
  Tensor x = randn({N, C}).to(t).realize(), w = (rand({C}) + 0.5).to(t).realize(),
         b = randn({C}).to(t).realize();
  Tensor dout = randn({N, C}).to(t).realize();
  auto X = tile::ref::values(x), W = tile::ref::values(w), B = tile::ref::values(b),
       G = tile::ref::values(dout);
  auto fwd_ref = tile::ref::layernorm_forward(X, W, B, N, C, eps);
  auto fwd = tile::layernorm_forward(x, w, b, eps, cores);
  row("tile layernorm fwd: out", t, tile::ref::errors(fwd.out, fwd_ref.out),
      median_ms([&] { tile::layernorm_forward(x, w, b, eps, cores); }));
  row("tile layernorm fwd: rstd", t, tile::ref::errors(fwd.rstd, fwd_ref.rstd));
  auto bwd_ref =
      tile::ref::layernorm_backward(G, X, W, tile::ref::values(fwd.mean), tile::ref::values(fwd.rstd), N, C);
  using S = tile::WeightGrads;
  tile::Grid grid2d = tile::Grid::grid2d(cores % 2 == 0 ? 2 : 1, cores % 2 == 0 ? cores / 2 : cores);
  for (auto [s, grid, name] : {std::tuple{S::SingleCore, tile::Grid::cores(1), "single core"},
                               std::tuple{S::OverColumns, tile::Grid::cores(cores), "dweight over columns"},
                               std::tuple{S::OverRows, grid2d, "dweight over rows, grid reduce"}}) {
    auto run = [&, s = s, grid = grid] {
      return tile::layernorm_backward(dout, x, w, fwd.mean, fwd.rstd, Tensor(), Tensor(), s, grid);
    };
    auto r = run();
    double ms = median_ms([&] { run(); });
    row(std::string("tile layernorm bwd ") + name + ": dx", t, tile::ref::errors(r.dx, bwd_ref.dx), ms);
    row(std::string("tile layernorm bwd ") + name + ": dweight", t,
        tile::ref::errors(r.dweight, bwd_ref.dweight));
    row(std::string("tile layernorm bwd ") + name + ": dbias", t, tile::ref::errors(r.dbias, bwd_ref.dbias));
  }
  // kiln's generated kernels for the same op (forward, and forward + backward through autograd)
  row("kiln generated layernorm fwd", t, tile::ref::errors(F::layer_norm(x, {C}, w, b), fwd_ref.out),
      median_ms([&] { F::layer_norm(x, {C}, w, b).realize(); }));
  for (const char* mode : {"generated", "tile"}) {
    settings().layernorm = mode;
    double ms = median_ms([&] {
      Tensor xg = x.detach(), wg = w.detach(), bg = b.detach();
      xg.requires_grad_();
      wg.requires_grad_();
      bg.requires_grad_();
      (F::layer_norm(xg, {C}, wg, bg) * dout).sum().backward();
      realize({xg.grad(), wg.grad(), bg.grad()});
    });
    row(std::string("F::layer_norm fwd+bwd, KILN_LAYERNORM=") + mode, t, ms);
  }
  settings().layernorm = "generated";
}

}  // namespace

int main() {
  int cores = std::max(1, runtime::pool_threads());
  std::printf("tile kernels on %d cores (CPU backend)\n", cores);
  for (DType t : {DType::F32, DType::BF16}) {
    header(("G1/C1: y = a*b + tanh(c), 2048x2048, c (1, 2048) broadcast over rows, " +
            std::string(dtype_name(t)))
               .c_str());
    g1(t, cores);
  }
  for (DType t : {DType::F32, DType::BF16}) {
    header(("G2/G3/C2: layernorm 4096x768, " + std::string(dtype_name(t))).c_str());
    layernorm(t, cores);
  }
}
