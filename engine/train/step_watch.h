// The breakpoints' watch over the steps of a run (engine/train/breakpoints.h): the running
// median of the loss, the per-unit activity of each ReLU over a window, the steps a gradient
// has stayed tiny. The trainer hands it each step's facts before the update; a BreakHit back
// means "stop here" (its message is completed by the trainer, which can re-run the step).
//
//   StepWatch w(breaks, {"fc1.weight", "fc1.bias"}, {"fc1", "fc1"}, {{"relu1", 128}});
//   StepFacts f{.step = 12, .loss = 0.4, .grad_sq = sq, .activity = &act};
//   if (auto hit = w.check(f)) stop(*hit);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/train/breakpoints.h"
#include "engine/train/health.h"

namespace mls {

struct StepFacts {
  int64_t step = 0, epoch = 0, batch = 0;
  double loss = 0;
  // Per trainable parameter, its gradient's sum of squares (the sum alone when only the nan
  // breakpoint is armed: finite exactly when the gradient is); empty: not measured.
  std::span<const float> grad_sq;
  // Mixed precision with a dynamic loss scale: a non-finite gradient is the scaler's business
  // (the step is skipped and the scale halved), not a fault.
  bool scaled_gradients = false;
  // Per ReLU layer, its units' maxima over the batch (null: not read this step).
  const std::vector<std::vector<float>>* activity = nullptr;
};

class StepWatch {
 public:
  struct Units {
    std::string label;
    int64_t units = 0;
  };
  StepWatch(Breakpoints b, std::vector<std::string> param_names, std::vector<std::string> labels,
            std::vector<Units> relus);

  // Updates the windows with this step and says whether a breakpoint fires. The message is
  // filled for every kind but NonFinite (the trainer names the node after a re-run).
  std::optional<BreakHit> check(const StepFacts& f);
  // The health instruments' dead-unit shares since the last call (each ReLU's units never
  // positive over the steps in between), then a fresh window.
  std::vector<UnitHealth> take_unit_health();

  const Breakpoints& breakpoints() const { return b_; }

 private:
  struct Window {
    std::vector<std::vector<uint8_t>> active;  // per ReLU layer, per unit: positive at least once
    int64_t steps = 0;
    void add(const std::vector<std::vector<float>>& a);
    void reset();
  };
  Breakpoints b_;
  std::vector<std::string> names_, labels_;
  std::vector<Units> relus_;
  std::vector<double> losses_;  // the last `window` finite losses, oldest first
  std::vector<int64_t> low_steps_;  // per parameter: steps in a row below grad_norm_min
  Window dead_, health_;
};

}  // namespace mls
