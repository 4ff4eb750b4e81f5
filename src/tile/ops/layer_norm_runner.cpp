// The tile layer norm as a runner of the engine (engine/runners.h): LAYER_NORM kernels (KILN_LAYERNORM=
// tile) run the programs of kernels/layernorm on the CPU and on Hopper GPUs, their outputs in the
// buffers the memory plan gives the kernel, so a kiln::Jit step records and replays them (on CUDA
// inside its graph). Registered as the program starts.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "engine/launch_observer.h"
#include "engine/runners.h"
#include "ir/layer_norm_parts.h"
#include "kiln/tile_ops.h"
#include "tile/ops/programs.h"
#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

using ir::LayerNormPart;

Device device_of(const ir::Node& n) { return n.device < 0 ? Device::cpu() : Device::from_code(n.device); }

// A near-square 2D grid of `cores` cores, for the backward's cross-core weight-gradient reduction.
Grid grid_of(int cores) {
  int rows = 1;
  for (int r = 1; r * r <= cores; r++)
    if (cores % r == 0) rows = r;
  return Grid::grid2d(rows, cores / rows);
}

// A kernel's tile program, and where each of its tensors lies at a launch: argument `arg` of the
// kernel, or memory of its own (the constant rows, and the outputs the kernel does not return).
struct LayerNormLaunch {
  LayerNormLaunch(Program p, Device d) : program(std::move(p)), device(d) {}
  Program program;
  Device device;
  std::vector<int> arg;  // per tensor of the program: the kernel's argument, or -1
  std::vector<void*> own;
  std::vector<Tensor> keep;  // what `own` points into
  cuda::Fixed fixed;
  std::mutex mu;  // one launch at a time (the memory of its own is shared)

  void run(void* const* args) {
    std::lock_guard<std::mutex> l(mu);
    std::vector<void*> at(arg.size());
    for (size_t i = 0; i < at.size(); i++) at[i] = arg[i] >= 0 ? args[arg[i]] : own[i];
    if (device.is_cuda())
      cuda::launch(program.desc(), device.index, at.data(), &fixed);
    else
      cpu::launch(*program.desc(), at.data());
  }
};

// Made once per kernel, whatever realize first needs it: the memory it makes for itself (and the
// kernels that fill it) belong to no kiln::Jit step that happens to be recording.
std::shared_ptr<LayerNormLaunch> make_launch(const schedule::Kernel& k, const runtime::Backend& b) {
  struct Unobserved {
    engine::LaunchObserver* was = std::exchange(engine::launch_observer(), nullptr);
    ~Unobserved() { engine::launch_observer() = was; }
  } unobserved;
  const ir::NodeRef& first = k.outputs[0];
  const bool fwd = ir::is_forward(ir::layer_norm_part(first->arg));
  const Device dev = device_of(*first);
  const ir::NodeRef& xn = k.inputs.at(fwd ? 0 : 1);
  const int64_t C = xn->shape[1];
  const DType t = xn->dtype;
  const int cores = std::max(1, b.limits().cores);
  // stand-ins of the inputs: the builders read their shapes, dtypes and device
  auto like = [&](const ir::NodeRef& n) { return zeros(n->shape, {.dtype = n->dtype, .device = dev}); };
  auto l = std::make_shared<LayerNormLaunch>(
      fwd ? ops::layernorm_forward_program(like(k.inputs[0]), like(k.inputs[1]), like(k.inputs[2]),
                                           first->fval, cores)
          : ops::layernorm_backward_program(
                like(k.inputs[0]), like(k.inputs[1]), like(k.inputs[2]), like(k.inputs[3]), like(k.inputs[4]),
                ops::constant_row(0.0, C, t, dev).reshape({C}),
                ops::constant_row(0.0, C, t, dev).reshape({C}), true, grid_of(cores)),
      dev);
  // the program's tensors by name: the kernel's inputs, its outputs by part, else memory of its own
  const std::map<std::string, int> inputs =
      fwd ? std::map<std::string, int>{{"x", 0}, {"w", 1}, {"b", 2}}
          : std::map<std::string, int>{{"dout", 0}, {"x", 1}, {"w", 2}, {"mean", 3}, {"rstd", 4}};
  const std::map<std::string, LayerNormPart> parts{
      {"out", LayerNormPart::Y}, {"mean", LayerNormPart::Mean},       {"rstd", LayerNormPart::Rstd},
      {"dx", LayerNormPart::Dx}, {"dweight", LayerNormPart::Dweight}, {"dbias", LayerNormPart::Dbias}};
  const int nouts = static_cast<int>(k.outputs.size());
  for (const TensorDecl& d : l->program.desc()->tensors) {
    int arg = -1;
    if (!d.output) {
      if (auto it = inputs.find(d.name); it != inputs.end()) arg = nouts + it->second;
    } else if (auto it = parts.find(d.name); it != parts.end()) {
      for (int o = 0; o < nouts; o++)
        if (ir::layer_norm_part(k.outputs[static_cast<size_t>(o)]->arg) == it->second) arg = o;
    }
    void* own = nullptr;
    if (arg < 0) {
      Tensor m = d.output ? zeros(d.shape, {.dtype = d.dtype, .device = dev}).contiguous() : d.value;
      m.realize();
      own = m.node()->buffer->data;
      l->keep.push_back(m);
    }
    l->arg.push_back(arg);
    l->own.push_back(own);
  }
  l->program.release();  // the stand-ins
  return l;
}

