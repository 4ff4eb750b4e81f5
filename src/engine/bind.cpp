// The bind stage (see stages.h). Every launch is prepared first, so the launches queue back to back
// (and a profile times the device, not the host's preparation).
#include <iostream>

#include "engine/stages.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln::engine {

namespace {

// KILN_DEBUG=3: the kernel, its opts and how it runs.
void describe(size_t i, const schedule::Kernel& k, const codegen::Lowered& low, const runtime::Launch& launch,
              const std::string& gemm_library) {
  std::cerr << "kiln: kernel " << i << " " << low.program.name << " -> " << shape_str(k.outputs[0]->shape)
            << " " << dtype_name(k.outputs[0]->dtype)
            << (k.outputs.size() > 1 ? " (+" + std::to_string(k.outputs.size() - 1) + " outputs)" : "")
            << ", reads " << k.inputs.size() << " buffers, opts:";
  for (auto& o : low.opts) std::cerr << " " << o;
  std::cerr << (low.opts.empty() ? " none" : "") << (launch.parallel ? ", THREAD" : "")
            << (launch.gemm ? ", " + gemm_library + " (the kernel is the fallback)" : "") << "\n";
}

}  // namespace

std::vector<Bound> bind_launches(const schedule::Schedule& s, const Lowerings& lowered,
                                 const std::vector<runtime::Launch>& programs, const Runners& r,
                                 const Memory& m, runtime::Backend& b, Device device) {
  const std::string gemm_library = b.gemm_library();
  for (auto& n : s.empty) ir::set_buffer(*n, std::make_shared<Buffer>(n->dtype, 0, device));
  std::vector<Bound> bound;
  for (size_t i = 0; i < s.kernels.size(); i++) {
    const auto& k = s.kernels[i];
    const auto& p = lowered[i]->program;
    const std::vector<std::shared_ptr<Buffer>>& outs = m.buffers.outs[i];
    Bound bd{programs[i], {}, 0};
    for (auto& o : outs) {
      bd.args.push_back(o->data);
      bd.bytes += static_cast<int64_t>(o->nbytes());
    }
    // an in-place kernel's loops run over the slices it writes, not over the buffer it updates
    const int64_t elems = k.in_place ? k.outputs[0]->src[2]->numel() : k.outputs[0]->numel();
    if (k.in_place) bd.bytes -= static_cast<int64_t>(outs[0]->nbytes()) - elems * dtype_size(outs[0]->dtype);
    for (auto& in : k.inputs) {
      if (in->buffer->device != device)
        throw Error("kiln.realize: kernel " + p.name + " runs on " + device.str() + " but reads a " +
                    shape_str(in->shape) + " " + dtype_name(in->dtype) + " buffer on " +
                    in->buffer->device.str() + "; move it with .to(" + device.str() + ")");
      bd.args.push_back(in->buffer->data);
      bd.bytes += static_cast<int64_t>(in->buffer->nbytes());
    }
    runtime::Launch& launch = bd.launch;
    if (!k.ast->arg.empty() && k.ast->op == ir::Op::SINK)
      launch.vars = std::make_shared<const std::vector<ir::NodeRef>>(ir::vars_of(k.ast));
    launch.parallel = launch.parallel && p.flops + static_cast<double>(elems) >= 32768;
    if (!launch.vars && special_op(k))
      for (auto& in : k.inputs) launch.fixed_over_symbolic |= !in->sym.empty();
    r[i]->bind(launch, k);
    if (launch.gemm) stats().gemm_launches++;
    if (launch.cuda.kind == codegen::CudaLaunch::Kind::Grid) stats().attention_launches++;
    if (settings().debug >= 3) describe(i, k, *lowered[i], launch, gemm_library);
    for (size_t o = 0; o < outs.size(); o++) ir::set_buffer(*k.outputs[o], outs[o]);  // later kernels' inputs
    bound.push_back(std::move(bd));
  }
  return bound;
}

}  // namespace kiln::engine
