#include "engine/train/step_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mls {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string where(const BreakHit& h) {
  return "step " + std::to_string(h.step) + " (epoch " + std::to_string(h.epoch) + ", batch " +
         std::to_string(h.batch) + ")";
}

}  // namespace

void StepWatch::Window::add(const std::vector<std::vector<float>>& a) {
  if (active.size() != a.size()) {
    active.assign(a.size(), {});
    steps = 0;
  }
  for (size_t l = 0; l < a.size(); ++l) {
    if (active[l].size() != a[l].size()) active[l].assign(a[l].size(), 0);
    for (size_t u = 0; u < a[l].size(); ++u) active[l][u] |= a[l][u] > 0;
  }
  ++steps;
}

void StepWatch::Window::reset() {
  for (auto& v : active) std::fill(v.begin(), v.end(), 0);
  steps = 0;
}

StepWatch::StepWatch(Breakpoints b, std::vector<std::string> param_names,
                     std::vector<std::string> labels, std::vector<Units> relus)
    : b_(b), names_(std::move(param_names)), labels_(std::move(labels)), relus_(std::move(relus)) {
  low_steps_.assign(names_.size(), 0);
}

std::optional<BreakHit> StepWatch::check(const StepFacts& f) {
  BreakHit h;
  h.step = f.step;
  h.epoch = f.epoch;
  h.batch = f.batch;
  h.loss = f.loss;
  if (f.activity) {
    dead_.add(*f.activity);
    health_.add(*f.activity);
  }
  // NaN or Inf: the loss, or a gradient (its sum of squares is finite exactly when it is).
  if (b_.nan) {
    bool bad = !std::isfinite(f.loss);
    if (!f.scaled_gradients)
      for (float s : f.grad_sq) bad = bad || !std::isfinite(s);
    if (bad) {
      h.kind = BreakHit::Kind::NonFinite;
      h.observed = f.loss;
      return h;
    }
  }
  const size_t window = static_cast<size_t>(b_.window);
  if (b_.spike > 0 && std::isfinite(f.loss)) {
    // A median needs some history: the first steps of a run move fast.
    if (losses_.size() >= std::min<size_t>(window, 10)) {
      std::vector<double> sorted = losses_;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
      const double median = sorted[sorted.size() / 2];
      if (median > 0 && f.loss > b_.spike * median) {
        h.kind = BreakHit::Kind::Spike;
        h.threshold = b_.spike * median;
        h.observed = f.loss;
        h.message = "loss spike at " + where(h) + ": the loss is " + num(f.loss) + ", " +
                    num(f.loss / median) + "x the median " + num(median) + " of the last " +
                    std::to_string(losses_.size()) + " steps (the breakpoint is spike:" +
                    num(b_.spike) + ")";
        return h;
      }
    }
    losses_.push_back(f.loss);
    if (losses_.size() > window) losses_.erase(losses_.begin());
  }
  const bool norms = b_.grad_norm_max > 0 || b_.grad_norm_min > 0;
  for (size_t i = 0; norms && i < f.grad_sq.size() && i < names_.size(); ++i) {
    const double norm = std::sqrt(static_cast<double>(f.grad_sq[i]));
    if (!std::isfinite(norm)) continue;  // the nan breakpoint's business
    const std::string who = names_[i] + (labels_[i].empty() ? "" : " (node " + labels_[i] + ")");
    if (b_.grad_norm_max > 0 && norm > b_.grad_norm_max) {
      h.kind = BreakHit::Kind::GradNormHigh;
      h.label = labels_[i].empty() ? names_[i] : labels_[i];
      h.threshold = b_.grad_norm_max;
      h.observed = norm;
      h.message = "exploding gradient at " + where(h) + ": the gradient norm of " + who + " is " +
                  num(norm) + ", above " + num(b_.grad_norm_max) + " (loss " + num(f.loss) + ")";
      return h;
    }
    if (b_.grad_norm_min > 0) {
      low_steps_[i] = norm < b_.grad_norm_min ? low_steps_[i] + 1 : 0;
      if (low_steps_[i] >= b_.window) {
        h.kind = BreakHit::Kind::GradNormLow;
        h.label = labels_[i].empty() ? names_[i] : labels_[i];
        h.threshold = b_.grad_norm_min;
        h.observed = norm;
        h.message = "vanishing gradient at " + where(h) + ": the gradient norm of " + who +
                    " has stayed below " + num(b_.grad_norm_min) + " for " +
                    std::to_string(low_steps_[i]) + " steps (now " + num(norm) + ")";
        return h;
      }
    }
  }
  if (b_.dead_relu > 0 && dead_.steps >= b_.window) {
    for (size_t l = 0; l < dead_.active.size() && l < relus_.size(); ++l) {
      const auto& a = dead_.active[l];
      if (a.empty()) continue;
      const auto dead = static_cast<int64_t>(std::count(a.begin(), a.end(), uint8_t{0}));
      const double share = static_cast<double>(dead) / static_cast<double>(a.size());
      if (share >= b_.dead_relu) {
        h.kind = BreakHit::Kind::DeadRelu;
        h.label = relus_[l].label;
        h.threshold = b_.dead_relu;
        h.observed = share;
        h.message = "dead ReLUs at " + where(h) + ": " + std::to_string(dead) + " of the " +
                    std::to_string(a.size()) + " units of " + relus_[l].label +
                    " were never active over the last " + std::to_string(dead_.steps) +
                    " steps (" + num(100 * share) + "%, the breakpoint is dead-relu:" +
                    num(b_.dead_relu) + ")";
        return h;
      }
    }
    dead_.reset();
  }
  return std::nullopt;
}

std::vector<UnitHealth> StepWatch::take_unit_health() {
  std::vector<UnitHealth> out;
  for (size_t l = 0; l < health_.active.size() && l < relus_.size(); ++l) {
    const auto& a = health_.active[l];
    UnitHealth u;
    u.label = relus_[l].label;
    u.units = static_cast<int64_t>(a.size());
    u.dead = static_cast<int64_t>(std::count(a.begin(), a.end(), uint8_t{0}));
    u.dead_share = a.empty() ? 0 : static_cast<double>(u.dead) / static_cast<double>(a.size());
    u.window_steps = health_.steps;
    out.push_back(std::move(u));
  }
  health_.reset();
  return out;
}

}  // namespace mls
