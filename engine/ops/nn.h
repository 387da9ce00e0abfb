// Builders for softmax, normalisation, dropout, embedding and the losses. Each either emits
// one op of engine/ops/norm_ops.cpp or is a composite of existing ops (every backend and
// every derivative for free).
//
//   BatchNormOut bn = batch_norm_train(e, x, gamma, beta);      // x [N, C, ...]
//   Ref h = dropout(e, relu(e, bn.y), 0.3, /*layer seed*/ 7, step_seed, true);
//   Ref loss = bce_with_logits(e, linear(e, h, w, b), targets);  // mean over all elements
//   // running statistics, in place in the same step (ema_update is an Update op):
//   ema_update(e, running_mean, bn.mean, 0.1);
#pragma once

#include <cstdint>

#include "engine/ir/emitter.h"

namespace mls {

inline constexpr double kNormEps = 1e-5;  // the default eps of batch_norm and layer_norm

Ref softmax(Emitter& e, Ref x, int64_t axis);

// 1 / sqrt(var + eps), written as exp(-log(var + eps) / 2) so that it needs no sqrt op and
// differentiates like any composite.
Ref inv_std(Emitter& e, Ref var, double eps);

// Training-mode batch normalisation over every axis but 1: y = gamma (x - mean) / sqrt(var
// + eps) + beta, with mean [C] and the biased var [C] of the batch (the ones that normalise).
struct BatchNormOut {
  Ref y, mean, var;
};
BatchNormOut batch_norm_train(Emitter& e, Ref x, Ref gamma, Ref beta, double eps = kNormEps);
// Evaluation mode: the running statistics normalise. A composite (x - rm) * a + beta with
// a = gamma / sqrt(rv + eps) computed per channel.
Ref batch_norm_eval(Emitter& e, Ref x, Ref gamma, Ref beta, Ref running_mean, Ref running_var,
                    double eps = kNormEps);
// M, the number of elements per channel that the batch statistics average over (N times
// the spatial size), and M / (M - 1), which turns the biased var into the unbiased one
// that running_var tracks (1 when M == 1).
int64_t batch_norm_count(const Shape& x);
double batch_norm_unbiased_factor(const Shape& x);
// state += momentum * (value - state), in place (an Update op: it runs in every step of a
// compiled plan although nothing reads its result). For BatchNorm's running statistics.
void ema_update(Emitter& e, Ref state, Ref value, double momentum);

// Normalises over the last gamma.rank() axes of x; gamma and beta have those axes' shape.
Ref layer_norm(Emitter& e, Ref x, Ref gamma, Ref beta, double eps = kNormEps);

// y = x * mask / (1 - p) when training, else x. The mask is
// dropout_keep(dropout_seed(seed, step seed), i, p) for row-major element i, so a (seed,
// step seed, shape) triple gives the same mask on every backend. `seed` tells layers apart;
// `step_seed` is an i64 [1] tensor that the trainer refills every step, so a compiled plan
// draws a new mask each step without being rebuilt.
Ref dropout(Emitter& e, Ref x, double p, uint64_t seed, Ref step_seed, bool training);

// Rows of weight [V, D] picked by i64 indices [...] -> [..., D]. An index outside [0, V)
// gives a zero row (and no gradient), as one_hot gives a zero row.
Ref embedding(Emitter& e, Ref weight, Ref indices);

// Losses, averaged over every element (or sample).
Ref mse_loss(Emitter& e, Ref prediction, Ref target);  // mean((p - t)^2), same shapes
Ref l1_loss(Emitter& e, Ref prediction, Ref target);   // mean(|p - t|), same shapes
// PyTorch's HuberLoss: mean of d^2 / 2 where |d| < delta, else delta (|d| - delta / 2),
// d = p - t; written q (|d| - q / 2) with q = min(|d|, delta), so no branch is needed.
Ref huber_loss(Emitter& e, Ref prediction, Ref target, double delta = 1.0);
Ref bce_with_logits(Emitter& e, Ref logits, Ref targets);  // stable; targets in [0, 1]
Ref nll_loss(Emitter& e, Ref log_probs, Ref labels);       // log_probs [N, C], labels i64 [N]

// The dropout mask: element `index` is kept when the index-th draw of the splitmix64
// stream Rng(seed) (engine/train/rng.h), as a double in [0, 1), is >= p. Counter-based, so
// any element can be computed alone (a GPU thread per element). Equivalently, in integers:
// (hash >> 11) >= p * 2^53.
inline uint64_t dropout_hash(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline uint64_t dropout_seed(int64_t layer_seed, int64_t step_seed) {
  return dropout_hash(static_cast<uint64_t>(layer_seed), static_cast<uint64_t>(step_seed));
}
inline bool dropout_keep(uint64_t seed, uint64_t index, double p) {
  return static_cast<double>(dropout_hash(seed, index) >> 11) * 0x1.0p-53 >= p;
}

}  // namespace mls
