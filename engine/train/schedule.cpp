#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "engine/core/check.h"

namespace mls {

namespace {

int64_t epoch_of(int64_t step, int64_t steps_per_epoch) {
  MLS_CHECK(steps_per_epoch >= 1, "Schedule::lr_at: steps_per_epoch must be >= 1");
  return std::max<int64_t>(step, 0) / steps_per_epoch;
}

// PyTorch's _annealing_cos: from start (pct 0) to end (pct 1).
double anneal_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

Error bad(const ScheduleConfig& c, const std::string& what) {
  return make_error("schedule '" + c.type + "': " + what);
}

}  // namespace

double StepSchedule::lr_at(int64_t step, int64_t steps_per_epoch) const {
  int64_t e = epoch_of(step, steps_per_epoch);
  return lr_ * std::pow(gamma_, static_cast<double>(e / step_size_));
}

double ExponentialSchedule::lr_at(int64_t step, int64_t steps_per_epoch) const {
  return lr_ * std::pow(gamma_, static_cast<double>(epoch_of(step, steps_per_epoch)));
}

double CosineSchedule::lr_at(int64_t step, int64_t steps_per_epoch) const {
  int64_t e = std::min(epoch_of(step, steps_per_epoch), total_);
  double pct = static_cast<double>(e) / static_cast<double>(total_);
  return anneal_cos(lr_, eta_min_, pct);
}

double WarmupSchedule::lr_at(int64_t step, int64_t steps_per_epoch) const {
  double lr = inner_->lr_at(step, steps_per_epoch);
  if (step >= warmup_) return lr;
  return lr * static_cast<double>(std::max<int64_t>(step, 0) + 1) / static_cast<double>(warmup_);
}

OneCycleSchedule::OneCycleSchedule(double max_lr, int64_t total_steps, double pct_start,
                                   double div_factor, double final_div_factor)
    : initial_(max_lr / div_factor),
      max_(max_lr),
      final_(max_lr / div_factor / final_div_factor),
      peak_step_(pct_start * static_cast<double>(total_steps) - 1.0),
      last_step_(static_cast<double>(total_steps - 1)) {}

double OneCycleSchedule::lr_at(int64_t step, int64_t) const {
  double s = std::clamp(static_cast<double>(step), 0.0, last_step_);
  if (s <= peak_step_) return anneal_cos(initial_, max_, s / peak_step_);
  return anneal_cos(max_, final_, (s - peak_step_) / (last_step_ - peak_step_));
}

PlateauSchedule::PlateauSchedule(double lr, bool maximize, double factor, int64_t patience,
                                 double threshold, double min_lr)
    : lr_(lr),
      maximize_(maximize),
      factor_(factor),
      patience_(patience),
      threshold_(threshold),
      min_lr_(min_lr),
      best_(maximize ? -std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::infinity()) {}

void PlateauSchedule::on_metric(double metric) {
  bool better =
      maximize_ ? metric > best_ * (1.0 + threshold_) : metric < best_ * (1.0 - threshold_);
  if (better) {
    best_ = metric;
    bad_epochs_ = 0;
  } else {
    ++bad_epochs_;
  }
  if (bad_epochs_ > patience_) {
    double next = std::max(lr_ * factor_, min_lr_);
    if (lr_ - next > 1e-8) lr_ = next;  // PyTorch ignores changes below its eps of 1e-8
    bad_epochs_ = 0;
  }
}

void PlateauSchedule::set_state(const std::vector<double>& s) {
  if (s.size() != 3) return;  // not a plateau schedule's state: keep the fresh one
  lr_ = s[0];
  best_ = s[1];
  bad_epochs_ = static_cast<int64_t>(s[2]);
}

Result<std::unique_ptr<Schedule>> make_schedule(const ScheduleConfig& c) {
  if (!(c.lr >= 0)) return bad(c, "lr must be >= 0, got " + std::to_string(c.lr));
  if (c.warmup_steps < 0)
    return bad(c, "warmup_steps must be >= 0, got " + std::to_string(c.warmup_steps));
  std::unique_ptr<Schedule> s;
  if (c.type == "constant") {
    s = std::make_unique<ConstantSchedule>(c.lr);
  } else if (c.type == "step") {
    if (c.step_size < 1)
      return bad(c, "step_size must be >= 1, got " + std::to_string(c.step_size));
    if (!(c.gamma > 0)) return bad(c, "gamma must be > 0, got " + std::to_string(c.gamma));
    s = std::make_unique<StepSchedule>(c.lr, c.step_size, c.gamma);
  } else if (c.type == "exponential") {
    if (!(c.gamma > 0)) return bad(c, "gamma must be > 0, got " + std::to_string(c.gamma));
    s = std::make_unique<ExponentialSchedule>(c.lr, c.gamma);
  } else if (c.type == "cosine") {
    if (c.total_epochs < 1)
      return bad(c, "total_epochs must be >= 1, got " + std::to_string(c.total_epochs));
    if (c.eta_min < 0 || c.eta_min > c.lr) return bad(c, "eta_min must be in [0, lr]");
    s = std::make_unique<CosineSchedule>(c.lr, c.total_epochs, c.eta_min);
  } else if (c.type == "one_cycle") {
    if (!(c.max_lr > 0)) return bad(c, "max_lr must be > 0, got " + std::to_string(c.max_lr));
    if (c.total_steps < 2)
      return bad(c, "total_steps must be >= 2, got " + std::to_string(c.total_steps));
    double peak = c.pct_start * static_cast<double>(c.total_steps) - 1.0;
    if (!(c.pct_start > 0 && c.pct_start < 1) || !(peak > 0) ||
        !(peak < static_cast<double>(c.total_steps - 1)))
      return bad(c, "pct_start must be in (0, 1) and leave both phases at least one step (got " +
                        std::to_string(c.pct_start) + " of " + std::to_string(c.total_steps) +
                        " steps)");
    if (!(c.div_factor > 0) || !(c.final_div_factor > 0))
      return bad(c, "div_factor and final_div_factor must be > 0");
    s = std::make_unique<OneCycleSchedule>(c.max_lr, c.total_steps, c.pct_start, c.div_factor,
                                           c.final_div_factor);
  } else if (c.type == "plateau") {
    if (c.mode != "min" && c.mode != "max")
      return bad(c, "mode must be 'min' or 'max', got '" + c.mode + "'");
    if (!(c.factor > 0 && c.factor < 1))
      return bad(c, "factor must be in (0, 1), got " + std::to_string(c.factor));
    if (c.patience < 0) return bad(c, "patience must be >= 0, got " + std::to_string(c.patience));
    if (c.threshold < 0) return bad(c, "threshold must be >= 0");
    if (c.min_lr < 0) return bad(c, "min_lr must be >= 0");
    s = std::make_unique<PlateauSchedule>(c.lr, c.mode == "max", c.factor, c.patience, c.threshold,
                                          c.min_lr);
  } else {
    return make_error("schedule: unknown type '" + c.type +
                      "' (use constant, step, exponential, cosine, one_cycle or plateau)");
  }
  if (c.warmup_steps > 0) s = std::make_unique<WarmupSchedule>(std::move(s), c.warmup_steps);
  return s;
}

}  // namespace mls
