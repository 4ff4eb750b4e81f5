// Launches a tile program on the CPU: binds tensors, builds each core's CBs and semaphores, makes a
// fiber per role per core, runs them (fibers.cpp) and turns the outputs into tensors.
#include <cstring>

#include "ir/node.h"
#include "kiln/debug.h"
#include "kiln/error.h"
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

}  // namespace

void launch(Program::Desc& d) {
  // the GPU's limit, so that a kernel too large for it fails here too
  check_cb_memory(d, layout_cbs(d), kSharedMemoryPerBlock, "");
  Entry entry = compile(d);
  abi::RoleFn roles[16];
  if (d.dm_roles.size() + 1 > 16) throw Error("kiln.tile: program '" + d.name + "' has more than 16 roles");
  int n_roles = entry(&runtime_table(), roles);

  Launch L;
  L.desc = &d;
  // inputs stay alive (realized, contiguous) for the launch; outputs start as zeros
  std::vector<Tensor> inputs;
  std::vector<std::vector<std::byte>> outputs(d.tensors.size());
  for (size_t i = 0; i < d.tensors.size(); i++) {
    TensorDecl& t = d.tensors[i];
    auto [rows, cols] = as_2d(t.shape);
    std::byte* data;
    if (t.output) {
      outputs[i].assign(static_cast<size_t>(rows * cols) * dtype_size(t.dtype), std::byte{0});
      data = outputs[i].data();
    } else {
      inputs.push_back(t.value.contiguous());
      inputs.back().realize();
      data = static_cast<std::byte*>(inputs.back().node()->buffer->data);
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
      core->fibers.push_back(f.get());
      L.fibers.push_back(std::move(f));
    }
    L.cores.push_back(std::move(core));
  }
  stats().tile_launches++;
  run_cores(L);
  for (size_t i = 0; i < d.tensors.size(); i++)
    if (d.tensors[i].output)
      d.tensors[i].value = from_buffer(outputs[i].data(), d.tensors[i].shape, d.tensors[i].dtype);
}

}  // namespace kiln::tile::cpu
