// The CUDA device: placement, copies, the allocator, kernels against the reference interpreter,
// block reductions, caching, jit replays through CUDA graphs. Skipped (with the reason) where no GPU
// is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "helpers.h"
#include "kiln/debug.h"
#include "kiln/kiln.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/copy.h"
#include "runtime/cuda/graph.h"

using namespace kiln;
using kiln::testing::error_of;
using kiln::testing::expect_matches_reference;
using kiln::testing::random_tensor;
namespace F = kiln::nn::functional;

namespace {

class Cuda : public kiln::testing::GpuTest {
 protected:
  Tensor on_gpu(const Shape& s, DType t = DType::F32, double lo = -2, double hi = 2, uint64_t seed = 1) {
    return random_tensor(s, t, lo, hi, seed).to(gpu);
  }
};

TEST(CudaDevice, ParsesNames) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(CudaDevice, UnavailableGivesAReason) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
  try {
    zeros({4}).to(Device::cuda()).realize();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
  }
}

TEST(CudaDevice, ConstantsBelongToTheirDeviceUnrealized) {
  Tensor z = zeros({2, 3}, {.device = Device::cuda()});
  EXPECT_EQ(z.device(), Device::cuda());
  EXPECT_EQ((z * 2.0).device(), Device::cuda());
  EXPECT_EQ(z.to(Device::cpu()).device(), Device::cpu());
  try {  // a device's constant meets a CPU tensor: the same error as for buffers, before any kernel
    (z + random_tensor({2, 3}, DType::F32, 0, 1, 2).to(Device::cpu())).realize();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("different devices"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
  }
}

TEST_F(Cuda, ConstantsLikeADeviceTensorAreFoldedNotFilled) {
  Tensor x = on_gpu({64, 300}, DType::F32, -2, 2, 4);
  int64_t k = stats().kernels_run;
  Tensor y = x.relu().realize();  // maximum(x, zeros_like(x)): one kernel, no buffer of zeros
  EXPECT_EQ(stats().kernels_run - k, 1);
  EXPECT_EQ(y.to_vector<float>(), x.to(Device::cpu()).relu().to_vector<float>());
  Tensor w = x.detach();
  w.requires_grad_();
  where(w > 0.5, w * 3.0, w).sum().backward();
  k = stats().kernels_run;
  w.grad().realize();
  EXPECT_EQ(stats().kernels_run - k, 1);
  auto g = w.grad().to_vector<float>();
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < g.size(); i++) ASSERT_EQ(g[i], xv[i] > 0.5f ? 3.f : 1.f) << i;
}

TEST_F(Cuda, RoundTripKeepsEveryDtype) {
  for (DType t :
       {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool}) {
    Tensor h = random_tensor({3, 1000}, t, -100, 100, 7);
    Tensor g = h.to(gpu);
    EXPECT_EQ(g.device(), gpu);
    EXPECT_EQ(g.to(Device::cpu()).to_vector<double>(), h.to_vector<double>()) << dtype_name(t);
  }
  Tensor big = random_tensor({5, 1 << 22}, DType::F32, -1, 1, 3);  // 80 MB: several staging chunks
  EXPECT_EQ(big.to(gpu).to_vector<float>(), big.to_vector<float>());
}

TEST_F(Cuda, MixingDevicesIsAnError) {
  Tensor a = on_gpu({4, 4}), b = random_tensor({4, 4}, DType::F32, 0, 1, 2).to(Device::cpu());
  try {
    (a + b).realize();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  }
}

TEST_F(Cuda, CreationOnTheDevice) {
  Tensor z = zeros({2, 3}, {.device = gpu});
  EXPECT_EQ(z.device(), gpu);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
  Tensor r = arange(10, {.dtype = DType::F32, .device = gpu});
  EXPECT_EQ(r.device(), gpu);
  EXPECT_EQ(r.sum().item<float>(), 45.f);
  Tensor n = randn({1000}, {.device = gpu});
  EXPECT_EQ(n.device(), gpu);
  EXPECT_NEAR(n.mean().item<float>(), 0.0, 0.15);
  // the same draw on the CPU gives the same numbers
  manual_seed(5);
  auto c = randn({64}).to_vector<float>();
  manual_seed(5);
  auto g = randn({64}, {.device = gpu}).to_vector<float>();
  for (size_t i = 0; i < c.size(); i++) EXPECT_NEAR(c[i], g[i], 1e-5);
}

