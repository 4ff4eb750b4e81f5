// The backend registry and the Backend interface (runtime/backend.h): each device's backend (CPU,
// ref, CUDA) is found, reports sane limits, round-trips memory through its copies and loads and runs
// a lowered program through its launcher. The CUDA checks that need a GPU skip without one; its
// registration and its error for a missing GPU are checked without one.
#include <vector>

#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "runtime/backend.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"

namespace kiln::testing {
namespace {

using runtime::Backend;

void expect_sane_limits(const Backend& b) {
  const runtime::DeviceLimits& l = b.limits();
  EXPECT_GE(l.max_threads_per_block, 1) << b.name();
  EXPECT_GE(l.warp_size, 1) << b.name();
  EXPECT_LE(l.warp_size, l.max_threads_per_block) << b.name();
  EXPECT_GE(l.shared_per_block, 0) << b.name();
  EXPECT_GE(l.vector_bytes, 4) << b.name();
  EXPECT_EQ(l.vector_bytes & (l.vector_bytes - 1), 0) << b.name() << ": a power of two";
  EXPECT_GE(l.cores, 1) << b.name();
}

// Host -> device -> (a copy on the device) -> host, through the backend's own functions.
void expect_round_trip(Backend& b) {
  std::vector<float> in(1000), out(1000, -1);
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<float>(i) * 0.5f - 7;
  size_t bytes = in.size() * sizeof(float);
  void* p = b.allocate(bytes);
  void* q = b.allocate(bytes);
  b.upload(p, in.data(), bytes);
  b.copy(q, p, bytes);
  b.download(out.data(), q, bytes);
  b.free(p, bytes);
  b.free(q, bytes);
  EXPECT_EQ(out, in) << b.name();
}

// x * 2 + 1 lowered for the backend, loaded by it and run by its launcher on buffers of its device.
void expect_program_runs(Device d) {
  Backend& b = runtime::backend(d);
  Tensor x = tensor({1.f, -2.f, 3.5f, 0.f, 10.f, -0.25f}).to(d).realize();
  Tensor y = x * 2 + 1;
  schedule::Schedule s = schedule::make_schedule(ir::rewrite_graph({y.node()}));
  ASSERT_EQ(s.kernels.size(), 1u);
  const schedule::Kernel& k = s.kernels[0];
  ASSERT_EQ(k.inputs.size(), 1u);
  auto lowered = std::make_shared<const codegen::Lowered>(codegen::lower(k.ast, b.target(), b.limits()));
  std::vector<runtime::Launch> launches = b.load({lowered});
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].device, d);
  EXPECT_EQ(launches[0].name, lowered->program.name);
  Buffer out(DType::F32, 6, d);
  void* args[] = {out.data, k.inputs[0]->buffer->data};
  b.launcher().launch(launches[0], args);
  b.synchronize();
  std::vector<float> got(6);
  b.download(got.data(), out.data, out.nbytes());
  EXPECT_EQ(got, (std::vector<float>{3.f, -3.f, 8.f, 1.f, 21.f, 0.5f})) << b.name();
}

// An ATTENTION node as F::scaled_dot_product_attention makes it, of (1, 128, D) q, k and v.
ir::NodeRef attention_node(Device d, DType t, int64_t head) {
  Tensor q = zeros({1, 128, head}, {.dtype = t, .device = d});
  return ir::make(ir::Op::ATTENTION, t, {1, 128, head}, {q.node(), q.node(), q.node()}, {1}, 0.125);
}

TEST(Backend, CpuIsRegistered) {
  Backend& b = runtime::backend(Device::cpu());
  EXPECT_EQ(&b, &runtime::backend(Device::cpu()));  // one per device
  EXPECT_EQ(b.name(), "cpu");
  EXPECT_EQ(b.target(), codegen::Target::CPU);
  EXPECT_EQ(b.gemm_library(), "");
  EXPECT_FALSE(b.launcher().replay_keeps_addresses());
}

TEST(Backend, CpuLimitsAreSane) {
  Backend& b = runtime::backend(Device::cpu());
  expect_sane_limits(b);
  EXPECT_EQ(b.limits().max_threads_per_block, 1);  // a program's call runs on one thread
  EXPECT_EQ(b.limits().cores, runtime::num_threads());
}

