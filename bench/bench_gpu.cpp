// GPU workloads G1-G7 (see bench/README or docs): kiln's generated CUDA kernels, one JSON line per
// workload: device time of the kernels (KILN_PROFILE events, first launch to last), the wall time of
// a whole call (graph building, scheduling and launch included), and bytes or FLOPs for rates.
// Usage: bench_gpu [G1 G2 ...]   (default: all). Results are checked against a CPU reference first.
#include <kiln/kiln.h>
#include <kiln/tile_ops.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "kiln/debug.h"
#include "runtime/buffer.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/copy.h"
#include "runtime/cuda/driver.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

const Device gpu = Device::cuda();

// Inputs are realized once: a lazy random tensor would be drawn again inside every timed step.
Tensor rnd(Shape s, TensorOptions o) { return randn(std::move(s), o).realize(); }

struct Timing {
  double device_ms, wall_ms;
};

// Median device time (KILN_PROFILE) and wall time of fn, which builds and realizes one step.
Timing time_step(const std::function<void()>& fn, int reps = 20, int warmup = 3) {
  settings().profile = true;
  for (int i = 0; i < warmup; i++) fn();
  synchronize(gpu);
  std::vector<double> dev, wall;
  for (int i = 0; i < reps; i++) {
    double before = stats().device_ms;
    auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(gpu);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    dev.push_back(stats().device_ms - before);
  }
  settings().profile = false;
  std::sort(dev.begin(), dev.end());
  std::sort(wall.begin(), wall.end());
  return {dev[dev.size() / 2], wall[wall.size() / 2]};
}

void report(const char* id, const char* name, Timing t, double bytes, double flops, int64_t kernels) {
  std::printf("{\"workload\": \"%s\", \"name\": \"%s\", \"impl\": \"kiln\", \"ms\": %.4f, \"step_ms\": %.4f",
              id, name, t.device_ms, t.wall_ms);
  if (bytes > 0) std::printf(", \"GB/s\": %.1f", bytes / t.device_ms / 1e6);
  if (flops > 0) std::printf(", \"TFLOP/s\": %.2f", flops / t.device_ms / 1e9);
  std::printf(", \"kernels\": %lld}\n", static_cast<long long>(kernels));
  std::fflush(stdout);
}

