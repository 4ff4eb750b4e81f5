// kiln::Jit (include/kiln/jit.h): record calls, find the captured step, replay it.
#include "kiln/jit.h"

#include <cstring>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "engine/realize.h"
#include "frontend/jit_recorder.h"
#include "frontend/tensor_impl.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"
#include "runtime/backend.h"
#include "runtime/program_cache.h"

namespace kiln {

namespace jit {
Recording*& active() {
  thread_local Recording* r = nullptr;
  return r;
}

RecordingScope::RecordingScope(Recording& r) : prev_(active()), prev_observer_(engine::launch_observer()) {
  active() = &r;
  engine::launch_observer() = &r;
}
RecordingScope::~RecordingScope() {
  active() = prev_;
  engine::launch_observer() = prev_observer_;
}
}  // namespace jit

namespace {

using jit::Recording;
using ImplRef = std::shared_ptr<Tensor::Impl>;

std::string sig(const Shape& s, DType t) { return shape_str(s) + " " + to_string(t); }

// A tensor's dims as a step sees them: each dim's expression (ir::dim_exprs), a constant size or, for
// a symbolic dim, its expression over variables the replay binds from the inputs' shapes.
using Dims = std::vector<ir::NodeRef>;

std::string dims_str(const Dims& dims) {
  std::string out = "(";
  for (size_t d = 0; d < dims.size(); d++) out += (d ? ", " : "") + ir::dim_label(dims[d]);
  return out + ")";
}

Shape shape_at(const Dims& dims, const ir::Bindings& b) {
  Shape s;
  for (auto& e : dims) s.push_back(ir::eval_index(e, b));
  return s;
}

// A tensor over buffer b with the dims' sizes under bindings b, its symbolic dims marked again.
ir::NodeRef node_at(const std::shared_ptr<Buffer>& buf, const Dims& dims, const ir::Bindings& b) {
  std::vector<ir::NodeRef> sym(dims.size());
  for (size_t d = 0; d < dims.size(); d++)
    if (dims[d]->op != ir::Op::CONST) sym[d] = dims[d];
  return frontend::buffer_node(buf, shape_at(dims, b), std::move(sym));
}

int64_t numel_at(const Dims& dims, const ir::Bindings& b) {
  int64_t n = 1;
  for (int64_t x : shape_at(dims, b)) n *= x;
  return n;
}

// The role of a buffer in a recorded step (see jit.h). Sizes: the values of a kernel's symbolic
// sizes (runtime::Launch::vars), written again by each replay for the inputs' shapes.
enum class Role { Input, State, Constant, HostMade, Arena, Result, Scratch, Sizes };

struct Slot {
  Role role;
  std::shared_ptr<Buffer> buffer;  // as recorded
  size_t input = 0;                // Input
  std::weak_ptr<Tensor::Impl> state = {};
  std::shared_ptr<const std::vector<ir::NodeRef>> vars = {};  // Sizes
  Dims dims = {};  // Result: the dims of the tensors it holds, where symbolic

  std::string describe() const {
    std::ostringstream os;
    std::string what = to_string(buffer->dtype) + "[" + std::to_string(buffer->capacity) + "]";
    switch (role) {
      case Role::Input: os << "input " << input; break;
      case Role::State: os << "state tensor " << state.lock().get() << " " << what; break;
      case Role::Constant: os << "constant buffer #" << buffer->id << " " << what; break;
      case Role::HostMade: {
        std::shared_ptr<const Buffer> host = on_host(buffer);
        std::string bytes(static_cast<const char*>(host->data), host->nbytes());
        os << "value made on the host " << what;
        if (host->numel == 1)
          os << " = " << host->get_f(0);
        else
          os << " (content hash " << runtime::hash_string(bytes) << ")";
        break;
      }
      case Role::Arena: os << "arena +" << buffer->offset << " " << what; break;
      case Role::Result: os << "result " << what; break;
      case Role::Scratch: os << "scratch " << what; break;
      case Role::Sizes:
        os << "sizes";
        for (auto& v : *vars) os << " " << ir::var_name(*v);
        break;
    }
    return os.str();
  }
};

// A recorded call with its buffers given roles: the launch list over a slot table.
struct Step {
  std::vector<Slot> slots;
  std::vector<runtime::SlotLaunch> launches;
  struct Publish {
    std::weak_ptr<Tensor::Impl> impl;
    int32_t slot;
    Dims dims;
  };
  std::vector<Publish> publish;                   // tensors bound to results
  std::vector<std::pair<int32_t, Dims>> outputs;  // returned tensors
  std::vector<std::pair<Dims, DType>> inputs;
  std::vector<int64_t> input_capacity;  // elements at the largest values of its symbolic dims
  std::vector<size_t> input_alias;      // the first input with the same buffer
  std::vector<std::function<void()>> host_effects;
  std::string unbound;  // why a replay could not bind the symbolic sizes: the step is not captured

