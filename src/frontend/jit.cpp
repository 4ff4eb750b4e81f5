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

// The role of a buffer in a recorded step (see jit.h).
enum class Role { Input, State, Constant, HostMade, Arena, Result, Scratch };

struct Slot {
  Role role;
  std::shared_ptr<Buffer> buffer;  // as recorded
  size_t input = 0;                // Input
  std::weak_ptr<Tensor::Impl> state = {};

  std::string describe() const {
    std::ostringstream os;
    std::string what = to_string(buffer->dtype) + "[" + std::to_string(buffer->numel) + "]";
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
    }
    return os.str();
  }
};

// A recorded call with its buffers given roles: the launch list over a slot table.
struct Step {
  std::vector<Slot> slots;
  std::vector<runtime::SlotLaunch> launches;
  std::vector<std::pair<std::weak_ptr<Tensor::Impl>, int32_t>> publish;  // tensors bound to results
  std::vector<std::pair<int32_t, Shape>> outputs;                        // returned tensors
  std::vector<std::pair<Shape, DType>> inputs;
  std::vector<size_t> input_alias;  // the first input with the same buffer
  std::vector<std::function<void()>> host_effects;

  // One line per launch and per slot: two calls recorded the same step when these agree.
  std::vector<std::string> describe() const {
    std::vector<std::string> d;
    for (size_t i = 0; i < inputs.size(); i++)
      d.push_back("input " + std::to_string(i) + ": " + sig(inputs[i].first, inputs[i].second));
    for (size_t i = 0; i < launches.size(); i++) {
      std::ostringstream os;
      const auto& l = launches[i];
      os << "launch " << i << " (" << l.launch.name << ", program " << l.launch.program
         << (l.launch.gemm ? " via the GEMM library" : "") << ") on:";
      for (int32_t a : l.args) os << " [" << slots[static_cast<size_t>(a)].describe() << "]";
      d.push_back(os.str());
    }
    for (auto& [slot, shape] : outputs)
      d.push_back("returns " + slots[static_cast<size_t>(slot)].describe() + " of shape " + shape_str(shape));
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
    st.inputs.emplace_back(inputs[i].shape(), inputs[i].dtype());
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
  for (auto& l : rec.launches) {
    runtime::SlotLaunch sl{l.launch, {}};
    for (auto& o : l.outputs) sl.args.push_back(slot(o, true));
    for (auto& i : l.inputs) sl.args.push_back(slot(i, false));
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
    st.publish.emplace_back(impl, it->second);
  };
  for (auto& [w, b] : rec.assigned) bind(w);
  for (auto& w : rec.realized) bind(w);
  for (auto& t : outs) {
    int32_t id = slot(t.node()->buffer, false);
    if (st.slots[static_cast<size_t>(id)].role == Role::Scratch)
      st.slots[static_cast<size_t>(id)].role = Role::Result;
    st.outputs.emplace_back(id, t.shape());
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
    int64_t numel;
    // Fresh: buffers of earlier replays, taken again once nothing else holds them. A step that
    // updates its state writes every other replay into the same buffers, so its pointers repeat
    // and a device can keep replaying one recorded graph.
    std::vector<std::shared_ptr<Buffer>> spare = {};
  };
  std::vector<ReplaySlot> slots;
  std::vector<runtime::SlotLaunch> launches;
  std::vector<std::pair<std::weak_ptr<Tensor::Impl>, int32_t>> publish;
  std::vector<std::pair<int32_t, Shape>> outputs;
  std::vector<std::pair<Shape, DType>> inputs;
  std::vector<size_t> input_alias;
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
  for (auto& s : st.slots) {
    Replay::ReplaySlot rs{Replay::Kind::Fixed, s.input, s.state, nullptr, s.buffer->dtype, s.buffer->numel};
    switch (s.role) {
      case Role::Input: rs.kind = Replay::Kind::Input; break;
      case Role::State: rs.kind = Replay::Kind::State; break;
      case Role::Constant:
      case Role::HostMade: rs.fixed = s.buffer; break;
      case Role::Arena:
        rs.fixed = std::make_shared<Buffer>(r.arena, s.buffer->offset, rs.dtype, rs.numel);
        break;
      // fresh memory: the recorded buffer may still be read through the capture call's graphs
      case Role::Scratch: rs.fixed = std::make_shared<Buffer>(rs.dtype, rs.numel, r.device); break;
      case Role::Result: rs.kind = Replay::Kind::Fresh; break;
    }
    r.slots.push_back(std::move(rs));
  }
  r.launches = std::move(st.launches);
  r.publish = std::move(st.publish);
  r.outputs = std::move(st.outputs);
  r.inputs = std::move(st.inputs);
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
    for (size_t i = 0; i < inputs.size(); i++) {
      if (inputs[i].shape() != r.inputs[i].first || inputs[i].dtype() != r.inputs[i].second)
        throw Error("kiln.jit: input " + std::to_string(i) + " is " +
                    sig(inputs[i].shape(), inputs[i].dtype()) + ", the step was captured with " +
                    sig(r.inputs[i].first, r.inputs[i].second) +
                    ": a captured step has fixed shapes and dtypes (use another kiln::Jit, or reset())");
      size_t a = r.input_alias[i];
      if (a != i && inputs[i].node()->buffer != inputs[a].node()->buffer)
        throw Error("kiln.jit: inputs " + std::to_string(a) + " and " + std::to_string(i) +
                    " were one tensor at capture and are two now: the captured step read them as one");
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
            if (!s.fixed) s.fixed = std::make_shared<Buffer>(s.dtype, s.numel, r.device);
            copy_buffer(*s.fixed, *in);
            ptrs[i] = s.fixed->data;
          }
          break;
        }
        case Replay::Kind::Fixed: ptrs[i] = s.fixed->data; break;
        case Replay::Kind::Fresh: {
          for (auto& b : s.spare)
            if (b.use_count() == 1 && !fresh[i]) fresh[i] = b;  // only this list holds it
          if (!fresh[i]) {
            fresh[i] = std::make_shared<Buffer>(s.dtype, s.numel, r.device);
            if (s.spare.size() < 3) s.spare.push_back(fresh[i]);
          }
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
    for (auto& [w, slot] : r.publish)
      if (ImplRef impl = w.lock())
        autograd::rebind(impl, frontend::buffer_node(fresh[static_cast<size_t>(slot)], impl->node->shape));
    for (auto& effect : r.host_effects) effect();
    std::vector<Tensor> outs;
    for (auto& [slot, shape] : r.outputs) {
      auto& s = r.slots[static_cast<size_t>(slot)];
      std::shared_ptr<Buffer> b = s.kind == Replay::Kind::Fresh   ? fresh[static_cast<size_t>(slot)]
                                  : s.kind == Replay::Kind::Fixed ? s.fixed
                                  : s.kind == Replay::Kind::Input ? inputs[s.input].node()->buffer
                                                                  : s.state.lock()->node->buffer;
      outs.push_back(Tensor(frontend::buffer_node(b, shape)));
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
  // a step with symbolic sizes runs as it is recorded each call: its sizes' values are bound per
  // realize, which a replay would not redo
  if (rec.symbolic) return outs;
  std::vector<ImplRef> returned;
  for (auto& t : outs) returned.push_back(t.impl_);
  Step step = analyze(rec, inputs, returned, outs);
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
