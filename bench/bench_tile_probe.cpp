// The tile layernorm on the GPU, for profiling: forward (264 cores), backward (weight gradients over
// rows on a grid of grid_rows x grid_cols cores, default 12 x 22: two cores per SM) and both, each
// called `reps` times; prints each one's median wall time of a whole synchronized call. Usage:
// bench_tile_probe [N C reps grid_rows grid_cols]; under a profiler, the launches come in that order
// (forward, backward, then forward and backward alternately).
#include <kiln/kiln.h>
#include <kiln/tile_ops.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace kiln;

namespace {

double median_wall_ms(const std::function<void()>& fn, int reps) {
  std::vector<double> wall;
  for (int i = 0; i < reps; i++) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(Device::cuda());
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
  std::sort(wall.begin(), wall.end());
  return wall[wall.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("bench_tile_probe: no usable CUDA GPU (%s)\n", why.c_str());
    return 0;
  }
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 32768, C = argc > 2 ? std::atoll(argv[2]) : 768;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 30, cores = 264;
  const Device gpu = Device::cuda();
  Tensor x = randn({N, C}, {.device = gpu}).realize(), w = randn({C}, {.device = gpu}).realize(),
         b = randn({C}, {.device = gpu}).realize(), dy = randn({N, C}, {.device = gpu}).realize();
  const tile::Grid grid =
      tile::Grid::grid2d(argc > 4 ? std::atoi(argv[4]) : 12, argc > 5 ? std::atoi(argv[5]) : 22);
  auto f = tile::layernorm_forward(x, w, b, 1e-5, cores);
  auto fwd = [&] { tile::layernorm_forward(x, w, b, 1e-5, cores); };
  auto bwd = [&] {
    tile::layernorm_backward(dy, x, w, f.mean, f.rstd, Tensor(), Tensor(), tile::WeightGrads::OverRows, grid);
  };
  auto both = [&] {
    auto o = tile::layernorm_forward(x, w, b, 1e-5, cores);
    tile::layernorm_backward(dy, x, w, o.mean, o.rstd, Tensor(), Tensor(), tile::WeightGrads::OverRows, grid);
  };
  double tf = median_wall_ms(fwd, reps), tb = median_wall_ms(bwd, reps), tfb = median_wall_ms(both, reps);
  std::printf("tile layernorm %lldx%lld f32: forward %.3f ms, backward %.3f ms, both %.3f ms\n",
              static_cast<long long>(N), static_cast<long long>(C), tf, tb, tfb);
  return 0;
}
