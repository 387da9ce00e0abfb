#include "engine/ops/nn.h"

#include <limits>

#include "engine/core/check.h"
#include "engine/ops/math.h"

namespace mls {

namespace {

// [1, C, 1, ...]: per-channel values broadcast over x [N, C, ...].
Shape channel_shape(const Shape& x) {
  Shape s(x.size(), 1);
  s[1] = x[1];
  return s;
}

}  // namespace

Ref softmax(Emitter& e, Ref x, int64_t axis) {
  return e.emit1("softmax", {x}, {{"axis", axis}});
}

Ref inv_std(Emitter& e, Ref var, double eps) {
  return exp(e, scale(e, log(e, add_scalar(e, var, eps)), -0.5));
}

BatchNormOut batch_norm_train(Emitter& e, Ref x, Ref gamma, Ref beta, double eps) {
  Ref in[] = {x, gamma, beta};
  Refs r = e.emit("batch_norm_train", in, {{"eps", eps}});
  return {r[0], r[1], r[2]};
}

Ref batch_norm_eval(Emitter& e, Ref x, Ref gamma, Ref beta, Ref running_mean, Ref running_var,
                    double eps) {
  const Shape xs = e.shape_of(x);
  MLS_CHECK(xs.size() >= 2, "batch_norm_eval expects x [N, C, ...]");
  const Shape cs = channel_shape(xs);
  Ref a = mul(e, gamma, inv_std(e, running_var, eps));  // per channel, so cheap
  // (x - rm) * a rather than x * a - rm * a: no cancellation when |rm| >> std.
  return add(e, mul(e, sub(e, x, reshape(e, running_mean, cs)), reshape(e, a, cs)),
             reshape(e, beta, cs));
}

int64_t batch_norm_count(const Shape& x) {
  MLS_CHECK(x.size() >= 2 && x[1] > 0, "batch_norm_count expects x [N, C, ...]");
  return numel(x) / x[1];
}

double batch_norm_unbiased_factor(const Shape& x) {
  auto m = static_cast<double>(batch_norm_count(x));
  return m > 1 ? m / (m - 1) : 1.0;
}

Ref layer_norm(Emitter& e, Ref x, Ref gamma, Ref beta, double eps) {
  Ref in[] = {x, gamma, beta};
  return e.emit("layer_norm", in, {{"eps", eps}})[0];
}

Ref dropout(Emitter& e, Ref x, double p, uint64_t seed, Ref step_seed, bool training) {
  return e.emit1("dropout", {x, step_seed},
                 {{"p", p}, {"seed", static_cast<int64_t>(seed)}, {"training", int64_t{training}}});
}

void ema_update(Emitter& e, Ref state, Ref value, double momentum) {
  Ref in[] = {state, value};
  e.emit("ema_update", in, {{"momentum", momentum}});
}

Ref embedding(Emitter& e, Ref weight, Ref indices) {
  return e.emit1("embedding", {weight, indices});
}

Ref mse_loss(Emitter& e, Ref prediction, Ref target) {
  MLS_CHECK(e.shape_of(prediction) == e.shape_of(target),
            "mse_loss expects prediction and target of one shape");
  Ref d = sub(e, prediction, target);
  return mean(e, mul(e, d, d), {}, false);
}

Ref l1_loss(Emitter& e, Ref prediction, Ref target) {
  MLS_CHECK(e.shape_of(prediction) == e.shape_of(target),
            "l1_loss expects prediction and target of one shape");
  return mean(e, abs(e, sub(e, prediction, target)), {}, false);
}

Ref huber_loss(Emitter& e, Ref prediction, Ref target, double delta) {
  MLS_CHECK(e.shape_of(prediction) == e.shape_of(target),
            "huber_loss expects prediction and target of one shape");
  MLS_CHECK(delta > 0, "huber_loss: delta must be > 0");
  Ref a = abs(e, sub(e, prediction, target));
  Ref q = clamp(e, a, -std::numeric_limits<double>::infinity(), delta);
  return mean(e, mul(e, q, sub(e, a, scale(e, q, 0.5))), {}, false);
}

Ref bce_with_logits(Emitter& e, Ref logits, Ref targets) {
  return mean(e, e.emit1("sigmoid_cross_entropy", {logits, targets}), {}, false);
}

Ref nll_loss(Emitter& e, Ref log_probs, Ref labels) {
  const Shape s = e.shape_of(log_probs);
  MLS_CHECK(s.size() == 2, "nll_loss expects log_probs [N, C]");
  Ref target = e.emit1("one_hot", {labels}, {{"num_classes", s[1]}});
  return neg(e, mean(e, sum(e, mul(e, target, log_probs), {1}, false), {}, false));
}

}  // namespace mls