// Relative L2 error of got against want (both realized, any device).
double rel_err(const Tensor& got, const Tensor& want) {
  auto g = got.to(DType::F64).to_vector<double>(), w = want.to(DType::F64).to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); i++) {
    if (std::isnan(g[i])) return INFINITY;
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

void check(const char* what, double err, double tol) {
  if (!(err <= tol)) {
    std::fprintf(stderr, "bench_gpu: %s differs from the reference: relative error %.3g > %.3g\n", what, err,
                 tol);
    std::exit(1);
  }
  std::fprintf(stderr, "bench_gpu: %s checked (relative error %.2e)\n", what, err);
}

int64_t kernels_of(const std::function<void()>& fn) {
  int64_t k = stats().kernels_run;
  fn();
  return stats().kernels_run - k;
}

void copy_bandwidth() {
  size_t n = size_t{1} << 30;
  Buffer a(DType::U8, static_cast<int64_t>(n), gpu), b(DType::U8, static_cast<int64_t>(n), gpu);
  auto ptr = [](Buffer& x) { return reinterpret_cast<runtime::cuda::CUdeviceptr>(x.data); };
  std::vector<double> ms;
  for (int i = 0; i < 20; i++) {
    runtime::cuda::timer_start(0);
    runtime::cuda::copy_device(0, ptr(b), ptr(a), n);
    ms.push_back(runtime::cuda::timer_stop_ms(0));
  }
  std::sort(ms.begin(), ms.end());
  report("copy", "copy_1GiB", {ms[ms.size() / 2], ms[ms.size() / 2]}, 2.0 * static_cast<double>(n), 0, 1);
}

void g1() {
  int64_t R = 8192, C = 8192;
  Tensor a = rnd({R, C}, {.device = gpu}), b = rnd({R, C}, {.device = gpu}), c = rnd({1, C}, {.device = gpu});
  auto f = [&] { return a * b + c.tanh(); };
  Tensor small = (a.slice(0, 0, 64) * b.slice(0, 0, 64) + c.tanh()).to(Device::cpu());
  Tensor ref =
      a.slice(0, 0, 64).to(Device::cpu()) * b.slice(0, 0, 64).to(Device::cpu()) + c.to(Device::cpu()).tanh();
  check("G1", rel_err(small, ref), 1e-5);
  int64_t k = kernels_of([&] { f().realize(); });
  report("G1", "eltwise_bcast_8192x8192_f32", time_step([&] { f().realize(); }), 3.0 * R * C * 4, 0, k);
}

void layernorm(int64_t N, int64_t C, DType dt) {
  Tensor x = rnd({N, C}, {.dtype = dt, .device = gpu}), w = rnd({C}, {.dtype = dt, .device = gpu}),
         bb = rnd({C}, {.dtype = dt, .device = gpu}), dy = rnd({N, C}, {.dtype = dt, .device = gpu});
  double es = static_cast<double>(dtype_size(dt));
  std::string sfx = std::to_string(N) + "x" + std::to_string(C) + "_" + dtype_name(dt);
  // reference: the same op on the CPU in f64 for the first rows
  Tensor xs = x.slice(0, 0, 16);
  Tensor ref = F::layer_norm(xs.to(Device::cpu()).to(DType::F64), {C}, w.to(Device::cpu()).to(DType::F64),
                             bb.to(Device::cpu()).to(DType::F64));
  check(("G2 " + sfx).c_str(), rel_err(F::layer_norm(xs, {C}, w, bb).realize(), ref),
        dt == DType::F32 ? 1e-5 : 1e-2);
  auto fwd = [&] { F::layer_norm(x, {C}, w, bb).realize(); };
  bool base = N == 32768 && dt == DType::F32;
  report(base ? "G2" : "G4", ("layernorm_fwd_" + sfx).c_str(), time_step(fwd), 2.0 * N * C * es, 0,
         kernels_of(fwd));
  Tensor xg = x.detach(), wg = w.detach(), bg = bb.detach();
  xg.requires_grad_(), wg.requires_grad_(), bg.requires_grad_();
  auto fb = [&] {
    xg.zero_grad(), wg.zero_grad(), bg.zero_grad();
    (F::layer_norm(xg, {C}, wg, bg) * dy).sum().backward();
    kiln::realize({xg.grad(), wg.grad(), bg.grad()});
  };
  report(base ? "G3" : "G4", ("layernorm_fwdbwd_" + sfx).c_str(), time_step(fb), 5.0 * N * C * es, 0,
         kernels_of(fb));
}

void g5() {
  int64_t N = 8192, V = 50304;
  Tensor logits = rnd({N, V}, {.device = gpu});
  Tensor tgt = randint(0, V, {N}, {.dtype = DType::I64, .device = gpu}).realize();
  Tensor lg = logits.detach();
  lg.requires_grad_();
  auto fb = [&] {
    lg.zero_grad();
    F::cross_entropy(lg, tgt).backward();
    lg.grad().realize();
  };
  fb();
  // reference on the CPU for a slice of rows: d loss / d logits = (softmax - onehot) / N
  Tensor l16 = logits.slice(0, 0, 16).to(Device::cpu()).to(DType::F64);
  Tensor t16 = tgt.slice(0, 0, 16).to(Device::cpu());
  Tensor ref = (l16.softmax(1) - one_hot(t16, V).to(DType::F64)) / static_cast<double>(N);
  check("G5", rel_err(lg.grad().slice(0, 0, 16), ref), 1e-4);
  report("G5", "xent_fwdbwd_8192x50304_f32", time_step(fb, 10), 2.0 * N * V * 4, 0, kernels_of(fb));
}

void g6(int64_t n) {
  Tensor a = rnd({n, n}, {.dtype = DType::BF16, .device = gpu}),
         b = rnd({n, n}, {.dtype = DType::BF16, .device = gpu});
  Tensor ref = a.slice(0, 0, 8).to(Device::cpu()).to(DType::F64).matmul(b.to(Device::cpu()).to(DType::F64));
  check("G6", rel_err(a.slice(0, 0, 8).matmul(b), ref), 1e-2);
  auto f = [&] { a.matmul(b).realize(); };
  report("G6", ("matmul_" + std::to_string(n) + "_bf16").c_str(), time_step(f, 5, 1), 0, 2.0 * n * n * n,
         kernels_of(f));
}

void g7() {
  int64_t B = 16, H = 12, T = 1024, D = 64;
  Tensor q = rnd({B, H, T, D}, {.dtype = DType::BF16, .device = gpu}),
         k = rnd({B, H, T, D}, {.dtype = DType::BF16, .device = gpu}),
         v = rnd({B, H, T, D}, {.dtype = DType::BF16, .device = gpu});
  Tensor i = arange(T, {.device = gpu});
  Tensor causal = i.unsqueeze(1) >= i.unsqueeze(0);
  auto f = [&] {
    Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
    att = where(causal, att, -INFINITY).softmax(-1);
    att.matmul(v).realize();
  };
  double flops = 4.0 * B * H * T * T * D / 2;
  report("G7", "attention_fwd_b16h12t1024d64_bf16", time_step(f, 5, 1), 0, flops, kernels_of(f));
  // the same as one op: the flash-attention kernel
  auto sdpa = [&] { F::scaled_dot_product_attention(q, k, v, {.is_causal = true}).realize(); };
  report("G7", "attention_fwd_b16h12t1024d64_bf16_sdpa", time_step(sdpa, 5, 1), 0, flops, kernels_of(sdpa));
  // forward and backward (the backward recomputes the scores from q and k: 3.5x the forward's FLOPs,
  // the usual count)
  Tensor qg = q.detach(), kg = k.detach(), vg = v.detach(),
         dy = rnd({B, H, T, D}, {.dtype = DType::BF16, .device = gpu});
  for (Tensor* t : {&qg, &kg, &vg}) t->requires_grad_();
  auto fb = [&] {
    Tensor y = F::scaled_dot_product_attention(qg, kg, vg, {.is_causal = true});
    std::vector<Tensor> g = grad({y}, {qg, kg, vg}, {dy});
    realize({y, g[0], g[1], g[2]});
  };
  report("G7", "attention_fwdbwd_b16h12t1024d64_bf16_sdpa", time_step(fb, 5, 1), 0, 3.5 * flops,
         kernels_of(fb));
}

// The tile kernels (kernels/) on the GPU for G1, G2 and G3, timed as torch_anchors.py times
// PyTorch: device events recorded before and after the call (its host work up to the last launch
// included), median of `reps`; and the wall time of the call with the wait for its end.
Timing time_events(const std::function<void()>& fn, int reps = 30, int warmup = 3) {
  for (int i = 0; i < warmup; i++) fn();
  synchronize(gpu);
  std::vector<double> events, wall;
  for (int i = 0; i < reps; i++) {
    auto t0 = std::chrono::steady_clock::now();
    runtime::cuda::timer_start(0);
    fn();
    events.push_back(runtime::cuda::timer_stop_ms(0));
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
  synchronize(gpu);  // the launches' error logs
  std::sort(events.begin(), events.end());
  std::sort(wall.begin(), wall.end());
  return {events[events.size() / 2], wall[wall.size() / 2]};
}

// `grid`: the backward's 2D grid over rows (all cores resident at once; at 32768 x 768 one per SM,
// whose CBs then hold blocks of 8 rows in 3 slots, ran the rows backward faster than two per SM on
// an H200: 165 against 177 us).
void tile_layernorm(int64_t N, int64_t C, bool fwdbwd, tile::Grid grid_rows, bool single = true) {
  int cores = 264;
  Tensor x = rnd({N, C}, {.device = gpu}), w = rnd({C}, {.device = gpu}), bb = rnd({C}, {.device = gpu}),
         dy = rnd({N, C}, {.device = gpu});
  std::string shape = std::to_string(N) + "x" + std::to_string(C) + "_f32_tile";
  auto f = tile::layernorm_forward(x, w, bb, 1e-5, cores);
  if (fwdbwd) {
    Tensor ref =
        F::layer_norm(x.slice(0, 0, 16).to(Device::cpu()), {C}, w.to(Device::cpu()), bb.to(Device::cpu()));
    check("G2 tile", rel_err(f.out.slice(0, 0, 16).to(Device::cpu()), ref), 1e-5);
    report("G2", ("layernorm_fwd_" + shape).c_str(),
           time_events([&] { tile::layernorm_forward(x, w, bb, 1e-5, cores); }), 2.0 * N * C * 4, 0, 1);
  }
  // the weight-gradient strategies against each other: backward alone (reads x, dy; writes dx),
  // and with the forward (G3)
  for (auto [strategy, name, grid] :
       {std::tuple{tile::WeightGrads::SingleCore, "single", tile::Grid::cores(1)},
        std::tuple{tile::WeightGrads::OverColumns, "cols", tile::Grid::cores(132)},  // all resident at once
        std::tuple{tile::WeightGrads::OverRows, "rows_grid", grid_rows}}) {
    if (strategy == tile::WeightGrads::SingleCore && !single) continue;
    if (strategy == tile::WeightGrads::SingleCore && N * C > (int64_t{1} << 23)) {
      // one core for the whole backward: run once, timed, as the reference point
      auto t0 = std::chrono::steady_clock::now();
      tile::layernorm_backward(dy, x, w, f.mean, f.rstd, Tensor(), Tensor(), strategy, grid);
      synchronize(gpu);
      double ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
      report("G3", ("layernorm_bwd_" + shape + "_" + name).c_str(), {ms, ms}, 3.0 * N * C * 4, 0, 1);
      continue;
    }
    auto bwd = [&] {
      tile::layernorm_backward(dy, x, w, f.mean, f.rstd, Tensor(), Tensor(), strategy, grid);
    };
    bwd();
    report("G3", ("layernorm_bwd_" + shape + "_" + name).c_str(), time_events(bwd, 30), 3.0 * N * C * 4, 0,
           1);
    if (!fwdbwd || strategy == tile::WeightGrads::SingleCore) continue;
    auto fb = [&] {
      auto fw = tile::layernorm_forward(x, w, bb, 1e-5, cores);
      tile::layernorm_backward(dy, x, w, fw.mean, fw.rstd, Tensor(), Tensor(), strategy, grid);
    };
    report("G3", ("layernorm_fwdbwd_" + shape + "_" + name).c_str(), time_events(fb, 30), 5.0 * N * C * 4, 0,
           2);
  }
}

void tile_kernels() {
  int cores = 264;
  tile_layernorm(32768, 768, true, tile::Grid::grid2d(6, 22));
  tile_layernorm(8192, 4096, false, tile::Grid::grid2d(8, 16));
  {  // last: its row split may not fit a block's shared memory
    int64_t R = 8192, C = 8192;
    Tensor a = rnd({R, C}, {.device = gpu}), b = rnd({R, C}, {.device = gpu}),
           c = rnd({1, C}, {.device = gpu});
    Tensor ref = (a.slice(0, 0, 64) * b.slice(0, 0, 64) + c.tanh()).to(Device::cpu());
    for (auto [split, name] :
         {std::pair{tile::Split::Rows, "tile_rows"}, std::pair{tile::Split::Cols, "tile_cols"}}) {
      Tensor y = tile::mul_add_tanh(a, b, c, split, cores);
      check(name, rel_err(y.slice(0, 0, 64).to(Device::cpu()), ref), 1e-5);
      report("G1", (std::string("eltwise_bcast_8192x8192_f32_") + name).c_str(),
             time_events([&] { tile::mul_add_tanh(a, b, c, split, cores); }), 3.0 * R * C * 4, 0, 1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("bench_gpu: no usable CUDA GPU (%s)\n", why.c_str());
    return 0;
  }
  std::set<std::string> want(argv + 1, argv + argc);
  auto on = [&](const char* id) { return want.empty() || want.count(id); };
  std::fprintf(stderr, "bench_gpu: %s", runtime::cuda::describe(runtime::cuda::availability()).c_str());
  if (on("copy")) copy_bandwidth();
  if (on("G1")) g1();
  if (on("G2") || on("G3")) layernorm(32768, 768, DType::F32);
  if (on("G4")) {
    layernorm(32768, 768, DType::BF16);
    layernorm(8192, 4096, DType::F32);
  }
  if (on("G5")) g5();
  if (on("G6")) g6(2048);
  if (on("G7")) g7();
  if (on("G6big")) g6(8192);
  if (on("tile_ln") && !on("tile"))
    tile_layernorm(32768, 768, true, tile::Grid::grid2d(6, 22), false);  // G2/G3, no single core
  if (on("tile")) {
    try {
      tile_kernels();
    } catch (const Error& e) {  // report and go on: the other workloads' lines are already out
      std::fprintf(stderr, "bench_gpu: tile kernels failed: %s\n", e.what());
    }
  }
  return 0;
}