TEST_F(Cuda, ElementwiseAndBroadcastMatchReference) {
  Tensor a = on_gpu({37, 129}, DType::F32, -2, 2, 1), b = on_gpu({37, 129}, DType::F32, -2, 2, 2);
  Tensor c = on_gpu({1, 129}, DType::F32, -2, 2, 3);
  EXPECT_TRUE(expect_matches_reference(a * b + c.tanh(), 1e-5, 1e-6));
  EXPECT_TRUE(expect_matches_reference((a.exp() + b.abs().log()).sqrt(), 1e-5, 1e-6));
  EXPECT_TRUE(expect_matches_reference(a.sin() * b.cos() + a.sigmoid(), 1e-5, 1e-6));
  EXPECT_TRUE(expect_matches_reference(a.transpose(0, 1) * 2 + 1, 1e-6, 1e-7));  // non-contiguous view
  EXPECT_TRUE(expect_matches_reference(where(a > b, a, b / (c + 5)), 1e-6, 1e-7));
}

TEST_F(Cuda, IntegerAndHalfArithmetic) {
  Tensor i = on_gpu({1000}, DType::I32, -1000, 1000, 4), j = on_gpu({1000}, DType::I32, 1, 50, 5);
  EXPECT_TRUE(expect_matches_reference(i * j - i + (i > j).to(DType::I32), 0, 0));
  EXPECT_TRUE(expect_matches_reference((i * 3) ^ j, 0, 0));
  Tensor h = on_gpu({513}, DType::F16, -4, 4, 6), bf = on_gpu({513}, DType::BF16, -4, 4, 7);
  EXPECT_TRUE(expect_matches_reference(h * h + 1, 1e-3, 1e-3));
  EXPECT_TRUE(expect_matches_reference(bf.exp(), 1e-2, 1e-2));
  EXPECT_TRUE(expect_matches_reference(bf.to(DType::F16) + h, 1e-2, 1e-2));
}