class TileRunner : public engine::Runner {
 public:
  std::string name(const runtime::Backend&) const override { return "tile"; }

  // f32 and bf16 rows on the CPU and on Hopper GPUs
  bool takes_node(const ir::Node& n, const runtime::Backend&) const override {
    if (n.op != ir::Op::LAYER_NORM) return false;
    const bool fwd = ir::is_forward(ir::layer_norm_part(n.arg));
    const ir::Node& x = *n.src.at(fwd ? 0 : 1);
    const Device d = device_of(n);
    return (x.dtype == DType::F32 || x.dtype == DType::BF16) && x.numel() > 0 &&
           (d.is_cpu() || (d.is_cuda() && cuda::runs_on(d.index)));
  }
  bool takes(const schedule::Kernel& k, const runtime::Backend& b) const override {
    return !k.ast->src.empty() && k.ast->src[0]->op == ir::Op::LAYER_NORM && takes_node(*k.outputs[0], b);
  }

  bool lowers() const override { return false; }
  codegen::Lowered describe(const schedule::Kernel& k) const override {
    codegen::Lowered l;
    const bool fwd = ir::is_forward(ir::layer_norm_part(k.outputs[0]->arg));
    const ir::NodeRef& x = k.inputs.at(fwd ? 0 : 1);
    l.program.name = std::string(fwd ? "tile_layernorm_fwd_" : "tile_layernorm_bwd_") +
                     std::to_string(x->shape[0]) + "_" + std::to_string(x->shape[1]);
    l.program.symbol = l.program.name;
    for (auto& o : k.outputs) l.program.globals.push_back(o->dtype);
    for (auto& i : k.inputs) l.program.globals.push_back(i->dtype);
    l.opts.push_back("TILE");
    return l;
  }
  // The program made once per kernel AST and device (per thread, as the entry points keep theirs).
  runtime::Launch load(const schedule::Kernel& k, runtime::Backend& b) const override {
    // kept to the end of the process (device memory is not freed after the driver has gone)
    using Made =
        std::map<std::pair<const ir::Node*, int>, std::pair<ir::NodeRef, std::shared_ptr<LayerNormLaunch>>>;
    thread_local Made* made = new Made;
    const Device dev = device_of(*k.outputs[0]);
    auto& [ast, l] = (*made)[{k.ast.get(), dev.code()}];
    if (!l) {
      l = make_launch(k, b);
      ast = k.ast;
    }
    runtime::Launch out;
    out.program = l.get();  // one per kernel: a jit step compares programs
    out.name = describe(k).program.name;
    out.device = dev;
    out.nargs = k.outputs.size() + k.inputs.size();
    out.call = [l = l](void* const* args) { l->run(args); };
    return out;
  }
};

}  // namespace

}  // namespace kiln::tile

// Registers as the program starts; CMakeLists.txt (KILN_REGISTRATIONS) has the linker keep it.
extern "C" const bool kiln_tile_runner = kiln::engine::register_runner(new kiln::tile::TileRunner());
