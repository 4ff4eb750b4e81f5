// kiln::optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) with PyTorch's defaults and update
// equations, learning-rate schedules and gradient clipping. Updates are lazy and realized together.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::optim {

// Parameters with their own options: optim::SGD({{.params = {w}, .options = {.lr = 0.1}},
//                                                 {.params = {b}, .options = {.lr = 0.01}}})
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options{};
};

// The base of every optimizer. Parameters live in groups; each parameter has a step count and named
// state tensors (moments). step() builds every update lazily from (p, p.grad(), state), assigns
// parameters and state with assign_, and realizes all of them in one kiln::realize call, so the
// update compiles as one schedule (together with a backward that is still pending). Step-dependent
// scalars (lr, bias corrections) enter the graph as 0-d tensors: after the first two steps, a step
// compiles no new kernel.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Computes the new parameters, the gradients and the losses backward() ran from since the last
  // step, in one schedule (reading a loss afterwards runs nothing). Parameters without a gradient
  // are skipped (their step count stays).
  void step();
  void zero_grad();  // drops the gradients of every parameter

  const std::string& name() const { return name_; }  // "SGD", "Adam", ...
  size_t num_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group = 0) const;
  std::vector<Tensor> all_params() const;  // every group's, in order (the index of "state.<i>")
  double lr(size_t group = 0) const;
  void set_lr(double lr);  // every group
  void set_lr(size_t group, double lr);
  int64_t step_count(size_t param_index) const;  // steps taken by parameter i (all_params order)

  // The optimizer's state as a flat map (values are copies, realized):
  //   "state.<i>.step"   0-d i64: steps taken by parameter i (index in all_params())
  //   "state.<i>.<name>" its state tensors: SGD "momentum_buffer"; Adam/AdamW "exp_avg",
  //                      "exp_avg_sq", "max_exp_avg_sq" (amsgrad); RMSprop "square_avg",
  //                      "momentum_buffer" (momentum > 0), "grad_avg" (centered); Adagrad "sum"
  //   "group.<g>.lr"     0-d f64: the current learning rate of group g
  //   "step"             0-d i64: calls of step() so far
  // Parameters that never took a step have only "state.<i>.step" (= 0).
  std::map<std::string, Tensor> state_dict() const;
  // Restores a state_dict() of an optimizer of the same kind over parameters of the same shapes.
  void load_state_dict(const std::map<std::string, Tensor>& sd);

 protected:
  struct Group {
    std::vector<Tensor> params;
    double lr;
  };
  struct ParamState {
    int64_t step = 0;
    std::map<std::string, Tensor> tensors;
  };
  // Collects the lazy updates of one step: targets are assigned, then realized together.
  struct Update {
    std::vector<std::pair<Tensor, Tensor>> assigns;  // (target, new value)
    std::map<std::tuple<double, DType, int>, Tensor> scalars;
    // A 0-d tensor of dtype t holding v on device d (the parameter's), read from a buffer (not a
    // constant baked into the kernel), shared by every parameter of this step.
    Tensor scalar(double v, DType t, Device d);
    void set(const Tensor& target, const Tensor& value) { assigns.emplace_back(target, value); }
    // Sets state tensor `name` of s (created on its first step).
    void set(ParamState& s, const std::string& name, const Tensor& value);
  };

  Optimizer(std::string name, std::vector<Group> groups);
  // t on device d (t itself when it is there), realized: state made from host values goes to the
  // device of the parameters it updates.
  static Tensor on_device(const Tensor& t, Device d);
  // Group g's learning rate as a 0-d f64 tensor on the device of the group's first parameter: one
  // buffer that set_lr writes into, so a step
  // captured by kiln::Jit reads the current rate at every replay (a number would be baked in).
  Tensor lr_tensor(size_t g) const { return lr_tensors_.at(g); }
  int64_t steps_taken() const { return steps_; }  // step() calls so far (the current one excluded)
  void check(bool ok, const std::string& what, double value) const;  // "invalid <what>: <value>"
  // Adds the update of parameter p (index i, group g, state s with s.step already incremented).
  virtual void update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) = 0;
  // State names parameter i of group g carries (for load_state_dict).
  virtual std::vector<std::string> state_names(size_t g) const = 0;
  // A kiln::Jit replayed a step that updated group g: advance host bookkeeping as update() would
  // have (called before the step counts advance).
  virtual void replayed(size_t /*g*/) {}
  // Zero state tensors (state_names) for each parameter that has taken no step, in buffers made
  // now, so that the first step reads and writes the same kind of buffers as every later one (a
  // kiln::Jit then records the same step from its first call). state_dict() leaves them out until
  // the parameter's first step; load_state_dict() makes them again for parameters at step 0.
  void zero_initial_state();

  std::vector<Group> groups_;

 private:
  bool zero_initial_ = false;
  std::string name_;
  std::vector<ParamState> state_;  // one per parameter, all_params() order
  std::vector<Tensor> lr_tensors_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions o = {});
  SGD(std::vector<ParamGroup<SGDOptions>> groups);
  const SGDOptions& options(size_t group = 0) const { return opts_.at(group); }

 private:
  void update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) override;
  std::vector<std::string> state_names(size_t g) const override;
  std::vector<SGDOptions> opts_;
};

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  bool amsgrad = false;
  bool maximize = false;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions o = {});
  Adam(std::vector<ParamGroup<AdamOptions>> groups);
  const AdamOptions& options(size_t group = 0) const { return opts_.at(group); }

 protected:
  Adam(std::string name, std::vector<ParamGroup<AdamOptions>> groups, bool decoupled);

 private:
  void update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) override;
  std::vector<std::string> state_names(size_t g) const override;
  void replayed(size_t g) override;
  std::vector<AdamOptions> opts_;
  bool decoupled_;
  // beta1^t and beta2^t of each group, advanced on the device by every step: bias corrections
  // read from buffers rather than computed on the host, so a captured step stays right
  struct Powers {
    Tensor beta1, beta2;     // after `steps` steps
    Tensor next1, next2;     // this step's (lazy)
    int64_t steps = 0;       // steps the powers have taken
    int64_t last_step = -1;  // steps_taken() when they last advanced
  };
  std::vector<Powers> powers_;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p *= 1 - lr * weight_decay before the Adam update
  bool amsgrad = false;
  bool maximize = false;
};
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions o = {});
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
};

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
};
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions o = {});
  RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups);
  const RMSpropOptions& options(size_t group = 0) const { return opts_.at(group); }

 private:
  void update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) override;
  std::vector<std::string> state_names(size_t g) const override;
  std::vector<RMSpropOptions> opts_;
};

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
};
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions o = {});
  Adagrad(std::vector<ParamGroup<AdagradOptions>> groups);
  const AdagradOptions& options(size_t group = 0) const { return opts_.at(group); }

 private:
  void update(size_t g, const Tensor& p, const Tensor& grad, ParamState& s, Update& u) override;
  std::vector<std::string> state_names(size_t g) const override;
  std::vector<AdagradOptions> opts_;
};