TEST_F(Cuda, ReductionsShortAndLong) {
  // short rows: one thread per output; long rows: one block per row (BLOCK_REDUCE)
  for (int64_t cols : {7, 128, 768, 5000, 50304}) {
    Tensor x = on_gpu({9, cols}, DType::F32, -1, 1, static_cast<uint64_t>(cols));
    EXPECT_TRUE(expect_matches_reference(x.sum(1), 1e-5, 1e-4)) << cols;
    EXPECT_TRUE(expect_matches_reference(x.max(1), 0, 0)) << cols;
    EXPECT_TRUE(expect_matches_reference(x.softmax(1), 1e-5, 1e-6)) << cols;
    EXPECT_TRUE(expect_matches_reference(x.sum(0), 1e-5, 1e-5)) << cols;
  }
  // short contiguous rows shared by groups of threads, outputs not a multiple of a warp's groups
  for (int64_t cols : {32, 64, 100, 124}) {
    Tensor r = on_gpu({7, 5, cols}, DType::F32, -1, 1, static_cast<uint64_t>(cols) + 40);
    EXPECT_TRUE(expect_matches_reference(r.sum(2), 1e-5, 1e-5)) << cols;
    EXPECT_TRUE(expect_matches_reference(r.max(2) + r.mean(2), 1e-5, 1e-5)) << cols;
    Tensor hb = on_gpu({3, 11, cols}, DType::BF16, -1, 1, static_cast<uint64_t>(cols) + 41);
    EXPECT_TRUE(expect_matches_reference((hb.to(DType::F32) * hb.to(DType::F32)).sum(2), 1e-5, 1e-4)) << cols;
  }
  // few outputs, long reduces: blocks share each output (two accumulators in one kernel)
  Tensor w = on_gpu({3, 1 << 20}, DType::F32, -1, 1, 19);
  EXPECT_TRUE(expect_matches_reference(w.sum(1) + w.max(1), 1e-5, 1e-3));
  EXPECT_TRUE(expect_matches_reference(w.to(DType::F64).sum(), 1e-12, 1e-9));
  // sums over rows: one thread per column, chunks of rows over gridDim.y (ColumnReduce)
  Tensor c = on_gpu({5000, 700}, DType::F32, -1, 1, 20);
  EXPECT_TRUE(expect_matches_reference(c.sum(0) + c.max(0), 1e-5, 1e-3));
  EXPECT_TRUE(expect_matches_reference((c * c).sum(0, true) * c, 1e-5, 1e-3));
  Tensor wide = on_gpu({200, 40000}, DType::F32, -1, 1, 21);  // one chunk of rows
  EXPECT_TRUE(expect_matches_reference(wide.sum(0) + wide.max(0), 1e-5, 1e-3));
  Tensor h = on_gpu({16384, 96}, DType::BF16, -1, 1, 22);  // bf16 rows into f32 sums
  EXPECT_TRUE(expect_matches_reference(h.to(DType::F32).sum(0), 1e-5, 1e-3));
  Tensor logits = on_gpu({6, 50304}, DType::BF16, -4, 4, 23).to(DType::F32);  // rows kept as bf16
  EXPECT_TRUE(expect_matches_reference(logits.log_softmax(1), 1e-5, 1e-5));
  Tensor all = on_gpu({1000, 1000}, DType::F32, -1, 1, 9);
  EXPECT_TRUE(expect_matches_reference(all.sum(), 1e-5, 1e-3));
  Tensor d = on_gpu({3, 4000}, DType::F64, -1, 1, 10);
  EXPECT_TRUE(expect_matches_reference(d.sum(1) + d.prod(1) * 0, 1e-12, 1e-12));
  Tensor b = on_gpu({5, 300}, DType::Bool, 0, 1, 11);
  EXPECT_TRUE(expect_matches_reference(b.any({1}), 0, 0));
  EXPECT_TRUE(expect_matches_reference(b.all({1}), 0, 0));
  Tensor n = on_gpu({4, 1000}, DType::F32, -1, 1, 12);
  Tensor nan = n.index({0}).log();  // NaNs in row 0 propagate through max and sum
  EXPECT_TRUE(expect_matches_reference(nan.max(), 0, 0));
}

TEST_F(Cuda, MatmulLayernormAndGradients) {
  Tensor a = on_gpu({65, 130}, DType::F32, -1, 1, 13), w = on_gpu({130, 47}, DType::F32, -1, 1, 14);
  EXPECT_TRUE(expect_matches_reference(a.matmul(w), 1e-4, 1e-4));
  Tensor x = on_gpu({64, 768}, DType::F32, -1, 1, 15);
  Tensor mean = x.mean(1, true), var = (x - mean).pow(2).mean(1, true);
  EXPECT_TRUE(expect_matches_reference((x - mean) * (var + 1e-5).rsqrt(), 1e-4, 1e-4));
  Tensor p = random_tensor({8, 300}, DType::F32, -1, 1, 16).to(gpu);
  p.requires_grad_();
  Tensor loss = (p.softmax(1) * p).sum();
  loss.backward();
  EXPECT_EQ(p.grad().device(), gpu);
  EXPECT_TRUE(expect_matches_reference(p.grad(), 1e-4, 1e-5));
}

TEST_F(Cuda, FusedMatmulsRunInTheGemmLibrary) {
  // attention as a GPT block writes it (q, k, v strided views of one projection; scale, mask and
  // softmax around the matmuls) and an MLP with a residual: every matmul is split out for cuBLASLt
  int64_t B = 2, H = 4, T = 256, D = 64, C = H * D;
  Tensor qkv = on_gpu({B, T, 3 * C}, DType::F32, -1, 1, 30);
  qkv.requires_grad_();
  Tensor y = kiln::testing::gpt_attention(qkv, H);
  Tensor dqkv = grad({y}, {qkv}, {on_gpu({B, T, C}, DType::F32, -1, 1, 31)})[0];
  int64_t before = stats().gemm_launches;
  realize({y, dqkv});
  EXPECT_EQ(stats().gemm_launches - before, 6);
  EXPECT_TRUE(expect_matches_reference(y, 1e-4, 1e-4));
  EXPECT_TRUE(expect_matches_reference(dqkv, 1e-4, 1e-4));
  Tensor x = on_gpu({512, 256}, DType::F32, -1, 1, 32), w1 = on_gpu({256, 1024}, DType::F32, -1, 1, 33),
         w2 = on_gpu({1024, 256}, DType::F32, -1, 1, 34);
  Tensor h = x + F::layer_norm(x, {256}).matmul(w1).relu().matmul(w2);
  before = stats().gemm_launches;
  h.realize();
  EXPECT_EQ(stats().gemm_launches - before, 2);
  EXPECT_TRUE(expect_matches_reference(h, 1e-4, 1e-4));
}

