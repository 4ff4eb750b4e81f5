// Launches a tile program on a GPU: lays out each core's CB rings in shared memory, binds the
// tensors (inputs moved to the device when they are elsewhere, outputs zero-filled there where
// asked), puts the runtime args in the launch's slot (host memory the kernel reads at its start),
// zeroes device scratch for the semaphores and multicast state of kernels that use them, and
// queues one thread block per core and the launch's check (src/tile/cuda/in_flight.cpp: a failed
// launch's kiln::Error surfaces when the host next waits). Programs that talk across cores
// (semaphores, or any 2D grid, which may multicast) need every core resident at once: they go
// through a cooperative launch, which the driver refuses when the grid does not fit instead of
// letting it hang.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>

#include "ir/node.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "runtime/buffer.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/copy.h"
#include "tile/cuda/launch_state.h"

namespace kiln::tile::cuda {

namespace {

namespace rc = runtime::cuda;
using cuda_abi::Params;

constexpr int kAttrMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kErrorCoopTooLarge = 720;   // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE

[[noreturn]] void fail(const Program::Desc& d, const std::string& msg) {
  throw Error("kiln.tile: program '" + d.name + "' on CUDA: " + msg);
}

std::pair<int64_t, int64_t> as_2d(const Shape& s) {
  if (s.empty()) return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); i++) rows *= s[i];
  return {rows, s.back()};
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

void check_limits(const Program::Desc& d) {
  if (d.tensors.size() > static_cast<size_t>(cuda_abi::kMaxTensors))
    fail(d, std::to_string(d.tensors.size()) + " tensors; the GPU backend binds at most " +
                std::to_string(cuda_abi::kMaxTensors));
  if (d.cbs.size() > static_cast<size_t>(cuda_abi::kMaxCBs))
    fail(d, std::to_string(d.cbs.size()) + " CBs; the GPU backend supports at most " +
                std::to_string(cuda_abi::kMaxCBs));
  if (d.arg_names.size() > static_cast<size_t>(cuda_abi::kMaxArgs))
    fail(d, std::to_string(d.arg_names.size()) + " runtime args; the GPU backend takes at most " +
                std::to_string(cuda_abi::kMaxArgs));
  for (auto& c : d.cbs)
    if (c.buffer_factor > cuda_abi::kMaxSlots)
      fail(d, "CB '" + c.name + "' has a buffer factor of " + std::to_string(c.buffer_factor) +
                  "; the GPU backend supports at most " + std::to_string(cuda_abi::kMaxSlots));
  if (cuda_threads(d) > 1024)
    fail(d, std::to_string(d.dm_roles.size()) + " data-movement roles (a warp each, plus " +
                std::to_string(cuda_compute_warps(d)) + " compute warps) exceed 1024 threads per block");
}

// Tensor maps for the bulk tensor copy engine: for every tile-indexed tensor whose rows it can
// address (16-byte aligned start and row pitch), one per box shape of the program's CBs. A tensor
// without maps (none left, or a driver without tensor maps) moves by row copies.
void encode_tensor_maps(const Program::Desc& d, const CBLayout& layout, rc::Context& c, Params& p,
                        cuda_abi::TensorMaps& maps) {
  const int shapes = static_cast<int>(layout.box_shapes.size());
  int used = 0;
  if (!c.api->cuTensorMapEncodeTiled || shapes == 0) return;
  for (size_t i = 0; i < d.tensors.size(); i++) {
    cuda_abi::TensorParam& v = p.tensors[i];
    const bool addressable = v.tiles && v.rows > 0 && v.cols > 0 && v.data % 16 == 0 &&
                             (v.cols * v.elem_bytes) % 16 == 0 && v.rows < (1LL << 31) &&
                             v.cols < (1LL << 31);
    if (!addressable || used + shapes > cuda_abi::kMaxTensorMaps) continue;
    const int data_type =
        d.tensors[i].dtype == DType::BF16 ? 9 : 7;  // CU_TENSOR_MAP_DATA_TYPE_{BFLOAT16,FLOAT32}
    const unsigned long long dims[2] = {static_cast<unsigned long long>(v.cols),
                                        static_cast<unsigned long long>(v.rows)};
    const unsigned long long pitch[1] = {static_cast<unsigned long long>(v.cols * v.elem_bytes)};
    const unsigned unit[2] = {1, 1};
    bool ok = true;
    for (int s = 0; s < shapes && ok; s++) {
      auto [rows, cols] = layout.box_shapes[s];
      const unsigned box[2] = {static_cast<unsigned>(cols * kTileSize),
                               static_cast<unsigned>(std::min<int64_t>(rows * kTileSize, 256))};
      // no interleave, no swizzle, L2 promotion of 128 bytes, zeros outside the tensor
      ok = c.api->cuTensorMapEncodeTiled(&maps.map[used + s], data_type, 2, reinterpret_cast<void*>(v.data),
                                         dims, pitch, box, unit, 0, 0, 2, 0) == 0;
    }
    if (!ok) continue;
    v.map_base = used;
    used += shapes;
  }
}

// Whether the kernel multicasts blocks (calls mcast, which needs a 2D grid): only then does a
// launch need multicast counters and mailboxes (a block per core and CB).
bool multicasts(const Program::Desc& d) {
  return d.grid.is_2d && (d.source.find("mcast(") != std::string::npos ||
                          d.source.find("mcast_receive(") != std::string::npos);
}

// Lets the kernel take `smem` bytes of dynamic shared memory (once per kernel and size).
void allow_shared(rc::Context& c, rc::CUfunction f, size_t smem) {
  static std::mutex mu;
  static std::set<std::pair<rc::CUfunction, size_t>> done;
  std::lock_guard<std::mutex> l(mu);
  if (smem <= 48 * 1024 || done.count({f, smem})) return;
  rc::check(c.api->cuFuncSetAttribute(f, kAttrMaxDynamicShared, static_cast<int>(smem)),
            "cuFuncSetAttribute(max dynamic shared memory)");
  done.insert({f, smem});
}

// The thread-block clusters of a 2D grid whose kernel multicasts blocks (calls mcast): the widest
// piece of a grid row (at most 8 cores, dividing the row), then as many rows as keep it within 8
// cores. A multicast to cores of the sender's cluster writes into their shared memory directly
// (cuda_mcast.h: mcast). 1 x 1: no clusters.
std::pair<unsigned, unsigned> cluster_shape(const Program::Desc& d, bool mcasts) {
  if (!mcasts) return {1, 1};
  unsigned cx = 1, cy = 1;
  for (unsigned x = 1; x <= 8; x++)
    if (d.grid.cols % x == 0) cx = x;
  for (unsigned y = 1; y * cx <= 8; y++)
    if (d.grid.rows % y == 0) cy = y;
  return {cx, cy};
}

// A cooperative launch in clusters of cx x cy blocks; false when the driver cannot (no
// cuLaunchKernelEx, or it refuses the shape: the caller then launches without clusters).
bool launch_in_clusters(rc::Context& c, runtime::cuda::CUfunction f, unsigned gx, unsigned gy,
                        unsigned threads, size_t smem, unsigned cx, unsigned cy, void** kernel_args) {
  if (!c.api->cuLaunchKernelEx) return false;
  rc::CUlaunchAttribute attrs[2] = {};
  attrs[0].id = rc::kLaunchAttributeCooperative;
  attrs[0].value.cooperative = 1;
  attrs[1].id = rc::kLaunchAttributeClusterDimension;
  attrs[1].value.cluster_dim[0] = cx;
  attrs[1].value.cluster_dim[1] = cy;
  attrs[1].value.cluster_dim[2] = 1;
  rc::CUlaunchConfig cfg{gx, gy, 1, threads, 1, 1, static_cast<unsigned>(smem), c.stream, attrs, 2};
  return c.api->cuLaunchKernelEx(&cfg, f, kernel_args, nullptr) == 0;
}

}  // namespace

