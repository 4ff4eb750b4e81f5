// optim learning-rate schedules: StepLR, LinearLR, CosineAnnealingLR, CosineWarmupLR.
#include <cmath>
#include <numbers>

#include "kiln/optim.h"

namespace kiln::optim {

namespace {
void need(bool ok, const std::string& sched, const std::string& what) {
  if (!ok) throw Error("kiln: optim::" + sched + ": " + what);
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (size_t g = 0; g < opt.num_groups(); g++) base_lrs_.push_back(opt.lr(g));
}

void LRScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); g++) opt_.set_lr(g, lr_at(base_lrs_[g], epoch_));
}

void LRScheduler::step() {
  epoch_++;
  apply();
}

std::vector<double> LRScheduler::last_lr() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < opt_.num_groups(); g++) lrs.push_back(opt_.lr(g));
  return lrs;
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  need(step_size > 0, "StepLR", "step_size must be positive, got " + std::to_string(step_size));
  need(gamma >= 0, "StepLR", "gamma must be >= 0, got " + std::to_string(gamma));
  apply();
}
double StepLR::lr_at(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt), start_(start_factor), end_(end_factor), total_(total_iters) {
  need(start_factor > 0 && start_factor <= 1, "LinearLR",
       "start_factor must be in (0, 1], got " + std::to_string(start_factor));
  need(end_factor >= 0 && end_factor <= 1, "LinearLR",
       "end_factor must be in [0, 1], got " + std::to_string(end_factor));
  need(total_iters > 0, "LinearLR", "total_iters must be positive, got " + std::to_string(total_iters));
  apply();
}
double LinearLR::lr_at(double base, int64_t epoch) const {
  double e = static_cast<double>(std::min(epoch, total_));
  return base * (start_ + (end_ - start_) * e / static_cast<double>(total_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), t_max_(T_max), eta_min_(eta_min) {
  need(T_max > 0, "CosineAnnealingLR", "T_max must be positive, got " + std::to_string(T_max));
  apply();
}
double CosineAnnealingLR::lr_at(double base, int64_t epoch) const {
  return eta_min_ +
         (base - eta_min_) *
             (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

CosineWarmupLR::CosineWarmupLR(Optimizer& opt, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : LRScheduler(opt), warmup_(warmup_steps), total_(total_steps), min_lr_(min_lr) {
  need(warmup_steps >= 0, "CosineWarmupLR", "warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
  need(total_steps > warmup_steps, "CosineWarmupLR",
       "total_steps must be greater than warmup_steps, got total_steps " + std::to_string(total_steps) +
           " and warmup_steps " + std::to_string(warmup_steps));
  need(min_lr >= 0, "CosineWarmupLR", "min_lr must be >= 0, got " + std::to_string(min_lr));
  apply();
}
void CosineWarmupLR::set_total_steps(int64_t total_steps) {
  need(total_steps > warmup_, "CosineWarmupLR",
       "set_total_steps: total_steps must be greater than warmup_steps, got total_steps " +
           std::to_string(total_steps) + " and warmup_steps " + std::to_string(warmup_));
  total_ = total_steps;
  apply();
}

double CosineWarmupLR::lr_at(double base, int64_t epoch) const {
  if (epoch < warmup_) return base * static_cast<double>(epoch + 1) / static_cast<double>(warmup_);
  if (epoch > total_) return min_lr_;
  double r = static_cast<double>(epoch - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (base - min_lr_) * (1 + std::cos(std::numbers::pi * r)) / 2;
}

}  // namespace kiln::optim