// A GPT MLP's gelu under bf16 autocast, forward and backward: with 1024 features the GEMMs write
// the gelu and its pre-activation (GELU_AUX_BIAS) and the gradient through it (DGELU); with 1020 the
// aux rows are not a multiple of 8 elements apart and the gelu keeps kernels of its own. Both agree
// with the same step on the CPU (no GEMM library: the gelu in kernels of its own) within bf16
// rounding, and with the float64 reference.
TEST_F(Cuda, GeluMlpInTheGemmEpiloguesMatchesTheUnfusedStep) {
  for (int64_t hidden : {1024, 1020}) {
    SCOPED_TRACE("hidden " + std::to_string(hidden));
    std::vector<Tensor> params = {random_tensor({hidden, 256}, DType::F32, -0.1, 0.1, 40),
                                  random_tensor({hidden}, DType::F32, -0.1, 0.1, 41),
                                  random_tensor({256, hidden}, DType::F32, -0.05, 0.05, 42),
                                  random_tensor({256}, DType::F32, -0.1, 0.1, 43),
                                  random_tensor({2, 128, 256}, DType::F32, -1, 1, 44)};
    Tensor r = random_tensor({2, 128, 256}, DType::F32, -1, 1, 45);
    auto step = [&](Device d) {
      std::vector<Tensor> p;
      for (auto& t : params) p.push_back(t.to(d).detach().requires_grad_());
      Tensor y;
      {
        Autocast ac(DType::BF16);
        y = F::linear(F::linear(p[4], p[0], p[1]).gelu(true), p[2], p[3]);
      }
      Tensor loss = (y.to(DType::F32) * r.to(d)).sum();
      std::vector<Tensor> out = grad({loss}, {p[0], p[1], p[4]});
      out.insert(out.begin(), y);
      realize(out);
      return out;
    };
    int64_t before = stats().gemm_launches;
    std::vector<Tensor> got = step(gpu);
    EXPECT_EQ(stats().gemm_launches - before, 5);  // fc, proj, the gradient through the gelu, fc's weight, x
    std::vector<Tensor> want = step(Device::cpu());
    const char* names[] = {"y", "d fc.weight", "d fc.bias", "d x"};
    for (size_t i = 0; i < got.size(); i++) {
      SCOPED_TRACE(names[i]);
      std::vector<double> g = got[i].to(Device::cpu()).to_vector<double>(), w = want[i].to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      double scale = 0;
      for (double v : w) scale = std::max(scale, std::fabs(v));
      int bad = 0;
      for (size_t e = 0; e < g.size() && bad < 5; e++)
        if (std::fabs(g[e] - w[e]) > 2e-2 * std::fabs(w[e]) + 1e-2 * scale) {
          ADD_FAILURE() << "element " << e << ": GPU " << g[e] << ", CPU " << w[e];
          bad++;
        }
      EXPECT_TRUE(expect_matches_reference(got[i], 3e-2, 1e-2 * scale));
    }
  }
}

