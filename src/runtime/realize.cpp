// The realize driver (see realize.h).
#include "runtime/realize.h"

#include <chrono>
#include <functional>
#include <cmath>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "codegen/passes.h"
#include "ir/graph_rewrite.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "runtime/buffer.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/program_cache.h"
#include "runtime/interpreter.h"
#include "runtime/program_cache.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"

namespace kiln::runtime {

using ir::NodeRef;

namespace {

// Lowering is deterministic in the AST (hash-consed) and the opt settings: cache it.
std::shared_ptr<const codegen::Lowered> lower_cached(const NodeRef& ast, codegen::Target target) {
  static std::mutex mu;
  static std::unordered_map<const ir::Node*, std::pair<NodeRef, std::shared_ptr<const codegen::Lowered>>>
      cache[4];
  auto& c = cache[(settings().noopt ? 1 : 0) + (target == codegen::Target::CUDA ? 2 : 0)];
  {
    std::lock_guard<std::mutex> l(mu);
    if (auto it = c.find(ast.get()); it != c.end() && settings().debug < 4) return it->second.second;
  }
  auto low = std::make_shared<const codegen::Lowered>(codegen::lower(ast, target));
  std::lock_guard<std::mutex> l(mu);
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

// How each kernel of a schedule runs on its device: the compiled programs, ready to launch.
using Runner = std::function<void(const codegen::Lowered&, std::vector<void*>& bufs)>;

std::vector<Runner> load(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered, Device device) {
  std::vector<Runner> out;
  if (device.is_cuda()) {
    std::vector<cuda::KernelSource> sources;
    for (auto& l : lowered) sources.push_back({l->program.name, l->program.symbol, l->source});
    std::vector<cuda::CUfunction> fns = cuda::load_kernels(device.index, sources);
    for (auto f : fns)
      out.push_back([f, device](const codegen::Lowered& l, std::vector<void*>& bufs) {
        cuda::launch(device.index, f, l.launch, bufs);
      });
    return out;
  }
  std::vector<KernelSource> sources;
  for (auto& l : lowered) sources.push_back({l->program.name, l->program.symbol, l->source});
  for (KernelFn fn : load_programs(sources))
    out.push_back([fn](const codegen::Lowered& l, std::vector<void*>& bufs) {
      const codegen::Program& p = l.program;
      void** args = bufs.data();
      if (p.outer_size > 1 && p.flops + static_cast<double>(p.outer_size) >= 32768)
        parallel_for(p.outer_size, [&](int64_t s, int64_t e) { fn(args, s, e); });
      else
        fn(args, 0, p.outer_size);
    });
  return out;
}

}  // namespace

void realize(const std::vector<NodeRef>& roots, Device device) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<NodeRef> rewritten = ir::rewrite_graph(roots);
  schedule::Schedule sched = schedule::make_schedule(rewritten);
  stats().schedules++;

  codegen::Target target = device.is_cuda() ? codegen::Target::CUDA : codegen::Target::CPU;
  std::vector<std::shared_ptr<const codegen::Lowered>> lowered;
  for (auto& k : sched.kernels) lowered.push_back(lower_cached(k.ast, target));
  Stats before = stats();
  std::vector<Runner> runners = load(lowered, device);
  auto t1 = std::chrono::steady_clock::now();

  int64_t new_bytes = 0;
  bool profile = settings().profile && !sched.kernels.empty();
  auto p0 = std::chrono::steady_clock::now();
  if (profile && device.is_cuda()) cuda::timer_start(device.index);
  for (auto& n : sched.empty) n->buffer = std::make_shared<Buffer>(n->dtype, 0, device);
  for (size_t i = 0; i < sched.kernels.size(); i++) {
    const auto& k = sched.kernels[i];
    const auto& p = lowered[i]->program;
    std::vector<std::shared_ptr<Buffer>> outs;
    std::vector<void*> bufs;
    int64_t bytes = 0;
    for (auto& o : k.outputs) {
      outs.push_back(std::make_shared<Buffer>(o->dtype, o->numel(), device));
      bufs.push_back(outs.back()->data);
      bytes += static_cast<int64_t>(outs.back()->nbytes());
    }
    new_bytes += bytes;
    for (auto& in : k.inputs) {
      if (in->buffer->device != device)
        throw Error("kiln.realize: kernel " + p.name + " runs on " + device.str() + " but reads a " +
                    shape_str(in->shape) + " " + dtype_name(in->dtype) + " buffer on " +
                    in->buffer->device.str() + "; move it with .to(" + device.str() + ")");
      bufs.push_back(in->buffer->data);
      bytes += static_cast<int64_t>(in->buffer->nbytes());
    }
    if (settings().debug >= 3) {
      std::cerr << "kiln: kernel " << i << " " << p.name << " -> " << shape_str(k.outputs[0]->shape) << " "
                << dtype_name(k.outputs[0]->dtype)
                << (k.outputs.size() > 1 ? " (+" + std::to_string(k.outputs.size() - 1) + " outputs)" : "")
                << ", reads " << k.inputs.size() << " buffers, opts:";
      for (auto& o : lowered[i]->opts) std::cerr << " " << o;
      std::cerr << (lowered[i]->opts.empty() ? " none" : "")
                << (p.outer_size > 1 && device.is_cpu() ? ", THREAD" : "") << "\n";
    }
    if (settings().debug >= 2) synchronize(device);  // time this kernel alone
    auto k0 = std::chrono::steady_clock::now();
    runners[i](*lowered[i], bufs);
    if (settings().debug >= 2) synchronize(device);
    auto k1 = std::chrono::steady_clock::now();
    stats().kernels_run++;
    if (settings().debug >= 2) {
      double s = std::chrono::duration<double>(k1 - k0).count();
      std::fprintf(stderr, "kiln:   %-28s %9.3f ms %9.2f GB/s %9.2f GFLOP/s\n", p.name.c_str(), s * 1e3,
                   static_cast<double>(bytes) / s * 1e-9, p.flops / s * 1e-9);
    }
    for (size_t o = 0; o < outs.size(); o++) {
      if (settings().validate) validate(k.outputs[o], p, outs[o]);
      k.outputs[o]->buffer = outs[o];
    }
  }
  if (profile)
    stats().device_ms += device.is_cuda() ? cuda::timer_stop_ms(device.index)
                                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count() * 1e3;
  // roots the rewrites turned into other (already computed) nodes share their buffers
  for (size_t i = 0; i < roots.size(); i++)
    if (!roots[i]->buffer) roots[i]->buffer = rewritten[i]->buffer;
  if (settings().debug >= 1) {
    Stats& now = stats();
    std::fprintf(stderr,
                 "kiln: scheduled %zu kernels (programs: %lld from memory, %lld from disk, %lld compiled), "
                 "%.2f MB new buffers, %.3f ms to schedule and compile\n",
                 sched.kernels.size(),
                 static_cast<long long>(now.memory_cache_hits - before.memory_cache_hits),
                 static_cast<long long>(now.disk_cache_hits - before.disk_cache_hits),
                 static_cast<long long>(now.kernels_compiled - before.kernels_compiled), new_bytes / 1e6,
                 std::chrono::duration<double>(t1 - t0).count() * 1e3);
  }
}

}  // namespace kiln::runtime
