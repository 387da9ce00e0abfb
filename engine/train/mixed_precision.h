// Mixed precision training: the one switch (Precision), dynamic loss scaling, and the
// graph plumbing the trainer uses for both.
//
//   TrainConfig c{.precision = Precision::BF16};      // matmuls in bf16, f32 master weights
//   LossScaler s(Precision::F16, {});                 // scale 65536, doubled every 2000 good steps
//   if (s.update(std::isfinite(check))) opt.step(params, grads);   // else skipped, scale halved
//
// With BF16 or F16 the model's graph is autocast (engine/passes/passes.h) before autodiff:
// products run in the low precision with f32 results; parameters, their gradients and
// everything else stay f32. The loss is multiplied by a scale S before the backward pass
// and the gradients divided by S after it, so that small gradients survive f16's range; a
// step whose gradients hold an inf or NaN is skipped (parameters and optimizer state left
// exactly as they were) and S halved; after `growth_interval` good steps in a row S is
// doubled. bf16 has f32's exponent range, so by default it is not scaled at all (S stays 1
// and costs nothing: no multiply, no divide); non-finite steps are still skipped. Giving
// LossScaleConfig::init turns the dynamic scale on for bf16 too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/core/result.h"
#include "engine/ir/emitter.h"
#include "engine/train/model_graph.h"

namespace mls {

enum class Precision : uint8_t { F32, BF16, F16 };

std::string_view precision_name(Precision p);  // "f32", "bf16", "f16"
std::optional<Precision> parse_precision(std::string_view name);
DType compute_dtype(Precision p);  // of the matrix products

struct LossScaleConfig {
  // > 0: dynamic scaling from this scale. 0: the precision's default, 65536 (dynamic) for
  // f16; for bf16 a fixed scale of 1 (no scaling).
  double init = 0.0;
  int64_t growth_interval = 2000;  // good steps in a row before the scale doubles (0: never)
};

class LossScaler {
 public:
  LossScaler(Precision p, LossScaleConfig c);
  // BF16 and F16: gradients are checked and non-finite steps skipped.
  bool active() const { return active_; }
  // The loss is multiplied by a scale that changes (F16, or BF16 given an initial scale).
  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int64_t skipped() const { return skipped_; }
  int64_t good_steps() const { return good_; }  // since the last change of scale
  // After a step's gradients: true when they were all finite (apply the step). Otherwise
  // the step is counted as skipped and a dynamic scale halved.
  bool update(bool finite);
  // From a checkpoint.
  void restore(double scale, int64_t good_steps, int64_t skipped);

 private:
  bool active_, dynamic_;
  double scale_;
  int64_t growth_interval_;
  int64_t good_ = 0, skipped_ = 0;
};

// Rewrites the model's graph to compute its products in `p` (autocast; F32 leaves it
// alone) and moves the handles (input, labels, loss, logits, step seed) to the new graph.
void autocast_model(ModelGraph& mg, Precision p);

// Gradients of loss * scale divided by scale (`scale` an f32 [] value; invalid: not
// scaled, returned as they are), and `check`: the sum of all of them, which is finite
// exactly when every gradient is (bar an overflow of the sum itself, which is as good a
// reason to skip). Written against the Emitter, so the static plan and the eager step
// build the same thing.
Refs unscale_gradients(Emitter& e, std::span<const Ref> scaled_grads, Ref scale, Ref* check);

}  // namespace mls
