// Launches a tile program on the CPU: binds tensors, builds each core's CBs and semaphores, makes a
// fiber per role per core, runs them (watchdog.cpp, fibers.cpp) and turns the outputs into tensors.
#include <cstring>
#include <new>

#include "ir/node.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "runtime/buffer.h"
#include "tile/cpu/launch_state.h"

namespace kiln::tile::cpu {

namespace {

// A tensor's 2D view: all leading dims by the last one.
std::pair<int64_t, int64_t> as_2d(const Shape& s) {
  if (s.empty()) return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); i++) rows *= s[i];
  return {rows, s.back()};
}

std::string mb(double bytes) {
  return std::to_string(static_cast<long long>(bytes / (1 << 20) + 0.5)) + " MB";
}

// What a launch allocates, for an out-of-memory message.
std::string launch_memory(const Program::Desc& d, int n_roles) {
  size_t cbs = 0, outputs = 0;
  for (auto& cb : d.cbs) cbs += cb.block_bytes() * static_cast<size_t>(cb.buffer_factor);
  for (auto& t : d.tensors)
    if (t.output) {
      auto [rows, cols] = as_2d(t.shape);
      outputs += static_cast<size_t>(rows * cols) * dtype_size(t.dtype);
    }
  const double per_core = static_cast<double>(n_roles * kStackBytes + cbs), cores = d.grid.size();
  return "each core takes " + std::to_string(n_roles) + " role stacks of " +
         std::to_string(kStackBytes / 1024) + " KB and " + std::to_string(cbs) + " bytes of CBs, " +
         mb(per_core * cores) + " for all cores, and the outputs " + mb(static_cast<double>(outputs));
}

// Binds the tensors and builds the cores and their fibers (their stacks too, here on the launching
// thread, so running out of memory is one clear error).
void build(Launch& L, int n_roles, const abi::RoleFn* roles, void* const* at) {
  const Program::Desc& d = L.desc;
  // inputs stay alive (realized, contiguous) for the launch; outputs start as zeros
  L.outputs.resize(d.tensors.size());
  for (size_t i = 0; i < d.tensors.size(); i++) {
    const TensorDecl& t = d.tensors[i];
    auto [rows, cols] = as_2d(t.shape);
    std::byte* data;
    if (at) {  // the caller's memory
      data = static_cast<std::byte*>(at[i]);
      if (t.output && t.fill == Fill::Zeros)
        std::memset(data, 0, static_cast<size_t>(rows * cols) * dtype_size(t.dtype));
    } else if (t.output) {
      L.outputs[i].assign(static_cast<size_t>(rows * cols) * dtype_size(t.dtype), std::byte{0});
      data = L.outputs[i].data();
    } else {
      L.inputs.push_back(t.value.contiguous());
      L.inputs.back().realize();
      data = static_cast<std::byte*>(L.inputs.back().node()->buffer->data);
    }
    L.tensors.push_back(TensorView{data, &t, rows, cols});
  }
  const Grid& g = d.grid;
  for (int i = 0; i < g.size(); i++) {
    auto core = std::make_unique<Core>();
    core->index = i;
    core->x = i % g.cols;
    core->y = i / g.cols;
    const size_t n = d.arg_names.size();
    core->args.assign(d.args.begin() + static_cast<std::ptrdiff_t>(i * n),
                      d.args.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
    for (auto& cb : d.cbs) {
      CBState s;
      s.decl = &cb;
      s.block_bytes = cb.block_bytes();
      s.mem.resize(s.block_bytes * cb.buffer_factor);
      s.slots.resize(cb.buffer_factor);
      core->cbs.push_back(std::move(s));
    }
    core->sems.assign(d.semaphores.size(), 0);
    for (int r = 0; r < n_roles; r++) {
      auto f = std::make_unique<Fiber>();
      f->core = core.get();
      f->role = r < static_cast<int>(d.dm_roles.size()) ? d.dm_roles[r] : d.compute_role;
      f->fn = roles[r];
      f->stack.reset(new char[kStackBytes]);
      core->fibers.push_back(f.get());
      L.fibers.push_back(std::move(f));
    }
    L.cores.push_back(std::move(core));
  }
}

}  // namespace

void launch(Program::Desc& d, void* const* at) {
  // the CPU backend's limit, a GPU's, so that a kernel too large for it fails here too
  check_cb_memory(d, layout_cbs(d), runtime::backend(Device::cpu()).limits().tile_core_bytes, "");
  Entry entry = compile(d);
  abi::RoleFn roles[16];
  if (d.dm_roles.size() + 1 > 16) throw Error("kiln.tile: program '" + d.name + "' has more than 16 roles");
  int n_roles = entry(&runtime_table(), roles);

  auto L = std::make_unique<Launch>();
  try {
    L->desc = d;
    build(*L, n_roles, roles, at);
  } catch (const std::bad_alloc&) {
    L.reset();
    throw Error("kiln.tile: out of memory launching " + std::to_string(d.grid.size()) + " cores of kernel '" +
                d.name + "': " + launch_memory(d, n_roles) + "; use fewer cores or smaller CBs");
  }
  stats().tile_launches++;
  run_cores(L);
  if (at) return;
  for (size_t i = 0; i < d.tensors.size(); i++)
    if (d.tensors[i].output)
      d.tensors[i].value = from_buffer(L->outputs[i].data(), d.tensors[i].shape, d.tensors[i].dtype);
}

}  // namespace kiln::tile::cpu
