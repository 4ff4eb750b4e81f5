// The tile layernorm on the GPU, for profiling: forward (264 cores by default), backward (weight gradients
// over rows on a grid of grid_rows x grid_cols cores, default 6 x 22: one core per SM) and both, each
// called `reps` times; prints each one's median wall time of a whole synchronized call and its
// median time between device events recorded around the call. Usage:
// bench_tile_probe [N C reps grid_rows grid_cols forward_cores]; under a profiler, the launches come in that
// order (forward, backward, then forward and backward alternately).
#include <kiln/kiln.h>
#include <kiln/tile_ops.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.h"
#include "runtime/cuda/context.h"
#include "tile/ops/programs.h"

using namespace kiln;

int main(int argc, char** argv) {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("bench_tile_probe: no usable CUDA GPU (%s)\n", why.c_str());
    return 0;
  }
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 32768, C = argc > 2 ? std::atoll(argv[2]) : 768;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 30, cores = argc > 6 ? std::atoi(argv[6]) : 264;
  const Device gpu = Device::cuda();
  Tensor x = randn({N, C}, {.device = gpu}).realize(), w = randn({C}, {.device = gpu}).realize(),
         b = randn({C}, {.device = gpu}).realize(), dy = randn({N, C}, {.device = gpu}).realize();
  const tile::Grid grid =
      tile::Grid::grid2d(argc > 4 ? std::atoi(argv[4]) : 6, argc > 5 ? std::atoi(argv[5]) : 22);
  auto f = tile::layernorm_forward(x, w, b, 1e-5, cores);
  auto fwd = [&] { tile::layernorm_forward(x, w, b, 1e-5, cores); };
  auto bwd = [&] {
    tile::layernorm_backward(dy, x, w, f.mean, f.rstd, Tensor(), Tensor(), tile::WeightGrads::OverRows, grid);
  };
  auto both = [&] {
    auto o = tile::layernorm_forward(x, w, b, 1e-5, cores);
    tile::layernorm_backward(dy, x, w, o.mean, o.rstd, Tensor(), Tensor(), tile::WeightGrads::OverRows, grid);
  };
  // a whole synchronized call each (no warm-up: each is already compiled by the calls before it)
  auto wall = [&](auto f) {
    return bench::median_ms(
        [&] {
          f();
          synchronize(gpu);
        },
        reps, 0);
  };
  // device events around a call (as PyTorch is timed): the host's work up to its last launch
  // included, not the wait for the end
  auto events = [&](auto f) {
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
      runtime::cuda::timer_start(0);
      f();
      t.push_back(runtime::cuda::timer_stop_ms(0));
    }
    synchronize(gpu);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // the backward's dx alone (no weight gradients: no column sums per block, no cross-core tail)
  Tensor zero = zeros({C}, {.device = gpu}).realize();
  tile::Program dx_only =
      tile::ops::layernorm_backward_program(dy, x, w, f.mean, f.rstd, zero, zero, false, grid);
  auto bwd_dx = [&] { dx_only.run(); };
  double tf = wall(fwd), tb = wall(bwd), tfb = wall(both);
  std::printf(
      "tile layernorm %lldx%lld f32: forward %.3f ms, backward %.3f ms, both %.3f ms (wall, synchronized)\n",
      static_cast<long long>(N), static_cast<long long>(C), tf, tb, tfb);
  tf = events(fwd), tb = events(bwd), tfb = events(both);
  std::printf(
      "tile layernorm %lldx%lld f32: forward %.3f ms, backward %.3f ms, both %.3f ms (device events)\n",
      static_cast<long long>(N), static_cast<long long>(C), tf, tb, tfb);
  std::printf("tile layernorm %lldx%lld f32: backward dx alone %.3f ms (device events)\n",
              static_cast<long long>(N), static_cast<long long>(C), events(bwd_dx));
  // calls queued back to back between two events: the device's time per call, the host's hidden
  // where it is shorter (kernels and the gaps between them)
  auto queued = [&](auto f) {
    runtime::cuda::timer_start(0);
    for (int i = 0; i < reps; i++) f();
    const double ms = runtime::cuda::timer_stop_ms(0) / reps;
    synchronize(gpu);
    return ms;
  };
  std::printf(
      "tile layernorm %lldx%lld f32: forward %.4f ms, backward %.4f ms, both %.4f ms, dx alone %.4f ms "
      "(calls queued back to back, per call)\n",
      static_cast<long long>(N), static_cast<long long>(C), queued(fwd), queued(bwd), queued(both),
      queued(bwd_dx));
  // the host's part of a call (the entry point queues its launch and returns; the launches pile up
  // in the stream, so the host times are the host's alone)
  auto host_us = [&](auto g) {
    double ms = bench::median_ms(g, reps, 2);
    synchronize(gpu);
    return ms * 1e3;
  };
  std::printf("host per call: forward %.1f us, backward %.1f us\n", host_us(fwd), host_us(bwd));
  return 0;
}