  // One line per launch and per slot: two calls recorded the same step when these agree.
  std::vector<std::string> describe() const {
    std::vector<std::string> d;
    for (size_t i = 0; i < inputs.size(); i++)
      d.push_back("input " + std::to_string(i) + ": " + dims_str(inputs[i].first) + " " +
                  to_string(inputs[i].second));
    for (size_t i = 0; i < launches.size(); i++) {
      std::ostringstream os;
      const auto& l = launches[i];
      os << "launch " << i << " (" << l.launch.name << ", program " << l.launch.program
         << (l.launch.gemm || l.launch.rebind ? " via the GEMM library" : "") << ") on:";
      for (int32_t a : l.args) os << " [" << slots[static_cast<size_t>(a)].describe() << "]";
      d.push_back(os.str());
    }
    for (auto& [slot, dims] : outputs)
      d.push_back("returns " + slots[static_cast<size_t>(slot)].describe() + " of shape " + dims_str(dims));
    return d;
  }
};

Step analyze(const Recording& rec, const std::vector<Tensor>& inputs, const std::vector<ImplRef>& returned,
             const std::vector<Tensor>& outs) {
  Step st;
  st.host_effects = rec.host_effects;
  std::unordered_map<const Buffer*, size_t> input_of;
  for (size_t i = 0; i < inputs.size(); i++) {
    const Buffer* b = inputs[i].node()->buffer.get();
    auto [it, fresh] = input_of.emplace(b, i);
    st.input_alias.push_back(it->second);
    st.inputs.emplace_back(ir::dim_exprs(inputs[i].node()), inputs[i].dtype());
    st.input_capacity.push_back(ir::capacity(*inputs[i].node()));
  }
  std::unordered_map<const Buffer*, ImplRef> state_of;
  for (auto& [w, b] : rec.assigned)
    if (ImplRef impl = w.lock(); impl && b) state_of.emplace(b.get(), impl);
  std::unordered_map<const Buffer*, int32_t> slot_of;
  auto slot = [&](const std::shared_ptr<Buffer>& b, bool produced) -> int32_t {
    if (auto it = slot_of.find(b.get()); it != slot_of.end()) return it->second;
    Slot s{Role::Constant, b, 0, {}};
    if (b->base)
      s.role = Role::Arena;
    else if (b->id >= rec.first_new_id)
      s.role = produced ? Role::Scratch : Role::HostMade;  // Scratch until a tensor is bound to it
    else if (auto in = input_of.find(b.get()); in != input_of.end())
      s.role = Role::Input, s.input = in->second;
    else if (auto sv = state_of.find(b.get()); sv != state_of.end())
      s.role = Role::State, s.state = sv->second;
    auto id = static_cast<int32_t>(st.slots.size());
    st.slots.push_back(std::move(s));
    slot_of[b.get()] = id;
    return id;
  };
  // symbolic sizes: a replay binds them from the inputs' shapes, so each must be given by one
  std::vector<ir::NodeRef> input_nodes;
  for (auto& t : inputs) input_nodes.push_back(t.node());
  const ir::Bindings bound = ir::bind_vars(input_nodes);
  for (auto& l : rec.launches) {
    if (l.launch.fixed_over_symbolic && st.unbound.empty())
      st.unbound = "kernel " + l.launch.name + " reads tensors with symbolic dims at the sizes of this call";
    runtime::SlotLaunch sl{l.launch, {}};
    for (auto& o : l.outputs) sl.args.push_back(slot(o, true));
    for (auto& i : l.inputs) sl.args.push_back(slot(i, false));
    if (l.launch.vars) {
      Slot& sizes = st.slots[static_cast<size_t>(sl.args.back())];
      sizes.role = Role::Sizes;
      sizes.vars = l.launch.vars;
      for (auto& v : *l.launch.vars)
        if (!bound.count(v.get()) && st.unbound.empty())
          st.unbound = "no input's shape gives the variable " + ir::var_name(*v);
      // a runner's own launch (a tile program) keeps the sizes it was bound with unless it can be
      // bound again (a GEMM library call: Launch::rebind)
      if ((l.launch.gemm || l.launch.call) && !l.launch.rebind && st.unbound.empty())
        st.unbound = "kernel " + l.launch.name + " has symbolic sizes but runs with fixed ones";
    }
    st.launches.push_back(std::move(sl));
  }
  // A buffer read from before the call that nothing but this recording holds any more was replaced
  // during the call by something the jit cannot follow (not assign_, e.g. gradients accumulated
  // over calls): a replay would read the old value.
  for (auto& s : st.slots) {
    if (s.role != Role::Constant) continue;
    long held_here = 1;  // the slot
    for (auto& l : rec.launches)
      for (auto& i : l.inputs) held_here += i == s.buffer;
    if (s.buffer.use_count() <= held_here)
      throw Error("kiln.jit: the function reads a " + to_string(s.buffer->dtype) + " tensor of " +
                  std::to_string(s.buffer->numel) +
                  " elements that it replaces during the call without assign_ (accumulated gradients, a "
                  "tensor variable reassigned): a replay would read its old value. Pass it as an input, "
                  "update it with assign_, or call zero_grad() inside the function");
  }
  // tensors the call bound to new buffers: results that replays hand out again
  std::unordered_set<const Tensor::Impl*> assigned, seen;
  for (auto& [w, b] : rec.assigned)
    if (auto impl = w.lock()) assigned.insert(impl.get());
  std::unordered_set<const Tensor::Impl*> returned_only;
  for (auto& impl : returned)
    if (!assigned.count(impl.get())) returned_only.insert(impl.get());
  auto bind = [&](const std::weak_ptr<Tensor::Impl>& w) {
    ImplRef impl = w.lock();
    if (!impl || !seen.insert(impl.get()).second || returned_only.count(impl.get()) || !impl->node->buffer)
      return;
    auto it = slot_of.find(impl->node->buffer.get());
    if (it == slot_of.end()) return;
    Slot& s = st.slots[static_cast<size_t>(it->second)];
    if (s.role != Role::Scratch && s.role != Role::Result) return;
    s.role = Role::Result;
    s.dims = ir::dim_exprs(impl->node);
    st.publish.push_back({impl, it->second, s.dims});
  };
  for (auto& [w, b] : rec.assigned) bind(w);
  for (auto& w : rec.realized) bind(w);
  for (auto& t : outs) {
    int32_t id = slot(t.node()->buffer, false);
    Slot& s = st.slots[static_cast<size_t>(id)];
    if (s.role == Role::Scratch) s.role = Role::Result, s.dims = ir::dim_exprs(t.node());
    st.outputs.emplace_back(id, ir::dim_exprs(t.node()));
  }
  return st;
}

std::optional<std::string> first_difference(const std::vector<std::string>& a,
                                            const std::vector<std::string>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); i++)
    if (a[i] != b[i]) return "was \"" + a[i] + "\", is \"" + b[i] + "\"";
  if (a.size() != b.size())
    return "has " + std::to_string(b.size()) + " launches, inputs and outputs, was " +
           std::to_string(a.size());
  return std::nullopt;
}