// What launches of an unchanged program share (kept in its Desc): the kernel, the CB layout, the
// launch parameters that do not change between runs, and how the grid is launched.
struct Plan {
  int ordinal, traced;
  rc::CUfunction f;
  CBLayout layout;
  Params base;  // the CBs and counts; per launch the tensors, args and scratch are filled in
  bool cross_core, mcasts;
  unsigned cx, cy;  // thread-block clusters (1 x 1: none)
};

namespace {

std::shared_ptr<const Plan> make_plan(const Program::Desc& d, int ordinal) {
  check_limits(d);
  rc::Context& c = rc::context(ordinal);
  if (c.info.major < 9)
    fail(d,
         "the GPU tile backend needs a Hopper GPU or newer (compute capability 9.0: bulk copies and "
         "mbarrier transaction counts); " +
             Device::cuda(ordinal).str() + " (" + c.info.name + ") is " + std::to_string(c.info.major) + "." +
             std::to_string(c.info.minor));
  auto plan = std::make_shared<Plan>();
  plan->ordinal = ordinal;
  plan->traced = trace_core();
  plan->layout = layout_cbs(d);
  check_cb_memory(d, plan->layout, runtime::backend(Device::cuda(ordinal)).limits().tile_core_bytes,
                  Device::cuda(ordinal).str());
  plan->f = compile(d, ordinal);
  allow_shared(c, plan->f, plan->layout.total);
  Params& p = plan->base;
  std::memset(&p, 0, sizeof p);
  for (size_t i = 0; i < d.cbs.size(); i++) {
    const CBDecl& cb = d.cbs[i];
    p.cbs[i].barrier_offset = static_cast<unsigned>(plan->layout.cbs[i].barrier_offset);
    p.cbs[i].data_offset = static_cast<unsigned>(plan->layout.cbs[i].data_offset);
    p.cbs[i].block_bytes = static_cast<unsigned>(plan->layout.cbs[i].block_bytes);
    p.cbs[i].slots = static_cast<unsigned>(cb.buffer_factor);
    p.cbs[i].rows = cb.rows;
    p.cbs[i].cols = cb.cols;
    p.cbs[i].tile_rows = cb.tile_rows;
  }
  p.ntensors = static_cast<int>(d.tensors.size());
  p.ncbs = static_cast<int>(d.cbs.size());
  p.nargs = static_cast<int>(d.arg_names.size());
  p.nsems = static_cast<int>(d.semaphores.size());
  p.cores = d.grid.size();
  p.grid_cols = d.grid.cols;
  p.barrier_bytes = static_cast<unsigned>(plan->layout.barrier_bytes);
  plan->cross_core = !d.semaphores.empty() || d.grid.is_2d;
  plan->mcasts = multicasts(d);
  std::tie(plan->cx, plan->cy) = cluster_shape(d, plan->mcasts);
  return plan;
}

}  // namespace

