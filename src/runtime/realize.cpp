// The realize driver (see realize.h).
#include "runtime/realize.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "codegen/passes.h"
#include "ir/graph_rewrite.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/arena.h"
#include "runtime/backend.h"
#include "runtime/buffer.h"
#include "runtime/interpreter.h"
#include "runtime/launcher.h"
#include "runtime/survivors.h"
#include "runtime/viz.h"
#include "schedule/match_matmul.h"
#include "schedule/memory_plan.h"
#include "schedule/schedule.h"

namespace kiln::runtime {

using ir::NodeRef;

namespace {

// Lowering is deterministic in the AST (hash-consed), the opt settings and the backend (its target and
// limits): cache it.
std::shared_ptr<const codegen::Lowered> lower_cached(const NodeRef& ast, const Backend& b) {
  static std::mutex mu;
  using Cache =
      std::unordered_map<const ir::Node*, std::pair<NodeRef, std::shared_ptr<const codegen::Lowered>>>;
  static std::map<std::pair<const Backend*, int>, Cache> caches;
  std::unique_lock<std::mutex> l(mu);
  Cache& c = caches[{&b, (settings().noopt ? 1 : 0) + (settings().deterministic ? 2 : 0)}];
  if (auto it = c.find(ast.get()); it != c.end() && settings().debug < 4) return it->second.second;
  l.unlock();
  auto low = std::make_shared<const codegen::Lowered>(codegen::lower(ast, b.target(), b.limits()));
  l.lock();
  c[ast.get()] = {ast, low};
  return low;
}

double tolerance(DType t) {
  switch (t) {
    case DType::F64: return 1e-9;
    case DType::F32: return 1e-4;
    case DType::F16: return 1e-2;
    case DType::BF16: return 3e-2;
    default: return 0;
  }
}

void validate(const NodeRef& node, const codegen::Program& p, const std::shared_ptr<Buffer>& buf) {
  std::shared_ptr<const Buffer> host = on_host(buf);
  const Buffer& out = *host;
  ref::Array want = ref::evaluate(node, true);
  double tol = tolerance(out.dtype);
  for (int64_t i = 0; i < out.numel; i++) {
    double got = is_float(out.dtype) ? out.get_f(i) : static_cast<double>(out.get_i(i));
    double ref = want.at(i);
    bool ok = got == ref || (std::isnan(got) && std::isnan(ref)) ||
              (tol > 0 && std::fabs(got - ref) <= tol * (1 + std::fabs(ref)));
    if (!ok) {
      std::ostringstream os;
      os.precision(10);
      os << "kiln.validate: kernel " << p.name << " (output " << shape_str(node->shape) << " "
         << dtype_name(out.dtype) << ") differs from the reference interpreter at element " << i << ": got "
         << got << ", expected " << ref;
      throw Error(os.str());
    }
  }
}

// Large matmuls go to the backend's GEMM library (the generated kernel stays the fallback): those
// whose every dim is at least 64 and that do at least 2^24 multiply-adds.
void use_library_gemm(Launch& l, const schedule::Kernel& k) {
  static std::mutex mu;
  static std::unordered_map<const ir::Node*,
                            std::pair<NodeRef, std::shared_ptr<const schedule::MatchedMatmul>>>
      cache;
  std::shared_ptr<const schedule::MatchedMatmul> m;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k.ast.get());
    if (it == cache.end()) {
      auto found = schedule::match_matmul(k);
      std::shared_ptr<const schedule::MatchedMatmul> keep;
      if (found) {
        if (schedule::worth_library_gemm(found->desc))
          keep = std::make_shared<const schedule::MatchedMatmul>(*found);
      }
      it = cache.emplace(k.ast.get(), std::make_pair(k.ast, keep)).first;
    }
    m = it->second.second;
  }
  if (!m) return;
  l.gemm = m;
  l.tf32 = settings().tf32;
  l.nouts = k.outputs.size();
  auto bytes = [&](int input, int64_t offset) {
    return input < 0 ? 0 : offset * dtype_size(k.inputs[static_cast<size_t>(input)]->dtype);
  };
  l.a_bytes = bytes(m->a_input, m->a_offset);
  l.b_bytes = bytes(m->b_input, m->b_offset);
  l.bias_bytes = bytes(m->bias_input, m->bias_offset);
}