// The captured step, ready to replay: each slot resolves to a pointer at each replay.
struct Replay {
  enum class Kind { Input, State, Fixed, Fresh };
  struct ReplaySlot {
    Kind kind;
    size_t input = 0;
    std::weak_ptr<Tensor::Impl> state;
    std::shared_ptr<Buffer> fixed;
    DType dtype;
    int64_t numel, capacity;
    Dims dims = {};  // Fresh: its tensors' dims (numel per binding)
    // Fresh: buffers of earlier replays, taken again once nothing else holds them. A step that
    // updates its state writes every other replay into the same buffers, so its pointers repeat
    // and a device can keep replaying one recorded graph.
    std::vector<std::shared_ptr<Buffer>> spare = {};
  };
  std::vector<ReplaySlot> slots;
  std::vector<runtime::SlotLaunch> launches;
  std::vector<Step::Publish> publish;
  std::vector<std::pair<int32_t, Dims>> outputs;
  std::vector<std::pair<Dims, DType>> inputs;
  std::vector<int64_t> input_capacity;
  std::vector<size_t> input_alias;
  // the Sizes slots' values, packed in one buffer that each replay writes once: (vars, offset)
  std::shared_ptr<Buffer> sizes;
  std::vector<std::pair<std::shared_ptr<const std::vector<ir::NodeRef>>, int64_t>> sizes_at;
  // launches bound again at each replay's values (Launch::rebind): (launch, offset of its values),
  // and the values they were last bound at (a replay at the same ones binds nothing)
  std::vector<std::pair<size_t, int64_t>> rebinds;
  std::vector<int64_t> bound_values;
  std::vector<std::function<void()>> host_effects;
  std::shared_ptr<Buffer> arena;  // every schedule's arena: their values do not outlive their schedule
  Device device;                  // where the step's kernels run
  std::unique_ptr<runtime::ReplayState> launcher_state;  // the launcher's (CUDA: the step's graphs)
};

