// Learning-rate schedules, with PyTorch's formulas. A schedule maps the global optimizer
// step (0-based: the number of steps already taken) to a learning rate; epoch-based ones
// use epoch = step / steps_per_epoch, as a PyTorch scheduler stepped once per epoch.
//
//   auto s = make_schedule({.type = "cosine", .lr = 0.1, .total_epochs = 30, .warmup_steps = 500});
//   if (!s) return s.error();
//   opt.set_lr((*s)->lr_at(opt.steps(), steps_per_epoch));  // before each step
//   (*s)->on_metric(val_loss);                                // once per epoch (plateau)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls {

struct ScheduleConfig {
  // "constant", "step", "exponential", "cosine", "one_cycle", "plateau".
  std::string type = "constant";
  double lr = 0.01;  // the base rate (one_cycle uses max_lr instead)
  // step: lr gamma^(epoch / step_size); exponential: lr gamma^epoch.
  int64_t step_size = 1;
  double gamma = 0.1;
  // cosine: from lr down to eta_min over total_epochs, then eta_min.
  int64_t total_epochs = 1;
  double eta_min = 0.0;
  // one_cycle (PyTorch's OneCycleLR, anneal_strategy='cos', no momentum cycling).
  double max_lr = 0.1;
  int64_t total_steps = 0;
  double pct_start = 0.3, div_factor = 25.0, final_div_factor = 1e4;
  // plateau (ReduceLROnPlateau, threshold_mode 'rel', cooldown 0).
  std::string mode = "min";  // or "max"
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  double min_lr = 0.0;
  // Any type: a linear warm-up over this many steps first (0: none).
  int64_t warmup_steps = 0;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr_at(int64_t step, int64_t steps_per_epoch) const = 0;
  // A validation metric at the end of an epoch; only plateau listens.
  virtual void on_metric(double) {}
  // What a checkpoint must keep for an exact resume (only plateau has any).
  virtual std::vector<double> state() const { return {}; }
  virtual void set_state(const std::vector<double>&) {}
};

class ConstantSchedule final : public Schedule {
 public:
  explicit ConstantSchedule(double lr) : lr_(lr) {}
  double lr_at(int64_t, int64_t) const override { return lr_; }

 private:
  double lr_;
};

// StepLR: lr gamma^floor(epoch / step_size).
class StepSchedule final : public Schedule {
 public:
  StepSchedule(double lr, int64_t step_size, double gamma)
      : lr_(lr), step_size_(step_size), gamma_(gamma) {}
  double lr_at(int64_t step, int64_t steps_per_epoch) const override;

 private:
  double lr_;
  int64_t step_size_;
  double gamma_;
};

// ExponentialLR: lr gamma^epoch.
class ExponentialSchedule final : public Schedule {
 public:
  ExponentialSchedule(double lr, double gamma) : lr_(lr), gamma_(gamma) {}
  double lr_at(int64_t step, int64_t steps_per_epoch) const override;

 private:
  double lr_, gamma_;
};

// CosineAnnealingLR's closed form: eta_min + (lr - eta_min)(1 + cos(pi epoch / T)) / 2,
// held at eta_min after T epochs (PyTorch would climb again).
class CosineSchedule final : public Schedule {
 public:
  CosineSchedule(double lr, int64_t total_epochs, double eta_min)
      : lr_(lr), total_(total_epochs), eta_min_(eta_min) {}
  double lr_at(int64_t step, int64_t steps_per_epoch) const override;

 private:
  double lr_;
  int64_t total_;
  double eta_min_;
};

// Linear warm-up of another schedule: at step s < warmup the rate is
// inner(s) (s + 1) / warmup, so the first step gets inner / warmup (not 0) and step
// warmup - 1 the full rate; afterwards inner(s). The inner schedule sees the global step.
class WarmupSchedule final : public Schedule {
 public:
  WarmupSchedule(std::unique_ptr<Schedule> inner, int64_t warmup_steps)
      : inner_(std::move(inner)), warmup_(warmup_steps) {}
  double lr_at(int64_t step, int64_t steps_per_epoch) const override;
  void on_metric(double m) override { inner_->on_metric(m); }
  std::vector<double> state() const override { return inner_->state(); }
  void set_state(const std::vector<double>& s) override { inner_->set_state(s); }

 private:
  std::unique_ptr<Schedule> inner_;
  int64_t warmup_;
};

// OneCycleLR (two phases, cos): max_lr / div_factor rises to max_lr at step
// pct_start total - 1, then falls to max_lr / (div_factor final_div_factor) at step
// total - 1; later steps keep the final rate (PyTorch raises instead).
class OneCycleSchedule final : public Schedule {
 public:
  OneCycleSchedule(double max_lr, int64_t total_steps, double pct_start, double div_factor,
                   double final_div_factor);
  double lr_at(int64_t step, int64_t steps_per_epoch) const override;

 private:
  double initial_, max_, final_;
  double peak_step_, last_step_;
};

// ReduceLROnPlateau: after more than `patience` epochs without a relative improvement of
// `threshold` over the best metric, lr *= factor (not below min_lr) and the count restarts.
class PlateauSchedule final : public Schedule {
 public:
  PlateauSchedule(double lr, bool maximize, double factor, int64_t patience, double threshold,
                  double min_lr);
  double lr_at(int64_t, int64_t) const override { return lr_; }
  void on_metric(double metric) override;
  std::vector<double> state() const override { return {lr_, best_, static_cast<double>(bad_epochs_)}; }
  void set_state(const std::vector<double>& s) override;

 private:
  double lr_;
  bool maximize_;
  double factor_;
  int64_t patience_;
  double threshold_, min_lr_;
  double best_;
  int64_t bad_epochs_ = 0;
};

Result<std::unique_ptr<Schedule>> make_schedule(const ScheduleConfig& config);

}  // namespace mls