thread_local int t_realizing = 0;

}  // namespace

bool realizing() { return t_realizing > 0; }

void realize(const std::vector<NodeRef>& roots, Device device) {
  struct Scope {
    Scope() { t_realizing++; }
    ~Scope() { t_realizing--; }
  } scope;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<NodeRef> held = held_outside(roots);  // first: before the passes below take references
  // the held nodes' images come from the same rewrite as the roots' (one memo: each node once)
  std::vector<NodeRef> images = roots;
  images.insert(images.end(), held.begin(), held.end());
  images = ir::rewrite_graph(images);
  std::vector<NodeRef> rewritten(images.begin(), images.begin() + static_cast<std::ptrdiff_t>(roots.size()));
  std::vector<NodeRef> held_images(images.begin() + static_cast<std::ptrdiff_t>(roots.size()), images.end());
  Backend& b = backend(device);
  const std::string gemm_library = b.gemm_library();
  schedule::Schedule sched =
      schedule::make_schedule(rewritten, {.library_gemm = !gemm_library.empty(), .explain = viz::enabled()});
  stats().schedules++;

  std::vector<std::shared_ptr<const codegen::Lowered>> lowered;
  for (auto& k : sched.kernels) lowered.push_back(lower_cached(k.ast, b));
  // the compiler viewer records the graphs before any kernel output is attached to them
  std::unique_ptr<viz::Record> rec =
      viz::enabled() ? std::make_unique<viz::Record>(roots, rewritten, sched, lowered, device) : nullptr;
  Stats before = stats();
  std::vector<Launch> runners = b.load(lowered);
  schedule::MemoryPlan plan = schedule::plan_memory(sched, surviving_outputs(sched, rewritten, held_images));
  OutputBuffers buffers = allocate_outputs(sched, plan, device);
  stats().arena_bytes += static_cast<int64_t>(plan.arena_bytes);
  stats().arena_no_reuse_bytes += static_cast<int64_t>(plan.no_reuse_bytes);
  auto t1 = std::chrono::steady_clock::now();

  // Every launch is prepared first, so the launches queue back to back (and a profile times the
  // device, not the host's preparation).
  for (auto& n : sched.empty) ir::set_buffer(*n, std::make_shared<Buffer>(n->dtype, 0, device));
  std::vector<Launch> launches;
  std::vector<std::vector<void*>> args;
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < sched.kernels.size(); i++) {
    const auto& k = sched.kernels[i];
    const auto& p = lowered[i]->program;
    const std::vector<std::shared_ptr<Buffer>>& outs = buffers.outs[i];
    std::vector<void*> bufs;
    int64_t nbytes = 0;
    for (auto& o : outs) {
      bufs.push_back(o->data);
      nbytes += static_cast<int64_t>(o->nbytes());
    }
    for (auto& in : k.inputs) {
      if (in->buffer->device != device)
        throw Error("kiln.realize: kernel " + p.name + " runs on " + device.str() + " but reads a " +
                    shape_str(in->shape) + " " + dtype_name(in->dtype) + " buffer on " +
                    in->buffer->device.str() + "; move it with .to(" + device.str() + ")");
      bufs.push_back(in->buffer->data);
      nbytes += static_cast<int64_t>(in->buffer->nbytes());
    }
    Launch launch = runners[i];
    launch.parallel = launch.parallel && p.flops + static_cast<double>(k.outputs[0]->numel()) >= 32768;
    if (!gemm_library.empty() && lowered[i]->launch.kind != codegen::CudaLaunch::Kind::Grid)
      use_library_gemm(launch, k);
    if (launch.gemm) stats().gemm_launches++;
    if (launch.cuda.kind == codegen::CudaLaunch::Kind::Grid) stats().attention_launches++;
    if (settings().debug >= 3) {
      std::cerr << "kiln: kernel " << i << " " << p.name << " -> " << shape_str(k.outputs[0]->shape) << " "
                << dtype_name(k.outputs[0]->dtype)
                << (k.outputs.size() > 1 ? " (+" + std::to_string(k.outputs.size() - 1) + " outputs)" : "")
                << ", reads " << k.inputs.size() << " buffers, opts:";
      for (auto& o : lowered[i]->opts) std::cerr << " " << o;
      std::cerr << (lowered[i]->opts.empty() ? " none" : "") << (launch.parallel ? ", THREAD" : "")
                << (launch.gemm ? ", " + gemm_library + " (the kernel is the fallback)" : "") << "\n";
    }
    for (size_t o = 0; o < outs.size(); o++) ir::set_buffer(*k.outputs[o], outs[o]);  // later kernels' inputs
    launches.push_back(std::move(launch));
    args.push_back(std::move(bufs));
    bytes.push_back(nbytes);
  }
  bool profile = settings().profile && !sched.kernels.empty();
  std::unique_ptr<Timer> timer = profile ? b.timer() : nullptr;
  if (timer) timer->start();
  for (size_t i = 0; i < sched.kernels.size(); i++) {
    const auto& k = sched.kernels[i];
    const auto& p = lowered[i]->program;
    const std::vector<std::shared_ptr<Buffer>>& outs = buffers.outs[i];
    if (LaunchObserver* obs = launch_observer()) {
      std::vector<std::shared_ptr<Buffer>> ins;
      for (auto& in : k.inputs) ins.push_back(in->buffer);
      obs->launched(launches[i], outs, ins);
    }
    bool time_each = settings().debug >= 2 || rec;
    if (time_each) b.synchronize();  // time this kernel alone
    auto k0 = std::chrono::steady_clock::now();
    b.launcher().launch(launches[i], args[i].data());
    if (time_each) b.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
    if (rec) rec->kernel_time(i, s * 1e3, bytes[i]);
    if (settings().debug >= 2) {
      std::fprintf(stderr, "kiln:   %-28s %9.3f ms %9.2f GB/s %9.2f GFLOP/s\n", p.name.c_str(), s * 1e3,
                   static_cast<double>(bytes[i]) / s * 1e-9, p.flops / s * 1e-9);
    }
    if (settings().validate)
      for (size_t o = 0; o < outs.size(); o++) {  // against the graph, not the buffer just written
        ir::set_buffer(*k.outputs[o], nullptr);
        validate(k.outputs[o], p, outs[o]);
        ir::set_buffer(*k.outputs[o], outs[o]);
      }
  }
  if (timer) stats().device_ms += timer->stop_ms();
  // The arena is reused by the next schedule: planned nodes forget it, so a later graph that
  // reaches one (a case the survivor analysis missed) recomputes it instead of reading stale memory.
  for (size_t i = 0; i < sched.kernels.size(); i++)
    for (size_t o = 0; o < sched.kernels[i].outputs.size(); o++)
      if (plan.offset[i][o] >= 0) ir::set_buffer(*sched.kernels[i].outputs[o], nullptr);
  // roots the rewrites turned into other (already computed) nodes share their buffers
  for (size_t i = 0; i < roots.size(); i++)
    if (!roots[i]->buffer) ir::set_buffer(*roots[i], rewritten[i]->buffer);
  if (rec) rec->finish(std::chrono::duration<double>(t1 - t0).count() * 1e3);
  if (settings().debug >= 1) {
    Stats& now = stats();
    std::fprintf(stderr,
                 "kiln: scheduled %zu kernels (programs: %lld from memory, %lld from disk, %lld compiled), "
                 "%.2f MB new buffers, planned peak %.2f MB (no reuse: %.2f MB), %.3f ms to schedule and "
                 "compile\n",
                 sched.kernels.size(),
                 static_cast<long long>(now.memory_cache_hits - before.memory_cache_hits),
                 static_cast<long long>(now.disk_cache_hits - before.disk_cache_hits),
                 static_cast<long long>(now.kernels_compiled - before.kernels_compiled),
                 static_cast<double>(buffers.own_bytes + plan.arena_bytes) / 1e6, plan.arena_bytes / 1e6,
                 plan.no_reuse_bytes / 1e6, std::chrono::duration<double>(t1 - t0).count() * 1e3);
  }
}

}  // namespace kiln::runtime
