// Training health, the instruments of Cockpit (Schneider et al., 2021) measured while the run
// goes: per parameter its gradient norm, the update's size against the weight, the distance
// from the initialisation and histograms of weights and gradients; per ReLU layer the share of
// units that were never active; the gradient's signal-to-noise ratio across a batch. The
// trainer measures a HealthSample every `every` steps (TrainConfig::health), logs its scalars
// as metrics ("health/fc1.weight/grad_norm") and hands it to FitInputs::health (the editor's
// Health panel).
//
//   ParamHealth h = param_health("fc1.weight", "fc1", before, after, grad, init, 32);
//   h.update_ratio;                 // ||after - before|| / ||before||
//   double snr = mean_gsnr(per_sample_grads);   // Cockpit's MeanGSNR
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls {

struct HealthConfig {
  int64_t every = 0;  // measure every N steps (0: never)
  int bins = 32;      // histogram bins
  // The gradient's signal-to-noise ratio needs one gradient per sample (a batch-1 step for each
  // of the batch's first 32 samples, about 25 ms on the MLP); measured when those samples ×
  // trainable parameters is at most this, and the model has no batch-coupled op (BatchNorm).
  // 0: never.
  int64_t snr_max_work = 64LL << 20;
};

// `bins` equal bins (at least 1) from min to max; a value at max goes in the last bin. All
// finite values equal: all in bin 0. No finite value: min = max = 0 and every count 0.
// NaN and infinities are counted in non_finite only.
struct Histogram {
  double min = 0, max = 0;      // of the finite values
  std::vector<int64_t> counts;  // equal bins from min to max
  int64_t non_finite = 0;
};
Histogram histogram(std::span<const float> values, int bins);

struct ParamHealth {
  std::string param;  // "fc1.weight"
  std::string label;  // its document node, "fc1"
  double grad_norm = 0, weight_norm = 0, update_norm = 0;
  double update_ratio = 0;  // update_norm / weight_norm (0 when the weight is 0)
  // weight_norm is ||before|| (the ratio's base); the norms of non-finite values are NaN/inf.
  double distance_from_init = 0;  // ||after - init||
  Histogram weights, grads;       // weights after the update
};
// All in double; `before`, `after`, `grad` and `init` have the same size.
ParamHealth param_health(std::string param, std::string label, std::span<const float> before,
                         std::span<const float> after, std::span<const float> grad,
                         std::span<const float> init, int bins);

struct UnitHealth {
  std::string label;  // the ReLU's document node
  int64_t units = 0;  // features (dense) or channels (convolution)
  int64_t dead = 0;   // never positive over the window
  double dead_share = 0;
  int64_t window_steps = 0;  // steps the window covered
};

// Cockpit's MeanGSNR: the mean over parameter elements of E[g]^2 / Var[g], over per-sample
// gradients g (each the flat gradient of all trainable parameters). Elements whose variance
// is 0 are left out. Needs at least 2 samples.
// Var is the population variance (divides by the number of samples n), as Cockpit computes
// it (its batch_size * sum_grad_squared - grad^2 is E[g^2] - E[g]^2), so the figures compare
// with Cockpit's; the sample variance (n - 1) would give (n - 1) / n times this. Cockpit adds
// an epsilon to Var instead of leaving elements out; here an element that does not vary (a
// dead unit's weights: Var = 0, and E[g]^2 / 0 is no number) is left out of the mean. In
// double, mean then squared deviations (two passes). Errors (the message says which): fewer
// than 2 samples, empty or differently sized gradients, a non-finite element (sample and
// index named), and no element that varies (all per-sample gradients equal: nothing to
// average, so no SNR rather than a made-up one).
Result<double> mean_gsnr(const std::vector<std::vector<float>>& per_sample_grads);

struct HealthSample {
  int64_t step = 0;  // steps done when measured (after this step's update)
  int64_t epoch = 0;
  double loss = 0;
  std::vector<ParamHealth> params;  // trainable parameters, in order
  std::vector<UnitHealth> relus;
  double grad_snr = -1;  // -1: not measured (see snr_note)
  std::string snr_note;  // why not: "BatchNorm couples the samples", "too large"
};

}  // namespace mls