TEST_F(Cuda, OneHotSumsAndCrossEntropy) {
  // gather, embedding and the class-index loss read one element per row (indexed loads)
  Tensor w = on_gpu({50304, 64}, DType::F32, -1, 1, 35);
  Tensor tok = tensor(std::vector<int64_t>{0, 50303, 7, 7, 50302, 1}).to(gpu);
  EXPECT_TRUE(expect_matches_reference(F::embedding(tok, w), 0, 0));
  // out of range: an error, raised on the host after the device checked
  Tensor bad = tensor(std::vector<int64_t>{0, 50304}).to(gpu);
  EXPECT_NE(error_of([&] { F::embedding(bad, w).realize(); }).find("embedding: an index is out of range"),
            std::string::npos);
  Tensor lg = on_gpu({16, 50304}, DType::F32, -4, 4, 36);
  lg.requires_grad_();
  Tensor cls = tensor(std::vector<int64_t>{0, 1, 50303, 9, 9, 100, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}).to(gpu);
  Tensor loss = F::cross_entropy(lg, cls);
  Tensor dl = grad({loss}, {lg})[0];
  EXPECT_TRUE(expect_matches_reference(loss, 1e-5, 1e-5));
  EXPECT_TRUE(expect_matches_reference(dl, 1e-5, 1e-7));
  EXPECT_TRUE(expect_matches_reference(lg.gather(1, cls.unsqueeze(1)), 0, 0));
}

TEST_F(Cuda, EmptyAndSizeOne) {
  Tensor e = zeros({0, 5}, {.device = gpu});
  EXPECT_EQ((e + 1).sum(1).numel(), 0);
  EXPECT_EQ((e + 1).sum().item<float>(), 0.f);
  Tensor one = on_gpu({1, 1}, DType::F32, 1, 2, 17);
  EXPECT_TRUE(expect_matches_reference(one.exp().sum(), 1e-6, 1e-6));
}

TEST_F(Cuda, LargeIndexMath) {
  // 2^31 + a few elements: 64-bit indices (a u8 tensor keeps it at 2 GiB)
  int64_t n = (int64_t{1} << 31) + 77;
  Tensor x = full({n}, Scalar(3), DType::U8).to(gpu);
  Tensor y = (x + 1).to(DType::I64).sum();
  EXPECT_EQ(y.item<int64_t>(), 4 * n);
}

TEST_F(Cuda, AllocatorReusesFreedBlocks) {
  { Tensor warm = on_gpu({1024, 1024}); }
  auto before = runtime::cuda::allocator_stats(0);
  for (int i = 0; i < 5; i++) {
    Tensor t = zeros({1024, 1024}, {.device = gpu});
    t.realize();
  }
  auto after = runtime::cuda::allocator_stats(0);
  EXPECT_EQ(after.device_allocs, before.device_allocs);  // each iteration reuses the last block
}