Replay prepare(Step&& st) {
  Replay r;
  if (!st.slots.empty()) r.device = st.slots.front().buffer->device;
  // the schedules' arenas overlay in one, the largest of the capture call's: their values died
  // with their schedules, and a second arena that size would double the step's peak memory
  for (auto& s : st.slots)
    if (s.role == Role::Arena && (!r.arena || s.buffer->base->nbytes() > r.arena->nbytes()))
      r.arena = s.buffer->base;
  // each kernel's sizes at a 32-byte boundary (a kernel may check its arguments' alignment)
  auto room = [](const Slot& s) { return (static_cast<int64_t>(s.vars->size()) + 3) / 4 * 4; };
  int64_t sizes = 0;
  for (auto& s : st.slots)
    if (s.role == Role::Sizes) sizes += room(s);
  if (sizes) r.sizes = std::make_shared<Buffer>(DType::I64, sizes, r.device);
  sizes = 0;
  std::vector<int64_t> sizes_offset(st.slots.size(), -1);
  for (auto& s : st.slots) {
    Replay::ReplaySlot rs{Replay::Kind::Fixed, s.input,         s.state,           nullptr,
                          s.buffer->dtype,     s.buffer->numel, s.buffer->capacity};
    switch (s.role) {
      case Role::Input: rs.kind = Replay::Kind::Input; break;
      case Role::State: rs.kind = Replay::Kind::State; break;
      case Role::Constant:
      case Role::HostMade: rs.fixed = s.buffer; break;
      case Role::Arena:
        rs.fixed = std::make_shared<Buffer>(r.arena, s.buffer->offset, rs.dtype, rs.numel);
        break;
      // fresh memory: the recorded buffer may still be read through the capture call's graphs
      case Role::Scratch:
        rs.fixed = std::make_shared<Buffer>(rs.dtype, rs.numel, r.device, rs.capacity);
        break;
      case Role::Result: rs.kind = Replay::Kind::Fresh, rs.dims = s.dims; break;
      case Role::Sizes: {
        auto n = static_cast<int64_t>(s.vars->size());
        rs.fixed = std::make_shared<Buffer>(r.sizes, static_cast<size_t>(sizes) * 8, DType::I64, n);
        r.sizes_at.emplace_back(s.vars, sizes);
        sizes_offset[r.slots.size()] = sizes;
        sizes += room(s);
        break;
      }
    }
    r.slots.push_back(std::move(rs));
  }
  r.launches = std::move(st.launches);
  for (size_t i = 0; i < r.launches.size(); i++)
    if (r.launches[i].launch.rebind)
      r.rebinds.emplace_back(i, sizes_offset[static_cast<size_t>(r.launches[i].args.back())]);
  r.publish = std::move(st.publish);
  r.outputs = std::move(st.outputs);
  r.inputs = std::move(st.inputs);
  r.input_capacity = std::move(st.input_capacity);
  r.input_alias = std::move(st.input_alias);
  r.host_effects = std::move(st.host_effects);
  return r;
}

}  // namespace

struct Jit::State {
  Fn fn;
  JitOptions options;
  size_t calls = 0;
  int unstable = 0;
  std::optional<std::vector<std::string>> previous;  // the last recorded call, described
  std::optional<Replay> replay;
};

