// kiln::Jit: captures a function of tensors (a training step, say) and replays its kernels with
// new inputs, with no graph building, scheduling or compiling: kiln's TinyJit / torch.compile.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

struct JitOptions {
  // Calls whose recordings may differ from the call before, before capture gives up with an error.
  int max_unstable_calls = 4;
};

// auto step = kiln::Jit([&](const std::vector<Tensor>& in) {
//   Tensor loss = F::cross_entropy(model(in[0]), in[1]);
//   opt.zero_grad(); loss.backward(); opt.step();
//   return std::vector<Tensor>{loss};
// });
// for (...) float l = step({x, y})[0].item<float>();
//
// How it works, like tinygrad's TinyJit: each call runs the function normally while recording the
// kernels the realize driver launches and the buffers they touch. When a call records the same
// step as the call before (the same kernels, constants included, on buffers of the same roles:
// usually call 2), that recording is the captured step, and every later call replays it: the
// launches run with the new inputs' buffers bound into the input slots.
//
// Buffers of the step, and what a replay does with each:
//   input      the i-th input's buffer at this call (shape and dtype are checked: a kiln::Error
//              names the input, the captured and the given shape/dtype)
//   state      a tensor the step updates with assign_ (parameters, optimizer moments): read from
//              the tensor now; its new value goes to a new buffer that the tensor is then bound
//              to, exactly as the eager step's assign_ + realize does
//   results    tensors realized by the step that outlive it (gradients) and the returned tensors:
//              new buffers each replay; returned tensors are new handles, earlier results keep
//              their values
//   constants  any other tensor the step reads (data captured by the lambda, a learning rate kept
//              in a tensor): the replay reads the same buffer, so its current contents
//   baked      values made on the host during the call (tensor({..}), from_buffer) and constants
//              in the graph (x * 0.1): replayed as captured
//   scratch    everything else (intermediates; the memory plan's arena): memory of the Jit's own
//
// Symbolic sizes (kiln::Var, Tensor::symbolic): inputs whose dims are marked symbolic may change
// those dims from call to call. The replay binds the variables from the inputs' shapes, writes each
// kernel's sizes again and hands out results of the new shapes; the step's buffers are allocated for
// the variables' largest values at capture. A step whose sizes a replay could not bind (a variable
// no input's shape gives, a symbolic kernel that a runner with fixed sizes runs) is not captured: it
// runs as it records at every call (KILN_DEBUG=1 says why).
//
// Values baked at capture must not change between calls. A value that changes at every call (a
// learning rate passed as a double, a step count turned into a tensor on the host) makes the
// recordings differ, so capture keeps running the function normally and, after
// max_unstable_calls, throws a kiln::Error naming the first kernel or value that differs. A value
// that changes only after capture cannot be seen: keep such values in tensors (kiln::optim keeps
// each group's learning rate and Adam's bias corrections in buffers, so set_lr and LR schedules
// reach replays) or pass them as inputs. Host-side effects of the function (printing, say) happen
// only on the calls that run it, unless the function registers them with on_jit_replay (kiln::optim
// does for its step counts, so state_dict() after replays is what the eager steps would give).
//
// On CUDA a replay runs as one CUDA graph, captured for the buffers the replay binds and updated in
// place when they change (KILN_CUDA_GRAPH=0: each kernel is launched; docs/architecture.md). They
// rarely change: each call's inputs are copied into the step's own buffers, and results reuse
// buffers nothing holds any more, so a training step records its graph on its first replays.
// Inside a function that a kiln::Jit is recording, registers `effect` (host bookkeeping the call has
// just done itself, such as a step counter) to run again at every replay of the step captured from
// this call. Outside a recording it does nothing.
void on_jit_replay(std::function<void()> effect);

class Jit {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  explicit Jit(Fn fn, JitOptions options = {});
  ~Jit();
  Jit(Jit&&) noexcept;
  Jit& operator=(Jit&&) noexcept;

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  bool captured() const;
  size_t calls() const;
  size_t num_launches() const;  // kernels per replay (0 before capture)
  void reset();                 // forget the capture: the next calls record again

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln
