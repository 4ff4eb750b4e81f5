// Tile programs on a GPU: the CPU examples (eltwise by rows and columns, bf16, unaligned shapes,
// broadcast blocks, reductions and math, matmul with K accumulation, multicast on a 2D grid,
// semaphores) and the shipped kernels at the benchmarks' row lengths run on CUDA tensors and must
// match the CPU backend; a deadlock is reported by the device watchdog; a second launch compiles
// nothing. Without a GPU these skip, except the checks that NVRTC (when installed) compiles every
// example and the shipped kernels for sm_90, which need no device.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <tuple>

#include "example_kernels.h"
#include "kiln/debug.h"
#include "tile/ops/programs.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
using namespace kiln::tile_examples;

namespace {

using tile::Grid;
using tile::Program;

#define KILN_REQUIRE_GPU()                                                        \
  do {                                                                            \
    std::string why;                                                              \
    if (!kiln::cuda_available(&why)) GTEST_SKIP() << "no CUDA GPU here: " << why; \
  } while (0)

// ---- the example programs, built for tensors on a given device ----

Tensor on(const Tensor& t, Device d) {
  Tensor r = t.to(d);
  r.realize();
  return r;
}

struct Case {
  std::string name;
  std::vector<std::string> outputs;
  double rtol, atol;
  std::function<Program(Device)> make;
};

// kRowMulticast on a 2 x cols grid: y (64 x 32 cols) = a + b's tile column broadcast along rows.
Program row_multicast(Device d, int cols, uint64_t seed) {
  Program p("row_multicast", kRowMulticast, Grid::grid2d(2, cols));
  p.input("a", on(tile_input({64, 32 * cols}, seed), d))
      .input("b", on(tile_input({64, 32}, seed + 1), d))
      .output("y", {64, 32 * cols}, DType::F32);
  p.cb("a_cb", 1, 1, DType::F32).cb("b_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"add_by_rows", {"y"}, 0, 1e-6, [](Device d) {
                 Program p = add_program(on(tile_input({128, 96}, 1), d), on(tile_input({128, 96}, 2), d), 4,
                                         1, 1, DType::F32);
                 for (int c = 0; c < 4; c++) p.set_runtime_args(c, {c, 1, 0, 3});
                 return p;
               }});
  v.push_back({"add_by_columns_tall_blocks", {"y"}, 0, 1e-6, [](Device d) {
                 Program p = add_program(on(tile_input({128, 96}, 3), d), on(tile_input({128, 96}, 4), d), 3,
                                         2, 1, DType::F32);
                 for (int c = 0; c < 3; c++) p.set_runtime_args(c, {0, 4, c, 1});
                 return p;
               }});
  v.push_back({"add_bf16", {"y"}, 0, 0, [](Device d) {
                 Program p = add_program(on(tile_input({64, 64}, 5, DType::BF16), d),
                                         on(tile_input({64, 64}, 6, DType::BF16), d), 2, 1, 2, DType::BF16);
                 for (int c = 0; c < 2; c++) p.set_runtime_args(c, {c, 1, 0, 2});
                 return p;
               }});
  v.push_back({"add_idle_cores", {"y"}, 0, 1e-6, [](Device d) {
                 Program p = add_program(on(tile_input({96, 32}, 7), d), on(tile_input({96, 32}, 8), d), 8, 1,
                                         1, DType::F32);
                 auto w = tile::split_work(3, 8);
                 for (int c = 0; c < 8; c++) p.set_runtime_args(c, {w[c].start, w[c].count, 0, 1});
                 return p;
               }});
  v.push_back({"add_unaligned_padded_tiles", {"y"}, 0, 1e-6, [](Device d) {
                 Program p = add_program(on(tile_input({40, 70}, 9), d), on(tile_input({40, 70}, 10), d), 2,
                                         1, 1, DType::F32);
                 p.set_runtime_args(0, {0, 1, 0, 3}).set_runtime_args(1, {1, 1, 0, 3});
                 return p;
               }});
  for (auto [n, c, br, warps] :
       {std::tuple{70, 768, 8, 8}, std::tuple{9, 256, 2, 8}, std::tuple{33, 96, 4, 4}})
    v.push_back({"column_sums_" + std::to_string(br) + "_rows", {"y"}, 1e-5, 1e-5, [=](Device d) {
                   return column_sums_program(on(tile_input({n, c}, 41), d), br, warps);
                 }});
  v.push_back({"scale_elements", {"y"}, 0, 1e-6, [](Device d) {
                 Program p("scale_elements", kScaleElements, Grid::cores(2));
                 p.input("x", on(tile_input({50, 70}, 11), d), tile::Indexing::Elements)
                     .output("y", {50, 70}, DType::F32, tile::Indexing::Elements);
                 p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
                 p.runtime_args({"row0"}).set_runtime_args(0, {0}).set_runtime_args(1, {32});
                 return p;
               }});
  v.push_back({"broadcast_mul_add_col", {"y"}, 1e-6, 1e-6, [](Device d) {
                 Program p = Program::from_library("broadcast/mul_add_col.cpp", Grid::cores(2));
                 p.input("a", on(tile_input({256, 128}, 21), d))
                     .input("b", on(tile_input({256, 128}, 22), d))
                     .input("cvec", on(tile_input({256, 1}, 23), d))
                     .output("y", {256, 128}, DType::F32);
                 p.cb("a_cb", 4, 2, DType::F32).cb("b_cb", 4, 2, DType::F32).cb("c_cb", 4, 1, DType::F32);
                 p.cb("y_cb", 4, 2, DType::F32).constant("BR", 4).constant("BC", 2);
                 p.runtime_args({"start", "count"}).set_runtime_args(0, {0, 1}).set_runtime_args(1, {1, 1});
                 return p;
               }});
  struct B {
    const char* name;
    const char* expr;
    Shape vshape;
    int vr, vc;
  };
  // 2x2-tile blocks: the CBs fit the GPU's shared memory (227 KB per block on Hopper)
  for (B b : {B{"bcast_cols", "ab + bcast_cols(vb)", {128, 1}, 2, 1},
              B{"bcast_rows", "ab - bcast_rows(vb)", {1, 128}, 1, 2},
              B{"bcast_scalar", "ab * bcast_scalar(vb)", {1, 1}, 1, 1},
              B{"col_of", "ab * bcast_cols(col_of<32, 2>(vb))", {1, 128}, 1, 2}})
    v.push_back(
        {b.name, {"y"}, 1e-6, 1e-6, [b](Device d) {
           Program p(b.name, bcast_kernel(b.expr), Grid::cores(1));
           p.input("a", on(tile_input({128, 128}, 31), d))
               .input("v", on(tile_input(b.vshape, 32), d))
               .output("y", {128, 128}, DType::F32);
           p.cb("a_cb", 2, 2, DType::F32).cb("v_cb", b.vr, b.vc, DType::F32).cb("y_cb", 2, 2, DType::F32);
           return p;
         }});
  v.push_back({"reduce_math", {"sums", "maxes", "math"}, 1e-5, 1e-5, [](Device d) {
                 Program p("reduce_math", kReduceMath, Grid::cores(1));
                 p.input("x", on(tile_input({64, 64}, 41, DType::F32, -2, 2), d))
                     .output("sums", {1, 64}, DType::F32)
                     .output("maxes", {64, 1}, DType::F32);
                 p.output("math", {64, 64}, DType::F32);
                 p.cb("x_cb", 2, 2, DType::F32).cb("s_cb", 1, 2, DType::F32).cb("m_cb", 2, 1, DType::F32);
                 p.cb("u_cb", 2, 2, DType::F32);
                 return p;
               }});
  // f32 sums of 128 products: the GPU contracts them into FMAs, the CPU may not
  v.push_back({"matmul_single_core", {"y"}, 1e-4, 1e-4, [](Device d) {
                 return matmul_program(on(tile_input({64, 128}, 51), d), on(tile_input({128, 96}, 52), d), 1,
                                       1, 1, 1, DType::F32);
               }});
  v.push_back({"matmul_multi_core_blocks", {"y"}, 1e-4, 1e-4, [](Device d) {
                 return matmul_program(on(tile_input({128, 128}, 53), d), on(tile_input({128, 128}, 54), d),
                                       3, 2, 2, 1, DType::F32);
               }});
  // bf16 accumulates in f32 and rounds once per K step: a different rounding of the sum (an FMA
  // on the GPU) may flip the last bf16 bit
  v.push_back({"matmul_bf16", {"y"}, 1e-2, 1e-2, [](Device d) {
                 return matmul_program(on(tile_input({64, 64}, 55, DType::BF16), d),
                                       on(tile_input({64, 64}, 56, DType::BF16), d), 2, 1, 1, 1, DType::BF16);
               }});
  v.push_back({"row_multicast", {"y"}, 0, 1e-6, [](Device d) { return row_multicast(d, 3, 61); }});
  // 12 cores a row: on the GPU clusters of 6, so the core at x = 0 multicasts to 1..5 through
  // distributed shared memory and to 6..11 through global memory
  v.push_back(
      {"row_multicast_across_clusters", {"y"}, 0, 1e-6, [](Device d) { return row_multicast(d, 12, 64); }});
  v.push_back({"barrier_semaphores", {"y"}, 0, 1e-6, [](Device d) {
                 Program p("barrier", kBarrier, Grid::grid2d(3, 3));
                 p.input("x", on(tile_input({96, 96}, 63), d))
                     .output("y", {96, 96}, DType::F32)
                     .semaphore("arrived")
                     .semaphore("go");
                 p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
                 return p;
               }});
  v.push_back({"exchange_one_step_barrier", {"y"}, 0, 1e-6, [](Device d) {
                 return exchange_program(on(tile_input({96, 96}, 65), d));
               }});
  // receives posted into slots 1 then 0 of a wrapped ring: filled in posting order
  v.push_back({"multicast_order", {"y"}, 0, 0, [](Device d) {
                 return multicast_order_program(on(tile_input({96, 32}, 66), d));
               }});
  // 64 payloads through a two-slot ring in one cluster: every slot is rewritten through
  // distributed shared memory right after the receiving core's compute role read it
  v.push_back({"multicast_stream", {"y"}, 0, 0, [](Device d) {
                 return multicast_stream_program(on(tile_input({2048, 32}, 68), d));
               }});
  // a data-movement role's read, waited, then a semaphore signal after which another core
  // overwrites what it read: y must hold the zeros read before
  v.push_back({"read_then_signal", {"y", "stage"}, 0, 0, [](Device d) {
                 return read_then_signal_program(on(tile_input({64, 125}, 67), d));
               }});
  return v;
}