Jit::Jit(Fn fn, JitOptions options) : s_(std::make_unique<State>()) {
  s_->fn = std::move(fn);
  s_->options = options;
}
Jit::~Jit() = default;
Jit::Jit(Jit&&) noexcept = default;
Jit& Jit::operator=(Jit&&) noexcept = default;

void on_jit_replay(std::function<void()> effect) {
  if (jit::Recording* r = jit::active()) r->host_effects.push_back(std::move(effect));
}

bool Jit::captured() const { return s_->replay.has_value(); }
size_t Jit::calls() const { return s_->calls; }
size_t Jit::num_launches() const { return s_->replay ? s_->replay->launches.size() : 0; }
void Jit::reset() {
  s_->replay.reset();
  s_->previous.reset();
  s_->unstable = 0;
}

std::vector<Tensor> Jit::operator()(const std::vector<Tensor>& inputs) {
  s_->calls++;
  realize(inputs);
  if (s_->replay) {
    Replay& r = *s_->replay;
    if (inputs.size() != r.inputs.size())
      throw Error("kiln.jit: the captured step takes " + std::to_string(r.inputs.size()) + " inputs, got " +
                  std::to_string(inputs.size()));
    std::vector<ir::NodeRef> input_nodes;
    for (size_t i = 0; i < inputs.size(); i++) {
      const Dims& dims = r.inputs[i].first;
      const ir::NodeRef& n = inputs[i].node();
      bool same = n->shape.size() == dims.size() && inputs[i].dtype() == r.inputs[i].second;
      for (size_t d = 0; same && d < dims.size(); d++)
        same = dims[d]->op == ir::Op::CONST ? n->shape[d] == dims[d]->ival() : ir::dim_expr(n, d) == dims[d];
      if (!same)
        throw Error("kiln.jit: input " + std::to_string(i) + " is " + dims_str(ir::dim_exprs(n)) + " " +
                    to_string(inputs[i].dtype()) + ", the step was captured with " + dims_str(dims) + " " +
                    to_string(r.inputs[i].second) +
                    ": a captured step has fixed dtypes and shapes but for its symbolic dims (use another "
                    "kiln::Jit, or reset())");
      input_nodes.push_back(n);
      size_t a = r.input_alias[i];
      if (a != i && inputs[i].node()->buffer != inputs[a].node()->buffer)
        throw Error("kiln.jit: inputs " + std::to_string(a) + " and " + std::to_string(i) +
                    " were one tensor at capture and are two now: the captured step read them as one");
    }
    const ir::Bindings bound = ir::bind_vars(input_nodes);
    if (r.sizes) {  // the kernels' symbolic sizes for these inputs
      std::vector<int64_t> values(static_cast<size_t>(r.sizes->numel));
      for (auto& [vars, at] : r.sizes_at)
        for (size_t v = 0; v < vars->size(); v++)
          values[static_cast<size_t>(at) + v] = ir::eval_index((*vars)[v], bound);
      upload(*r.sizes, values.data());
      if (!r.rebinds.empty() && values != r.bound_values) {
        for (auto& [i, at] : r.rebinds) r.launches[i].launch.rebind(r.launches[i].launch, values.data() + at);
        r.bound_values = values;
      }
    }
    runtime::Launcher& launcher = runtime::backend(r.device).launcher();
    std::vector<void*> ptrs(r.slots.size());
    std::vector<std::shared_ptr<Buffer>> fresh(r.slots.size());
    for (size_t i = 0; i < r.slots.size(); i++) {
      auto& s = r.slots[i];
      switch (s.kind) {
        case Replay::Kind::Input: {
          const std::shared_ptr<Buffer>& in = inputs[s.input].node()->buffer;
          ptrs[i] = in->data;
          // a replay that keeps addresses (a CUDA graph) reads fixed ones: each call's inputs are
          // copied there first (a batch is small next to a step's work), so it is recorded once
          if (launcher.replay_keeps_addresses()) {
            if (!s.fixed)
              s.fixed = std::make_shared<Buffer>(s.dtype, in->numel, r.device, r.input_capacity[s.input]);
            Buffer at(s.fixed, 0, in->dtype, in->numel);  // a symbolic input fills a prefix
            copy_buffer(at, *in);
            ptrs[i] = s.fixed->data;
          }
          break;
        }
        case Replay::Kind::Fixed: ptrs[i] = s.fixed->data; break;
        case Replay::Kind::Fresh: {
          for (auto& b : s.spare)
            if (b.use_count() == 1 && !fresh[i]) fresh[i] = b;  // only this list holds it
          if (!fresh[i]) {
            fresh[i] = std::make_shared<Buffer>(s.dtype, s.numel, r.device, s.capacity);
            if (s.spare.size() < 3) s.spare.push_back(fresh[i]);
          }
          if (!s.dims.empty()) fresh[i]->numel = numel_at(s.dims, bound);
          ptrs[i] = fresh[i]->data;
          break;
        }
        case Replay::Kind::State: {
          ImplRef impl = s.state.lock();
          if (!impl)
            throw Error("kiln.jit: a tensor the captured step updates (" + to_string(s.dtype) + ", " +
                        std::to_string(s.numel) + " elements) no longer exists; reset() and capture again");
          if (!impl->node->buffer) engine::realize({impl->node}, r.device);
          const Buffer& b = *impl->node->buffer;
          if (b.dtype != s.dtype || b.numel != s.numel)
            throw Error("kiln.jit: a tensor the captured step updates is " + sig(impl->node->shape, b.dtype) +
                        " now and had " + std::to_string(s.numel) + " elements of " + to_string(s.dtype) +
                        " at capture; reset() and capture again");
          ptrs[i] = b.data;
          break;
        }
      }
    }
    launcher.replay(r.launches, ptrs, r.launcher_state);
    stats().jit_replays++;
    for (auto& p : r.publish)
      if (ImplRef impl = p.impl.lock())
        autograd::rebind(impl, node_at(fresh[static_cast<size_t>(p.slot)], p.dims, bound));
    for (auto& effect : r.host_effects) effect();
    std::vector<Tensor> outs;
    for (auto& [slot, dims] : r.outputs) {
      auto& s = r.slots[static_cast<size_t>(slot)];
      std::shared_ptr<Buffer> b = s.kind == Replay::Kind::Fresh   ? fresh[static_cast<size_t>(slot)]
                                  : s.kind == Replay::Kind::Fixed ? s.fixed
                                  : s.kind == Replay::Kind::Input ? inputs[s.input].node()->buffer
                                                                  : s.state.lock()->node->buffer;
      outs.push_back(Tensor(node_at(b, dims, bound)));
    }
    return outs;
  }

  Recording rec;
  std::vector<Tensor> outs;
  {
    jit::RecordingScope scope(rec);
    outs = s_->fn(inputs);
    // leave results and updated tensors realized, as an eager step that reads them would
    std::vector<Tensor> pending = outs;
    for (auto& [w, b] : rec.assigned)
      if (ImplRef impl = w.lock()) {
        Tensor t;
        t.impl_ = impl;
        pending.push_back(t);
      }
    realize(pending);
  }
  std::vector<ImplRef> returned;
  for (auto& t : outs) returned.push_back(t.impl_);
  Step step = analyze(rec, inputs, returned, outs);
  // a step whose symbolic sizes a replay could not bind runs as it is recorded at every call
  if (!step.unbound.empty()) {
    if (settings().debug >= 1 && s_->calls == 1)
      std::fprintf(stderr, "kiln: jit: %s, so the step is not captured\n", step.unbound.c_str());
    return outs;
  }
  std::vector<std::string> described = step.describe();
  if (s_->previous) {
    std::optional<std::string> diff = first_difference(*s_->previous, described);
    if (!diff) {
      s_->replay = prepare(std::move(step));
      s_->previous.reset();
      if (settings().debug >= 1)
        std::fprintf(stderr, "kiln: jit captured a step of %zu launches at call %zu\n",
                     s_->replay->launches.size(), s_->calls);
      return outs;
    }
    if (++s_->unstable >= s_->options.max_unstable_calls)
      throw Error("kiln.jit: the function did not record the same step in two calls in a row after " +
                  std::to_string(s_->calls) + " calls; at call " + std::to_string(s_->calls) + " the step " +
                  *diff +
                  ". A value baked into the step changes from call to call (a constant in the graph, such "
                  "as a learning rate passed as a number, or a value made on the host): pass it as an input "
                  "tensor or keep it in a tensor that the step reads");
  }
  s_->previous = std::move(described);
  return outs;
}

}  // namespace kiln
