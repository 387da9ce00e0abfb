// The trainer's debugger and health instruments: what a step does, before its update, when
// breakpoints are armed (engine/train/breakpoints.h), and the health sample after it
// (engine/train/health.h). The step itself is in trainer.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/train/fault_finder.h"
#include "engine/train/step_watch.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_step_plan.h"

namespace mls {

namespace {

// A parameter's document node: "fc1" of "fc1.weight" (parameters are named node.role).
std::string node_of(const std::string& param) {
  const size_t dot = param.rfind('.');
  return dot == std::string::npos ? param : param.substr(0, dot);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::optional<BreakHit> Trainer::take_break() {
  auto b = std::move(pending_break_);
  pending_break_.reset();
  return b;
}

void Trainer::make_watch(const StepPlan& sp) {
  std::vector<std::string> names, labels;
  for (size_t i : trainable_) {
    names.push_back(param_names_[i]);
    labels.push_back(node_of(param_names_[i]));
  }
  std::vector<StepWatch::Units> relus;
  for (const UnitOutput& u : sp.activity) relus.push_back({u.label, u.units});
  watch_ = std::make_unique<StepWatch>(config_.breaks, std::move(names), std::move(labels),
                                       std::move(relus));
}

bool Trainer::breaks_here(double loss, std::span<const float> grad_sq,
                          const std::vector<std::vector<float>>* activity, const HostBatch& batch) {
  StepFacts f;
  f.step = step_ + 1;  // numbered as the curves number it: the loss of step N is logged at N
  f.epoch = cur_epoch_;
  f.batch = cur_batch_;
  f.loss = loss;
  f.grad_sq = grad_sq;
  f.scaled_gradients = scaler_.dynamic();
  f.activity = activity;
  std::optional<BreakHit> hit = watch_->check(f);
  if (!hit || !config_.breaks.any()) return false;
  if (hit->kind == BreakHit::Kind::NonFinite) {
    // The step again, op by op, every value kept, from the parameters it started from (the
    // update has not run): the first value that is not finite names the node.
    FaultQuery q{.backend = &backend_,
                 .build = &build_,
                 .params = params_,
                 .batch = &batch,
                 .step_seed = step_seed(),
                 .precision = config_.precision};
    auto fault = find_first_fault(q);
    const std::string at = "step " + std::to_string(step_ + 1) + " (epoch " +
                           std::to_string(cur_epoch_) + ", batch " + std::to_string(cur_batch_) + ")";
    if (fault && *fault) {
      hit->fault = **fault;
      hit->label = (*fault)->label;
      hit->message = describe_fault(**fault, step_ + 1);
    } else {
      // Every value was finite when re-run one op at a time: the fused step's reduction
      // overflowed (a gradient norm past 1.8e19) or a fused kernel differs.
      std::string worst;
      double top = -1;
      for (size_t i = 0; i < grad_sq.size() && i < trainable_.size(); ++i)
        if (!std::isfinite(grad_sq[i]) || grad_sq[i] > top) {
          top = std::isfinite(grad_sq[i]) ? grad_sq[i] : HUGE_VAL;
          worst = param_names_[trainable_[i]];
        }
      hit->label = worst.empty() ? "" : node_of(worst);
      hit->message = "non-finite value at " + at + ": the loss is " + num(loss) +
                     (worst.empty() ? "" : ", and the gradient of " + worst + " overflows") +
                     (fault ? "; re-run op by op, every value of the step is finite (the "
                              "gradient's norm is beyond f32's range)"
                            : "; the re-run to find the node failed: " + fault.error().message);
    }
  }
  pending_break_ = std::move(hit);
  return true;
}

bool Trainer::health_due() const {
  return config_.health.every > 0 && config_.mode == ExecMode::Static &&
         (step_ + 1) % config_.health.every == 0;
}

std::vector<std::vector<float>> Trainer::trainable_to_host() const {
  std::vector<std::vector<float>> out;
  for (size_t i : trainable_) out.push_back(params_[i].to_f32());
  return out;
}

void Trainer::measure_health(const std::vector<std::vector<float>>& before,
                             const std::vector<std::vector<float>>& grads, double loss,
                             const HostBatch& batch) {
  HealthSample h;
  h.step = step_;
  h.epoch = cur_epoch_;
  h.loss = loss;
  const int bins = config_.health.bins;
  for (size_t k = 0; k < trainable_.size() && k < grads.size(); ++k) {
    const std::string& name = param_names_[trainable_[k]];
    const std::vector<float> after = params_[trainable_[k]].to_f32();
    const std::vector<float>& init = k < init_host_.size() ? init_host_[k] : before[k];
    h.params.push_back(param_health(name, node_of(name), before[k], after, grads[k], init, bins));
  }
  if (watch_) h.relus = watch_->take_unit_health();
  // The signal-to-noise ratio needs a gradient per sample: only where that is affordable
  // and the samples are independent (BatchNorm mixes them).
  int64_t n_params = 0;
  for (const auto& g : grads) n_params += static_cast<int64_t>(g.size());
  if (snr_note_.empty()) {
    auto mg = build_(1, true);
    if (!mg)
      snr_note_ = mg.error().message;
    else
      for (const Node& n : mg->graph.nodes())
        if (n.op->name.find("batch_norm") != std::string::npos) snr_note_ = "BatchNorm couples the samples of a batch";
    if (snr_note_.empty()) snr_note_ = "-";  // checked: measurable
  }
  const int64_t samples = std::min<int64_t>(batch.size, 32);
  if (snr_note_ != "-") {
    h.snr_note = snr_note_;
  } else if (config_.health.snr_max_work <= 0) {
    h.snr_note = "the gradient SNR is off (HealthConfig::snr_max_work = 0)";
  } else if (samples * n_params > config_.health.snr_max_work) {
    h.snr_note = "the model is too large for per-sample gradients (" + std::to_string(n_params) +
                 " parameters)";
  } else if (auto per = per_sample_gradients(batch, samples); !per) {
    h.snr_note = per.error().message;
  } else if (auto snr = mean_gsnr(*per); !snr) {
    h.snr_note = snr.error().message;
  } else {
    h.grad_snr = *snr;
  }
  if (fit_in_ && fit_in_->sink) {
    MetricSink& s = *fit_in_->sink;
    for (const ParamHealth& p : h.params) {
      s.log_metric("health/" + p.param + "/grad_norm", step_, p.grad_norm);
      s.log_metric("health/" + p.param + "/update_ratio", step_, p.update_ratio);
      s.log_metric("health/" + p.param + "/distance_from_init", step_, p.distance_from_init);
    }
    for (const UnitHealth& u : h.relus) s.log_metric("health/" + u.label + "/dead_share", step_, u.dead_share);
    if (h.grad_snr >= 0) s.log_metric("health/grad_snr", step_, h.grad_snr);
  }
  if (fit_in_ && fit_in_->health) fit_in_->health(h);
  last_health_ = std::move(h);
}

Result<std::vector<std::vector<float>>> Trainer::per_sample_gradients(const HostBatch& batch,
                                                                      int64_t max_samples) {
  auto p = plan_for(1, true);
  if (!p) return p.error();
  StepPlan& sp = **p;
  const int64_t n = std::min(batch.size, max_samples);
  const size_t xs = batch.size > 0 ? batch.x.size() / static_cast<size_t>(batch.size) : 0;
  const size_t ts = batch.size > 0 ? batch.t.size() / static_cast<size_t>(batch.size) : 0;
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    sp.x.fill_raw(batch.x.data() + at * xs, xs * sizeof(float));
    if (sp.y.dtype() == DType::I64)
      sp.y.fill_raw(batch.y.data() + at, sizeof(int64_t));
    else
      sp.y.fill_raw(batch.t.data() + at * ts, ts * sizeof(float));
    if (sp.seed.defined()) {
      const int64_t seed = step_seed();
      sp.seed.fill_raw(&seed, sizeof seed);
    }
    if (sp.scale.defined()) {
      const float one = 1;
      sp.scale.fill_raw(&one, sizeof one);
    }
    sp.plan->run();
    std::vector<float> flat;
    for (const Tensor& g : sp.grads) {
      std::vector<float> v = g.to_f32();
      flat.insert(flat.end(), v.begin(), v.end());
    }
    out.push_back(std::move(flat));
  }
  return out;
}

}  // namespace mls