TEST(MemoryStats, TheCpuIsNotCountedAndSaysSo) {
  EXPECT_THROW(
      {
        try {
          memory_stats(Device::cpu());
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("memory_stats"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(reset_peak_memory(Device::cpu()), Error);
}

// memory_stats counts a tensor's bytes while it lives; the peak stays until reset.
TEST_F(Cuda, MemoryStatsCountTheTensorsAndThePeak) {
  synchronize(gpu);
  reset_peak_memory(gpu);
  const MemoryStats s0 = memory_stats(gpu);
  EXPECT_EQ(s0.peak, s0.in_use);
  {
    Tensor t = randn({4096, 1024}, {.device = gpu});  // 16 MiB
    t.realize();
    EXPECT_GE(memory_stats(gpu).in_use - s0.in_use, 16 << 20);
  }
  const MemoryStats s1 = memory_stats(gpu);
  EXPECT_LT(s1.in_use - s0.in_use, 16 << 20);
  EXPECT_GE(s1.peak - s0.in_use, 16 << 20);
  reset_peak_memory(gpu);
  EXPECT_EQ(memory_stats(gpu).peak, memory_stats(gpu).in_use);
}

TEST_F(Cuda, SecondRunCompilesNothing) {
  Tensor a = on_gpu({100, 33}, DType::F32, -1, 1, 18);
  ((a * 3).exp().sum(1)).realize();
  int64_t compiled = stats().kernels_compiled;
  ((a * 3).exp().sum(1)).realize();
  EXPECT_EQ(stats().kernels_compiled, compiled);
}

// A two-layer MLP on the GPU trained by AdamW, jitted and eager side by side on the same batches.
// in -> hidden -> 8. At in = 256, hidden = 512 and batch 128 the first layer's matmuls (forward and
// both gradients) do 2^24 multiply-adds each: cuBLASLt runs them where it is installed.
struct GpuMlp {
  std::vector<Tensor> params;
  GpuMlp(int64_t in, int64_t hidden, uint64_t seed) {
    std::vector<int64_t> sizes = {in, hidden, 8};
    for (size_t i = 0; i + 1 < sizes.size(); i++) {
      double scale = 1.0 / std::sqrt(static_cast<double>(sizes[i]));
      for (Shape s : {Shape{sizes[i + 1], sizes[i]}, Shape{sizes[i + 1]}}) {
        Tensor p = random_tensor(s, DType::F32, -scale, scale, seed++).to(Device::cuda());
        p.requires_grad_();
        params.push_back(p);
      }
    }
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = (x.matmul(params[0].t()) + params[1]).relu();
    Tensor out = h.matmul(params[2].t()) + params[3];
    return (out - y).pow(2).mean();
  }
};

// Tensors made with no device named (the optimizers' learning rates) go to the GPU while it lives.
struct GpuByDefault {
  Device was = default_device();
  GpuByDefault() { set_default_device(Device::cuda()); }
  ~GpuByDefault() { set_default_device(was); }
};

// Trains an eager and a jitted copy of the MLP for `steps` steps on new batches (new input buffers
// at every call) and checks losses, parameters and gradients agree within `tol` (0: exactly).
// With `batches`, step i takes batches[i] rows, the jitted step's batch dim symbolic.
// Returns the replays and the graphs launched, captured and compiled during them.
struct Replays {
  int64_t replays = 0, graphs = 0, captures = 0, compiled = 0, schedules = 0;
  int64_t recorded_gemms = 0;  // GEMM library launches of the jitted calls that ran eagerly
};
Replays expect_jit_training_matches_eager(int64_t in, int64_t hidden, int64_t batch, double tol,
                                          int steps = 6, const std::vector<int64_t>& batches = {}) {
  GpuByDefault gpu;
  GpuMlp eager(in, hidden, 5), jitted(in, hidden, 5);
  optim::AdamW eager_opt(eager.params, {.lr = 1e-2}), jit_opt(jitted.params, {.lr = 1e-2});
  auto train = [](GpuMlp& m, optim::Optimizer& opt, const std::vector<Tensor>& b) {
    Tensor loss = m.loss(b[0], b[1]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
  Jit step([&](const std::vector<Tensor>& b) { return train(jitted, jit_opt, b); });
  auto close = [tol](float got, float want) {
    return tol == 0 ? got == want : std::fabs(got - want) <= tol * (1 + std::fabs(want));
  };
  Replays r;
  Var B("B", 1, 4096);
  if (!batches.empty()) steps = static_cast<int>(batches.size());
  for (int i = 0; i < steps; i++) {
    const int64_t rows = batches.empty() ? batch : batches[static_cast<size_t>(i)];
    std::vector<Tensor> b = {random_tensor({rows, in}, DType::F32, -1, 1, 100 + 2 * i).to(Device::cuda()),
                             random_tensor({rows, 8}, DType::F32, -1, 1, 101 + 2 * i).to(Device::cuda())};
    realize(b);
    float want = train(eager, eager_opt, b)[0].item<float>();
    if (!batches.empty()) b = {b[0].symbolic(0, B), b[1].symbolic(0, B)};
    const bool replay = step.captured();
    Stats before = stats();
    float got = step(b)[0].item<float>();
    r.graphs += stats().graph_launches - before.graph_launches;
    r.captures += stats().graph_captures - before.graph_captures;
    r.replays += stats().jit_replays - before.jit_replays;
    if (!replay) r.recorded_gemms += stats().gemm_launches - before.gemm_launches;
    if (replay) r.compiled += stats().kernels_compiled - before.kernels_compiled;
    if (replay) r.schedules += stats().schedules - before.schedules;
    EXPECT_TRUE(close(got, want)) << "loss at step " << i << ": " << got << " vs " << want;
  }
  EXPECT_TRUE(step.captured());
  EXPECT_GE(r.replays, steps - 3);  // AdamW's first step differs from the next: capture at call 3
  for (size_t p = 0; p < eager.params.size(); p++) {
    std::vector<float> a = eager.params[p].to_vector<float>(), b = jitted.params[p].to_vector<float>();
    std::vector<float> ga = eager.params[p].grad().to_vector<float>(),
                       gb = jitted.params[p].grad().to_vector<float>();
    EXPECT_EQ(a.size(), b.size());
    size_t bad = 0;
    for (size_t k = 0; k < a.size() && k < b.size(); k++) bad += !close(b[k], a[k]) || !close(gb[k], ga[k]);
    EXPECT_EQ(bad, 0u) << "parameter " << p << " or its gradient differs in " << bad << " elements";
  }
  return r;
}

// Restores settings().cuda_graph when a test that switches graphs off ends.
struct GraphsOff {
  bool was = settings().cuda_graph;
  GraphsOff() { settings().cuda_graph = false; }
  ~GraphsOff() { settings().cuda_graph = was; }
};

TEST_F(Cuda, JitTrainingStepReplaysAsCudaGraphs) {
  if (!settings().cuda_graph) GTEST_SKIP() << "KILN_CUDA_GRAPH=0";
  Replays r = expect_jit_training_matches_eager(20, 32, 16, 0, 10);
  EXPECT_EQ(r.graphs, r.replays) << "every replay runs as one graph";
  // new batches are copied into the step's input buffers and results take buffers nothing holds
  // any more (the state settles into a cycle within three replays): the graphs are recorded on the
  // first replays only
  EXPECT_LE(r.captures, 3) << r.replays << " replays";
  EXPECT_GE(r.replays, 7);
}

TEST_F(Cuda, JitStepWithLibraryMatmulsReplaysAsCudaGraphs) {
  if (!settings().cuda_graph) GTEST_SKIP() << "KILN_CUDA_GRAPH=0";
  // cuBLASLt may choose another algorithm for operands of another alignment: allow rounding
  Replays r = expect_jit_training_matches_eager(256, 512, 128, 1e-5);
  EXPECT_EQ(r.graphs, r.replays);
}

// A training step with a symbolic batch: its matmuls run in cuBLASLt at each binding (the
// descriptor matched again per value), the generated kernel where the library is not worth it
// (64 rows); the replays compile and schedule nothing, and each binding gets a graph of its own.
TEST_F(Cuda, JitSymbolicStepRunsItsMatmulsInTheLibraryAtEveryBatchSize) {
  if (!settings().cuda_graph) GTEST_SKIP() << "KILN_CUDA_GRAPH=0";
  kiln::testing::TempCache cache("kiln_cuda_symbolic_gemm");
  // cuBLASLt's heuristic choice on both sides: a binding first met while a replay is captured cannot
  // time candidates, and AdamW turns an algorithm's other rounding into parameter differences
  struct Deterministic {
    bool was = settings().deterministic;
    Deterministic() { settings().deterministic = true; }
    ~Deterministic() { settings().deterministic = was; }
  } deterministic;
  Replays r =
      expect_jit_training_matches_eager(256, 512, 0, 1e-5, 0, {512, 512, 384, 1024, 64, 512, 384, 1000});
  EXPECT_GE(r.recorded_gemms, 2) << "the recorded calls ran their symbolic matmuls in the library";
  EXPECT_EQ(r.replays, 6);
  EXPECT_EQ(r.graphs, r.replays);
  EXPECT_EQ(r.compiled, 0);
  EXPECT_EQ(r.schedules, 0);
  EXPECT_LE(r.captures, 6);
}

TEST_F(Cuda, JitReplaysWithoutCudaGraphsWhenSwitchedOff) {
  GraphsOff off;
  Replays r = expect_jit_training_matches_eager(256, 512, 128, 1e-5);
  EXPECT_EQ(r.graphs, 0);
}

TEST_F(Cuda, JitGraphReplaysFollowInputBuffers) {
  if (!settings().cuda_graph) GTEST_SKIP() << "KILN_CUDA_GRAPH=0";
  // long reductions with few outputs (blocks share an output through scratch memory) and a matmul,
  // replayed over seven distinct input buffers (each call copies its input into the step's own)
  Tensor w = on_gpu({256, 256}, DType::F32, -1, 1, 40);
  auto f = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].sum(), (in[0] * 2).sum(1), in[0].reshape({1024, 256}).matmul(w)};
  };
  Jit jitted(f);
  std::vector<Tensor> xs;
  for (int i = 0; i < 7; i++) xs.push_back(on_gpu({4, 65536}, DType::F32, -1, 1, 50 + i).realize());
  int64_t launches = stats().graph_launches, captures = stats().graph_captures;
  int replays = 0;
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < xs.size(); i++) {
      size_t k = round == 1 ? xs.size() - 1 - i : i;
      replays += jitted.captured();
      std::vector<Tensor> got = jitted({xs[k]}), want = f({xs[k]});
      for (size_t o = 0; o < got.size(); o++) {
        std::vector<float> g = got[o].to_vector<float>(), e = want[o].to_vector<float>();
        ASSERT_EQ(g.size(), e.size());
        size_t bad = 0;
        for (size_t j = 0; j < g.size(); j++) bad += std::fabs(g[j] - e[j]) > 1e-5 * (1 + std::fabs(e[j]));
        EXPECT_EQ(bad, 0u) << "output " << o << " of input " << k << " in round " << round;
      }
    }
  }
  EXPECT_EQ(stats().graph_launches - launches, replays);
  // each call's input is copied into the step's own buffer, so seven input buffers need no more
  // recordings than one
  EXPECT_LE(stats().graph_captures - captures, 3);
}

// The graph cache itself: one capture per key, replays read the memory as it is at launch, the
// least recently used graph is recaptured once the cache is full, and work that cannot be captured
// (a host synchronization) is refused with a reason, leaving the stream usable.
TEST_F(Cuda, GraphCacheCapturesOncePerKey) {
  namespace rc = runtime::cuda;
  const size_t n = 1000, bytes = n * sizeof(float);
  std::vector<rc::CUdeviceptr> src, dst;
  for (int i = 0; i < 6; i++) {
    src.push_back(rc::device_alloc(0, bytes));
    dst.push_back(rc::device_alloc(0, bytes));
  }
  auto fill = [&](rc::CUdeviceptr p, float v) {
    std::vector<float> h(n, v);
    rc::upload(0, p, h.data(), bytes);
  };
  auto first = [&](rc::CUdeviceptr p) {
    float v = 0;
    rc::download(0, &v, p, sizeof v);
    return v;
  };
  {
    rc::GraphCache cache(0);
    std::string why;
    auto copy = [&](int i) {
      std::vector<void*> key = {reinterpret_cast<void*>(src[i]), reinterpret_cast<void*>(dst[i])};
      bool ran = cache.run(
          key, [&] { rc::copy_device(0, dst[i], src[i], bytes); }, why);
      EXPECT_TRUE(ran) << why;
    };
    int64_t captures = stats().graph_captures, launches = stats().graph_launches;
    fill(src[0], 1);
    copy(0);
    EXPECT_EQ(first(dst[0]), 1.f);
    fill(src[0], 2);
    copy(0);  // the same graph: reads src[0] as it is now
    EXPECT_EQ(first(dst[0]), 2.f);
    EXPECT_EQ(stats().graph_captures - captures, 1);
    EXPECT_EQ(stats().graph_launches - launches, 2);
    for (int i = 1; i < 6; i++) {  // past the capacity: the oldest graphs are recaptured
      fill(src[i], static_cast<float>(10 + i));
      copy(i);
      EXPECT_EQ(first(dst[i]), static_cast<float>(10 + i));
    }
    EXPECT_EQ(cache.size(), rc::GraphCache::kCapacity);
    fill(src[0], 3);
    copy(0);
    EXPECT_EQ(first(dst[0]), 3.f);
    EXPECT_EQ(stats().graph_captures - captures, 7);
    bool ran = cache.run(
        {nullptr}, [] { synchronize(Device::cuda()); }, why);
    EXPECT_FALSE(ran);
    EXPECT_FALSE(why.empty());
  }
  for (int i = 0; i < 6; i++) {
    rc::device_free(0, src[i], bytes);
    rc::device_free(0, dst[i], bytes);
  }
  EXPECT_TRUE(expect_matches_reference((on_gpu({300, 7}) * 3).sum(1), 1e-5, 1e-5));  // the stream works
}

}  // namespace