bool runs_on(int ordinal) { return rc::context(ordinal).info.major >= 9; }

void launch(const std::shared_ptr<Program::Desc>& desc, int ordinal, void* const* at, Fixed* fixed) {
  Program::Desc& d = *desc;
  // the plan of the last launch, unless the program changed since (Desc::changed), runs elsewhere,
  // traces another core, or KILN_DEBUG >= 4 asks to see the source of every launch
  if (!d.cuda_plan || d.cuda_plan->ordinal != ordinal || d.cuda_plan->traced != trace_core() ||
      settings().debug >= 4)
    d.cuda_plan = make_plan(d, ordinal);
  const Plan& plan = *d.cuda_plan;
  rc::Context& c = rc::context(ordinal);
  const Device dev = Device::cuda(ordinal);
  const CBLayout& layout = plan.layout;
  rc::CUfunction f = plan.f;
  Params p = plan.base;
  const size_t smem = layout.total;

  // tensors: inputs realized on this device, outputs fresh buffers (zero-filled unless Fill::None)
  std::vector<Tensor> inputs;
  std::vector<std::shared_ptr<Buffer>> outputs(d.tensors.size());
  for (size_t i = 0; i < d.tensors.size(); i++) {
    TensorDecl& t = d.tensors[i];
    auto [rows, cols] = as_2d(t.shape);
    size_t es = dtype_size(t.dtype);
    unsigned long long data;
    if (at) {  // the caller's memory
      data = reinterpret_cast<unsigned long long>(at[i]);
      if (t.output && rows * cols > 0 && t.fill == Fill::Zeros)
        rc::check(c.api->cuMemsetD8Async(data, 0, static_cast<size_t>(rows * cols) * es, c.stream),
                  "cuMemsetD8Async");
    } else if (t.output) {
      outputs[i] = std::make_shared<Buffer>(t.dtype, rows * cols, dev);
      data = reinterpret_cast<unsigned long long>(outputs[i]->data);
      if (rows * cols > 0 && t.fill == Fill::Zeros)
        rc::check(c.api->cuMemsetD8Async(data, 0, static_cast<size_t>(rows * cols) * es, c.stream),
                  "cuMemsetD8Async");
    } else {
      Tensor v = t.value.device() == dev ? t.value : t.value.to(dev);
      ir::NodeRef n = v.node();  // a reshape of a computed buffer is that buffer's memory
      while (!n->buffer && n->op == ir::Op::RESHAPE) n = n->src[0];
      if (!n->buffer) {
        v = v.contiguous();
        v.realize();
        n = v.node();
      }
      inputs.push_back(v);
      data = reinterpret_cast<unsigned long long>(n->buffer->data);
    }
    p.tensors[i] = cuda_abi::TensorParam{
        data, rows, cols, static_cast<int>(es), t.indexing == Indexing::Tiles ? 1 : 0, t.output ? 1 : 0, -1};
  }
  cuda_abi::TensorMaps maps;  // a kernel argument: copied at the launch
  encode_tensor_maps(d, layout, c, p, maps);

  // runtime args and the failure flag in the launch's slot (pinned host memory the kernel reads
  // and writes), with the slot's device error log; semaphores, multicast counters and mailboxes,
  // and the trace in one zeroed device allocation, only for kernels that use them
  const int cores = d.grid.size();
  const bool cross_core = plan.cross_core, mcasts = plan.mcasts;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    size_t at = off;
    off = align_up(off + bytes, 256);
    return at;
  };
  const size_t at_sems =
      d.semaphores.empty() ? 0 : take(static_cast<size_t>(cores) * d.semaphores.size() * 8);
  const size_t at_mcast =
      mcasts ? take(static_cast<size_t>(cores) * d.cbs.size() * cuda_abi::kMcastWords * 4) : 0;
  const int traced = plan.traced;  // the kernel records when it was compiled with the same setting
  const bool tracing = traced >= 0 && traced < cores;
  constexpr int kTraceCap = 1 << 16;
  const size_t at_trace = tracing ? take(8 * (1 + static_cast<size_t>(kTraceCap))) : 0;
  std::vector<size_t> at_mailbox(d.cbs.size(), 0);
  if (mcasts)
    for (size_t i = 0; i < d.cbs.size(); i++)
      at_mailbox[i] = take(static_cast<size_t>(cores) * p.cbs[i].block_bytes);
  const size_t arg_bytes = d.args.size() * sizeof(long long);
  if (fixed && !fixed->log) {  // the runner's own memory, made at its first launch (never captured)
    fixed->log = std::make_shared<Buffer>(DType::U8, static_cast<int64_t>(sizeof(cuda_abi::ErrorLog)), dev);
    rc::check(c.api->cuMemsetD8Async(reinterpret_cast<unsigned long long>(fixed->log->data), 0,
                                     sizeof(cuda_abi::ErrorLog), c.stream),
              "cuMemsetD8Async");
    fixed->args =
        std::make_shared<Buffer>(DType::I64, static_cast<int64_t>(std::max<size_t>(1, d.args.size())), dev);
    if (arg_bytes)
      rc::upload(ordinal, reinterpret_cast<rc::CUdeviceptr>(fixed->args->data), d.args.data(), arg_bytes);
  }
  const bool captured = fixed && rc::capturing_on_this_thread();
  if (fixed && off > 0 && (!fixed->scratch || fixed->scratch->nbytes() < off)) {
    if (captured) fail(d, "a captured launch needs more scratch memory than its first launch had");
    fixed->scratch = std::make_shared<Buffer>(DType::U8, static_cast<int64_t>(off), dev);
  }
  std::shared_ptr<Buffer> scratch;
  unsigned long long base = 0;
  if (off > 0) {
    scratch = fixed ? fixed->scratch : std::make_shared<Buffer>(DType::U8, static_cast<int64_t>(off), dev);
    base = reinterpret_cast<unsigned long long>(scratch->data);
    rc::check(c.api->cuMemsetD8Async(base, 0, off, c.stream), "cuMemsetD8Async");
  }
  long long timeout = watchdog_ms(kGpuWatchdogMs);
  LaunchSlot slot{};
  if (captured) {  // a CUDA graph replays it: memory of fixed addresses, no check queued
    p.args = reinterpret_cast<unsigned long long>(fixed->args->data);
    p.errors = reinterpret_cast<unsigned long long>(fixed->log->data);
    p.host_flag = 0;
  } else {
    slot = take_slot(c, arg_bytes);
    if (arg_bytes) std::memcpy(slot.args, d.args.data(), arg_bytes);
    p.args = slot.args_device;
    p.errors = slot.log;
    p.host_flag = slot.flag_device;
  }
  p.sems = d.semaphores.empty() ? 0 : base + at_sems;
  p.mcast = mcasts ? base + at_mcast : 0;
  p.timeout_ns = static_cast<unsigned long long>(timeout) * 1000000ull;
  p.trace = tracing ? base + at_trace : 0;
  p.trace_cap = tracing ? kTraceCap : 0;
  for (size_t i = 0; i < d.cbs.size(); i++) p.cbs[i].mailbox = mcasts ? base + at_mailbox[i] : 0;

  // a launch the driver refuses gives its slot back
  try {
    void* kernel_args[] = {&p, &maps};  // by value (__grid_constant__ kernel arguments)
    unsigned gx = static_cast<unsigned>(d.grid.cols), gy = static_cast<unsigned>(d.grid.rows);
    unsigned threads = static_cast<unsigned>(cuda_threads(d));
    auto resident = [&] {
      return "its " + std::to_string(cores) +
             " cores talk to each other (semaphores or a 2D grid), so all must be resident on the GPU "
             "at once, and " +
             dev.str() + " (" + std::to_string(c.info.multiprocessors) +
             " multiprocessors) does not fit them: use fewer cores";
    };
    const unsigned cx = plan.cx, cy = plan.cy;
    if (cross_core && cx * cy > 1 && launch_in_clusters(c, f, gx, gy, threads, smem, cx, cy, kernel_args)) {
      stats().tile_cluster_launches++;
    } else if (cross_core && c.api->cuLaunchCooperativeKernel) {
      int r = c.api->cuLaunchCooperativeKernel(f, gx, gy, 1, threads, 1, 1, static_cast<unsigned>(smem),
                                               c.stream, kernel_args);
      if (r == kErrorCoopTooLarge) fail(d, resident());
      rc::check(r, "cuLaunchCooperativeKernel");
    } else {
      if (cross_core && cores > c.info.multiprocessors) fail(d, resident());
      rc::check(c.api->cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, static_cast<unsigned>(smem), c.stream,
                                      kernel_args, nullptr),
                "cuLaunchKernel");
    }
  } catch (...) {
    if (!captured) drop_slot(c, slot);
    throw;
  }
  stats().tile_launches++;
  if (!captured) queue_check(c, slot, desc, std::move(inputs), scratch, timeout);
  if (tracing) {  // printed before any error: the timeline of a deadlock is worth seeing too
    auto read = [&](void* to, size_t at, size_t bytes) {  // not through download: it would check first
      rc::check(c.api->cuMemcpyDtoHAsync(to, base + at, bytes, c.stream), "cuMemcpyDtoHAsync");
      rc::check(c.api->cuStreamSynchronize(c.stream), ("the tile kernel '" + d.name + "'").c_str());
    };
    unsigned long long recorded = 0;
    read(&recorded, at_trace, 8);
    std::vector<unsigned long long> recs(std::min<unsigned long long>(recorded, kTraceCap));
    if (!recs.empty()) read(recs.data(), at_trace + 8, recs.size() * 8);
    std::fprintf(stderr, "%s", describe_trace(d, traced, recs, recorded).c_str());
  }

  if (at) return;  // the outputs are the caller's memory
  for (size_t i = 0; i < d.tensors.size(); i++) {
    TensorDecl& t = d.tensors[i];
    if (!t.output) continue;
    ir::NodeRef n = ir::make(ir::Op::BUFFER, t.dtype, t.shape, {}, {outputs[i]->id, dev.code()});
    n->buffer = outputs[i];
    t.value = Tensor(n);
  }
}

}  // namespace kiln::tile::cuda