TEST(Backend, UnknownDeviceIsAnError) {
  Device unknown{static_cast<Device::Kind>(7), 2};
  EXPECT_EQ(error_of([&] { runtime::backend(unknown); }),
            "kiln: no backend is registered for device kind7:2");
  EXPECT_EQ(error_of([] {
              runtime::backend(Device{Device::Kind::CPU, 1});
            }),
            "kiln: no device cpu:1 (the CPU is device cpu)");
  EXPECT_EQ(error_of([&] { synchronize(unknown); }), "kiln: no backend is registered for device kind7:2");
}

TEST(Backend, CpuBufferRoundTripsThroughItsCopies) { expect_round_trip(runtime::backend(Device::cpu())); }

TEST(Backend, CpuRunsALoweredProgram) { expect_program_runs(Device::cpu()); }

TEST(Backend, CpuHasNoFlashAttention) {
  EXPECT_FALSE(runtime::backend(Device::cpu()).supports(*attention_node(Device::cpu(), DType::BF16, 64)));
}

// The ref device: host memory, programs interpreted (no compiler, no GEMM library, no special kernels)
TEST(BackendRef, IsRegisteredAndRunsALoweredProgram) {
  const Device ref{Device::Kind::REF, 0};
  Backend& b = runtime::backend(ref);
  EXPECT_EQ(b.name(), "ref");
  EXPECT_EQ(b.target(), codegen::Target::CPU);  // the CPU's lowering, interpreted instead of compiled
  EXPECT_EQ(b.gemm_library(), "");
  EXPECT_FALSE(b.supports(*attention_node(ref, DType::BF16, 64)));
  expect_sane_limits(b);
  expect_round_trip(b);
  expect_program_runs(ref);
  EXPECT_EQ(error_of([] {
              runtime::backend(Device{Device::Kind::REF, 1});
            }),
            "kiln: no device ref:1 (the reference interpreter is device ref)");
}

// Registered in every build: without a GPU, asking for one is the CUDA backend's own error, naming
// the device, and not that no backend is registered.
TEST(BackendCuda, RegisteredAndNamesAMissingGpu) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present (BackendCudaGpu.* check its backend)";
  std::string e = error_of([] { runtime::backend(Device::cuda(0)); });
  EXPECT_NE(e.find("kiln.cuda: CUDA is not available"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:0"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { runtime::backend(Device::cuda(0)); }), e);  // a failure is not kept as a backend
}

class BackendCudaGpu : public GpuTest {};

TEST_F(BackendCudaGpu, LimitsAreTheDevices) {
  Backend& b = runtime::backend(gpu);
  EXPECT_EQ(b.name(), "cuda:0");
  EXPECT_EQ(b.target(), codegen::Target::CUDA);
  expect_sane_limits(b);
  EXPECT_EQ(b.limits().warp_size, 32);
  EXPECT_GE(b.limits().max_threads_per_block, 1024);
  EXPECT_GE(b.limits().shared_per_block, 48 * 1024);
  EXPECT_GT(b.limits().cores, 1);
}

TEST_F(BackendCudaGpu, BufferRoundTripsThroughItsCopies) { expect_round_trip(runtime::backend(gpu)); }

TEST_F(BackendCudaGpu, RunsALoweredProgram) { expect_program_runs(gpu); }

// The flash-attention kernel: 16-bit values and D of 64 or 128 only (on an sm_80 or later GPU, as
// kiln's GPU machines are).
TEST_F(BackendCudaGpu, SupportsFlashAttentionWhereItFits) {
  Backend& b = runtime::backend(gpu);
  EXPECT_FALSE(b.supports(*attention_node(gpu, DType::F32, 64)));
  EXPECT_FALSE(b.supports(*attention_node(gpu, DType::BF16, 96)));
  EXPECT_FALSE(b.supports(*(zeros({4}, {.device = gpu}) + 1).node()));
  EXPECT_TRUE(b.supports(*attention_node(gpu, DType::BF16, 64)));
  EXPECT_TRUE(b.supports(*attention_node(gpu, DType::F16, 128)));
}

}  // namespace
}  // namespace kiln::testing