// --- learning-rate schedules (src/optim/scheduler.cpp) ---
// A schedule sets every group's lr from its base lr (the lr when the schedule was made) and the
// epoch count: construction applies epoch 0, each step() advances one epoch, as in PyTorch.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return epoch_; }
  std::vector<double> last_lr() const;  // the lr of every group

 protected:
  explicit LRScheduler(Optimizer& opt);
  void apply();  // call at the end of a derived constructor
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  Optimizer& opt_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

// lr = base * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(double base, int64_t epoch) const override;
  int64_t step_size_;
  double gamma_;
};

// lr = base * (start + (end - start) * min(epoch, total_iters) / total_iters)  (linear warmup)
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 private:
  double lr_at(double base, int64_t epoch) const override;
  double start_, end_;
  int64_t total_;
};

// lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2  (PyTorch's closed form)
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0);

 private:
  double lr_at(double base, int64_t epoch) const override;
  int64_t t_max_;
  double eta_min_;
};

// Linear warmup then cosine decay to min_lr (as in GPT training scripts):
//   epoch < warmup_steps:  base * (epoch + 1) / warmup_steps
//   epoch > total_steps:   min_lr
//   otherwise:             min_lr + (base - min_lr) * (1 + cos(pi * r)) / 2,
//                          r = (epoch - warmup_steps) / (total_steps - warmup_steps)
class CosineWarmupLR : public LRScheduler {
 public:
  CosineWarmupLR(Optimizer& opt, int64_t warmup_steps, int64_t total_steps, double min_lr = 0);
  // Changes the length mid-run (training to a time budget: the total is known once steps are
  // timed); the lr is set for the current epoch, the base lrs kept. Must stay > warmup_steps.
  void set_total_steps(int64_t total_steps);
  int64_t total_steps() const { return total_; }

 private:
  double lr_at(double base, int64_t epoch) const override;
  int64_t warmup_, total_;
  double min_lr_;
};

// --- gradient clipping (src/optim/clip.cpp) ---
// Total norm of the gradients of params (as if concatenated; norm_type may be infinity), returned
// lazily; scales every gradient by min(1, max_norm / (total + 1e-6)) with set_grad, like
// torch.nn.utils.clip_grad_norm_. Parameters without a gradient are ignored.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2);

}  // namespace kiln::optim