// ---- NVRTC compiles every example for sm_90 (no GPU needed) ----

struct Nvrtc {
  void* lib = nullptr;
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*);
  int (*compile)(void*, int, const char* const*);
  int (*log_size)(void*, size_t*);
  int (*log)(void*, char*);
  int (*destroy)(void**);
};

const Nvrtc* nvrtc() {
  static Nvrtc n = [] {
    Nvrtc r;
    for (const char* name :
         {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"})
      if ((r.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!r.lib) return r;
    r.create = reinterpret_cast<decltype(r.create)>(dlsym(r.lib, "nvrtcCreateProgram"));
    r.compile = reinterpret_cast<decltype(r.compile)>(dlsym(r.lib, "nvrtcCompileProgram"));
    r.log_size = reinterpret_cast<decltype(r.log_size)>(dlsym(r.lib, "nvrtcGetProgramLogSize"));
    r.log = reinterpret_cast<decltype(r.log)>(dlsym(r.lib, "nvrtcGetProgramLog"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(dlsym(r.lib, "nvrtcDestroyProgram"));
    if (!r.create || !r.compile || !r.log_size || !r.log || !r.destroy) r.lib = nullptr;
    return r;
  }();
  return n.lib ? &n : nullptr;
}

// "" when NVRTC compiles `src` to sm_90 machine code (so ptxas checked the inline PTX too), else the log.
std::string nvrtc_errors(const std::string& src) {
  const Nvrtc* n = nvrtc();
  void* prog = nullptr;
  if (n->create(&prog, src.c_str(), "kiln.cu", 0, nullptr, nullptr)) return "nvrtcCreateProgram failed";
  const char* opts[] = {"--gpu-architecture=sm_90", "-std=c++20", "--fmad=true", "-default-device"};
  int rc = n->compile(prog, 4, opts);
  size_t size = 0;
  n->log_size(prog, &size);
  std::string log(size, '\0');
  if (size) n->log(prog, log.data());
  n->destroy(&prog);
  return rc == 0 ? "" : "NVRTC error " + std::to_string(rc) + ":\n" + log;
}

TEST(TileCudaCompile, EveryExampleCompilesWithNvrtcForSm90) {
  if (!nvrtc()) GTEST_SKIP() << "NVRTC is not installed here";
  for (auto& c : cases()) {
    Program p = c.make(Device::cpu());
    std::string err = nvrtc_errors(p.generated_cuda_source());
    EXPECT_EQ(err, "") << c.name << "\n" << p.generated_cuda_source();
  }
}

// The shipped kernels (layernorm forward and backward in all their variants, mul_add_tanh both
// splits) at a benchmark row length, as their host entry points build them: all in f32, the ones
// whose CBs change with the dtype in bf16 too (NVRTC takes seconds per kernel, the backward ~20 s).
TEST(TileCudaCompile, ShippedKernelsCompileWithNvrtcForSm90) {
  if (!nvrtc()) GTEST_SKIP() << "NVRTC is not installed here";
  for (DType t : {DType::F32, DType::BF16}) {
    const int64_t N = 40, C = 768;
    Tensor x = tile_input({N, C}, 81, t), w = tile_input({C}, 82, t), b = tile_input({C}, 83, t);
    Tensor mean = zeros({N}), rstd = ones({N}), c = tile_input({1, C}, 84, t);
    std::vector<std::pair<std::string, Program>> programs;
    programs.emplace_back("layernorm fwd", tile::ops::layernorm_forward_program(x, w, b, 1e-5, 2));
    programs.emplace_back("layernorm bwd rows", tile::ops::layernorm_backward_program(
                                                    x, x, w, mean, rstd, w, b, true, Grid::grid2d(2, 2)));
    programs.emplace_back("layernorm bwd dx", tile::ops::layernorm_backward_program(
                                                  x, x, w, mean, rstd, w, b, false, Grid::grid2d(1, 2)));
    programs.emplace_back("layernorm bwd wgrad cols",
                          tile::ops::layernorm_wgrad_cols_program(x, x, mean, rstd, w, b, 2));
    programs.emplace_back("mul_add_tanh rows",
                          tile::ops::mul_add_tanh_program(x, x, c, tile::Split::Rows, 2));
    programs.emplace_back("mul_add_tanh cols",
                          tile::ops::mul_add_tanh_program(x, x, c, tile::Split::Cols, 2));
    for (auto& [name, p] : programs) {
      if (t == DType::F32 || name == "layernorm fwd" || name == "mul_add_tanh rows") {
        EXPECT_EQ(nvrtc_errors(p.generated_cuda_source()), "") << name << " " << dtype_name(t);
      }
    }
  }
}

// KILN_TILE_TRACE=<core> compiles the recording of that core's timeline into the kernel.
TEST(TileCudaCompile, TraceSettingCompilesTheRecordingIn) {
  Tensor a = tile_input({64, 64}, 12), b = tile_input({64, 64}, 13);
  Program p = add_program(a, b, 2, 1, 1, DType::F32);
  EXPECT_EQ(p.generated_cuda_source().find("#define KILN_TILE_TRACE_CORE"), std::string::npos);
  settings().tile_trace = 1;
  std::string traced = p.generated_cuda_source();
  settings().tile_trace = -1;
  EXPECT_NE(traced.find("#define KILN_TILE_TRACE_CORE 1\n"), std::string::npos);
}

// ---- on the GPU ----

// One test per example, so a tool (compute-sanitizer) can run them one at a time.
class TileCudaExample : public ::testing::TestWithParam<std::string> {};

TEST_P(TileCudaExample, MatchesTheCpuBackend) {
  KILN_REQUIRE_GPU();
  for (auto& c : cases()) {
    if (c.name != GetParam()) continue;
    Program cpu = c.make(Device::cpu());
    cpu.run();
    Program gpu = c.make(Device::cuda());
    gpu.run();
    for (auto& out : c.outputs) {
      Tensor g = gpu.result(out);
      EXPECT_TRUE(g.device().is_cuda()) << c.name << ": output '" << out << "' is on " << g.device().str();
      expect_near_all(g.to(Device::cpu()), cpu.result(out).to_vector<float>(), c.rtol, c.atol);
    }
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (auto& c : cases()) names.push_back(c.name);
  return names;
}
INSTANTIATE_TEST_SUITE_P(TileCuda, TileCudaExample, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A 2D grid whose kernel multicasts launches in thread-block clusters (the row multicast examples
// above check the values); one that only signals semaphores does not.
TEST(TileCuda, MulticastProgramsLaunchInClusters) {
  KILN_REQUIRE_GPU();
  for (auto& c : cases()) {
    if (c.name != "row_multicast" && c.name != "barrier_semaphores") continue;
    const int64_t before = stats().tile_cluster_launches;
    c.make(Device::cuda()).run();
    EXPECT_EQ(stats().tile_cluster_launches - before, c.name == "row_multicast" ? 1 : 0) << c.name;
  }
}

// The shipped kernels at the benchmark row lengths (C = 768, 4096, 8192; their CBs used to exceed
// the GPU's shared memory there) on a few rows, f32 and bf16: the GPU matches the CPU backend.
TEST(TileCuda, ShippedKernelsAtBenchmarkRowLengthsMatchTheCpu) {
  KILN_REQUIRE_GPU();
  const Device gpu = Device::cuda();
  auto expect_same = [](const std::string& what, const Tensor& g, const Tensor& c, double tol) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(g.device().is_cuda());
    expect_near_all(g.to(Device::cpu()).to(DType::F32), c.to(DType::F32).to_vector<float>(), tol, tol);
  };
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t C : {768, 4096, 8192}) {
      const int64_t N = 72;
      const double tol = t == DType::F32 ? 1e-4 : 5e-2;
      std::string name = std::string(dtype_name(t)) + " C=" + std::to_string(C);
      Tensor x = tile_input({N, C}, 91, t, 0.5, 2.5), w = tile_input({C}, 92, t, 0.5, 1.5),
             b = tile_input({C}, 93, t), dout = tile_input({N, C}, 94, t), c = tile_input({1, C}, 95, t);
      auto fc = tile::layernorm_forward(x, w, b, 1e-5, 3);
      auto fg = tile::layernorm_forward(on(x, gpu), on(w, gpu), on(b, gpu), 1e-5, 3);
      expect_same("layernorm fwd out " + name, fg.out, fc.out, tol);
      expect_same("layernorm fwd rstd " + name, fg.rstd, fc.rstd, 1e-4);
      for (auto s : {tile::WeightGrads::OverRows, tile::WeightGrads::OverColumns}) {
        Grid grid = s == tile::WeightGrads::OverRows ? Grid::grid2d(2, 2) : Grid::cores(3);
        auto bc = tile::layernorm_backward(dout, x, w, fc.mean, fc.rstd, {}, {}, s, grid);
        auto bg = tile::layernorm_backward(on(dout, gpu), on(x, gpu), on(w, gpu), on(fc.mean, gpu),
                                           on(fc.rstd, gpu), {}, {}, s, grid);
        std::string sn = s == tile::WeightGrads::OverRows ? " rows " : " cols ";
        expect_same("layernorm bwd dx" + sn + name, bg.dx, bc.dx, tol);
        expect_same("layernorm bwd dweight" + sn + name, bg.dweight, bc.dweight, 10 * tol);
        expect_same("layernorm bwd dbias" + sn + name, bg.dbias, bc.dbias, 10 * tol);
      }
      Tensor yc = tile::mul_add_tanh(x, dout, c, tile::Split::Rows, 3);
      Tensor yg = tile::mul_add_tanh(on(x, gpu), on(dout, gpu), on(c, gpu), tile::Split::Rows, 3);
      expect_same("mul_add_tanh rows " + name, yg, yc, tol);
    }
}

TEST(TileCuda, MatmulMatchesHostReference) {
  KILN_REQUIRE_GPU();
  Tensor a = tile_input({128, 128}, 53), b = tile_input({128, 128}, 54);
  Program p = matmul_program(on(a, Device::cuda()), on(b, Device::cuda()), 3, 2, 2, 1, DType::F32);
  p.run();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> want(128 * 128, 0);
  for (int i = 0; i < 128; i++)
    for (int k = 0; k < 128; k++)
      for (int j = 0; j < 128; j++) want[i * 128 + j] += av[i * 128 + k] * bv[k * 128 + j];
  expect_near_all(p.result("y").to(Device::cpu()), want, 1e-4, 1e-4);
}

// The add example on two cores of the GPU, one tile row each (runtime args: start row, rows,
// start column, columns), and the check of its result.
Program add_on_two_cores(const Tensor& a, const Tensor& b, Device d) {
  Program p = add_program(on(a, d), on(b, d), 2, 1, 1, DType::F32);
  p.set_runtime_args(0, {0, 1, 0, 2}).set_runtime_args(1, {1, 1, 0, 2});
  return p;
}
void expect_sum(const Program& p, const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); i++) x[i] += y[i];
  expect_near_all(p.result("y").to(Device::cpu()), x, 0, 1e-6);
}

// A second launch of a program reuses its first launch's plan: no compile, not even a cache
// lookup; new tensors bound, new runtime args and a release in between change nothing of that, a
// changed declaration makes a new plan.
TEST(TileCuda, SecondLaunchCompilesNothing) {
  KILN_REQUIRE_GPU();
  Device d = Device::cuda();
  Tensor a = tile_input({64, 64}, 12), b = tile_input({64, 64}, 13);
  Program p = add_on_two_cores(a, b, d);
  p.run();
  Tensor a2 = tile_input({64, 64}, 14), a2_gpu = on(a2, d);
  const int64_t compiles = stats().compiler_invocations, hits = stats().memory_cache_hits,
                disk = stats().disk_cache_hits;
  p.release();
  EXPECT_THROW(p.run(), Error);  // inputs released
  p.bind("a", a2_gpu).bind("b", on(b, d)).set_runtime_args(0, {0, 2, 0, 1}).set_runtime_args(1, {0, 2, 1, 1});
  p.run();
  EXPECT_EQ(stats().compiler_invocations, compiles);
  EXPECT_EQ(stats().memory_cache_hits, hits);
  EXPECT_EQ(stats().disk_cache_hits, disk);
  expect_sum(p, a2, b);
  p.gpu_compute_warps(2);  // another kernel: its source says how many warps compute
  p.run();
  EXPECT_EQ(stats().compiler_invocations + stats().memory_cache_hits + stats().disk_cache_hits,
            compiles + hits + disk + 1);
  expect_sum(p, a2, b);
}

// ... and prints the core's waits, stores and DMAs after the launch.
TEST(TileCuda, TracePrintsACoresWaitsStoresAndDmas) {
  KILN_REQUIRE_GPU();
  Device d = Device::cuda();
  Tensor a = tile_input({64, 64}, 15), b = tile_input({64, 64}, 16);
  Program p = add_on_two_cores(a, b, d);
  settings().tile_trace = 0;
  ::testing::internal::CaptureStderr();
  p.run();
  std::string out = ::testing::internal::GetCapturedStderr();
  settings().tile_trace = -1;
  EXPECT_NE(out.find("kiln.tile trace of kernel '"), std::string::npos) << out;
  EXPECT_NE(out.find("', core 0: "), std::string::npos) << out;
  EXPECT_NE(out.find(" stores, "), std::string::npos) << out;
  EXPECT_NE(out.find(" DMA reads issued;"), std::string::npos) << out;
  EXPECT_NE(out.find(" DMA writes issued;"), std::string::npos) << out;
  expect_sum(p, a, b);
}

TEST(TileCuda, DeadlockIsReportedByTheWatchdog) {
  KILN_REQUIRE_GPU();
  std::string src = std::string(kDeadlock) + R"(
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";
  const int timeout_was = settings().tile_timeout_ms;
  settings().tile_timeout_ms = 500;
  Program p("deadlock_gpu", src, Grid::cores(2));
  p.input("x", on(tile_input({64, 64}, 71), Device::cuda())).output("y", {64, 64}, DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  const Device gpu = Device::cuda();
  std::string first = error_of([&] {  // compiles, then deadlocks
    p.run();
    synchronize(gpu);
  });
  auto start = std::chrono::steady_clock::now();
  // a launch returns once its kernel is queued; the error surfaces where the host next waits for
  // the device (here a copy back)
  EXPECT_NO_THROW(p.run());
  std::string err = error_of([&] { on(tile_input({4, 4}, 3), gpu).to(Device::cpu()); });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  settings().tile_timeout_ms = timeout_was;
  EXPECT_EQ(first, err);
  EXPECT_LT(seconds, 5.0) << "the watchdog (500 ms) took " << seconds << " s";
  EXPECT_EQ(err.rfind("kiln.tile: deadlock on the GPU in kernel 'deadlock_gpu': core 0 ", 0), 0u) << err;
  EXPECT_NE(err.find("core 0 compute: wait() on CB 'x_cb' (no block pushed) at "), std::string::npos) << err;
  EXPECT_NE(err.find("deadlock_gpu.cpp:" + std::to_string(line_of(src, "BLOCKS"))), std::string::npos) << err;
  EXPECT_NE(err.find("core 1 writer: wait() on CB 'y_cb'"), std::string::npos) << err;
  // the device is still usable after a reported deadlock
  Program ok = add_program(on(tile_input({32, 32}, 1), Device::cuda()),
                           on(tile_input({32, 32}, 2), Device::cuda()), 1, 1, 1, DType::F32);
  ok.set_runtime_args(0, {0, 1, 0, 1});
  EXPECT_NO_THROW({
    ok.run();
    synchronize(gpu);
  });
}

TEST(TileCuda, OutOfRangeSliceIsAnErrorNotAFault) {
  KILN_REQUIRE_GPU();
  std::string src = R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(5, 0), xb).wait();  // OUT OF RANGE
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";
  Program p("bad_slice_gpu", src, Grid::cores(1));
  p.input("x", on(tile_input({64, 64}, 72), Device::cuda())).output("y", {64, 64}, DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  std::string err = error_of([&] {
    p.run();
    synchronize(Device::cuda());
  });
  EXPECT_NE(
      err.find(
          "kiln.tile: kernel 'bad_slice_gpu' on the GPU core 0 reader: dma between tensor 'x' slice (row 5"),
      std::string::npos)
      << err;
}

// Slice starts near INT64_MAX: a check written as row + rows > R wrapped and let the DMA fault.
TEST(TileCuda, HugeSliceIsAnErrorNotAFault) {
  KILN_REQUIRE_GPU();
  for (const char* slice : {"9223372036854775807LL, 0", "0, 9223372036854775807LL"}) {
    std::string src = std::string(R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice()") + slice +
                      R"(), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb);
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0)).wait();
}
)";
    Program p("huge_slice_gpu", src, Grid::cores(1));
    p.input("x", on(tile_input({64, 64}, 72), Device::cuda())).output("y", {64, 64}, DType::F32);
    p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
    std::string err = error_of([&] {
      p.run();
      synchronize(Device::cuda());
    });
    EXPECT_NE(err.find("kiln.tile: kernel 'huge_slice_gpu' on the GPU core 0 reader: dma between tensor 'x' "
                       "slice (row "),
              std::string::npos)
        << slice << ": " << err;
  }
}

// A data-movement role's wait() on a read returns before the bytes land on the GPU; a semaphore
// signal after it settles the role's reads first, so the core it releases may overwrite their
// source. Repeated: without the settling the race shows only now and then.
TEST(TileCuda, ReadWaitedBeforeASemaphoreSignalHasReadItsSource) {
  KILN_REQUIRE_GPU();
  Tensor x = on(tile_input({64, 125}, 67), Device::cuda());
  for (int i = 0; i < 50; i++) {
    Program p = read_then_signal_program(x);
    p.run();
    expect_near_all(p.result("y").to(Device::cpu()), std::vector<float>(64 * 125, 0.0f), 0, 0);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(TileCuda, MixedDeviceInputsAreRejected) {
  KILN_REQUIRE_GPU();
  Program p = add_program(on(tile_input({32, 32}, 1), Device::cuda()),
                          on(tile_input({32, 32}, 2), Device::cpu()), 1, 1, 1, DType::F32);
  p.set_runtime_args(0, {0, 1, 0, 1});
  EXPECT_NE(error_of([&] { p.run(); }).find("inputs on the CPU and on cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
