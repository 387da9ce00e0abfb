// Optimizer steps as in-place ops, so every backend implements them as kernels and the
// parameters never leave the device.
#include "engine/ops/op_helpers.h"
#include "engine/ops/optimizer_scalars.h"

namespace mls::ops {

namespace {

Result<Types> infer_all_same(InTypes in, const Attrs&) {
  for (const ValueType& t : in)
    if (!(t == in[0])) return make_error("all operands must have the type of the parameter");
  if (in[0].dtype != DType::F32) return make_error("parameters must be f32 (master weights)");
  return Types{};
}

}  // namespace

void register_optimizer_ops(OpRegistry& reg) {
  // PyTorch's SGD: g += wd p; v = m v + g; p -= lr (nesterov ? g + m v : v).
  reg.define(
      {.name = "sgd_update",
       .num_inputs = 3,
       .num_outputs = 0,
       .attrs = {{"lr", AttrKind::Float},
                 {"momentum", AttrKind::Float},
                 {"weight_decay", AttrKind::Float},
                 {"nesterov", AttrKind::Int}},
       .infer = infer_all_same,
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             RefArray p = in[0], v = in[2];
             double lr = a.get_float("lr"), m = a.get_float("momentum"),
                    wd = a.get_float("weight_decay");
             bool nesterov = a.get_int("nesterov") != 0;
             for (size_t i = 0; i < p.v.size(); ++i) {
               double g = in[1].v[i] + wd * p.v[i];
               v.v[i] = m * v.v[i] + g;
               p.v[i] -= lr * (nesterov ? g + m * v.v[i] : v.v[i]);
             }
             return std::vector<RefArray>{p, v};
           },
       .samples =
           [] {
             Attrs a{
                 {"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", int64_t{0}}};
             Attrs n = a;
             n.set("nesterov", int64_t{1});
             return std::vector<OpSample>{sample({f32({3, 5}), f32({3, 5}), f32({3, 5})}, a),
                                          sample({f32({7}), f32({7}), f32({7})}, n, "nesterov")};
           },
       .kind = OpKind::Update,
       .mutated_inputs = {0, 2},
       .doc = "in place: (param, grad, velocity)"});
  // Running statistics (BatchNorm): state += momentum (value - state).
  reg.define({.name = "ema_update",
              .num_inputs = 2,
              .num_outputs = 0,
              .attrs = {{"momentum", AttrKind::Float}},
              .infer = infer_all_same,
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    RefArray s = in[0];
                    const double m = a.get_float("momentum");
                    for (size_t i = 0; i < s.v.size(); ++i) s.v[i] += m * (in[1].v[i] - s.v[i]);
                    return std::vector<RefArray>{s};
                  },
              .samples = [] { return std::vector<OpSample>{sample({f32({6}), f32({6})}, {{"momentum", 0.1}})}; },
              .kind = OpKind::Update,
              .mutated_inputs = {0},
              .doc = "in place: (state, value); running statistics"});
  // Adam (decoupled=1: AdamW). step counts from 1.
  reg.define({.name = "adam_update",
              .num_inputs = 4,
              .num_outputs = 0,
              .attrs = {{"lr", AttrKind::Float},
                        {"beta1", AttrKind::Float},
                        {"beta2", AttrKind::Float},
                        {"eps", AttrKind::Float},
                        {"weight_decay", AttrKind::Float},
                        {"step", AttrKind::Int},
                        {"decoupled", AttrKind::Int}},
              .infer = infer_all_same,
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    RefArray p = in[0], m = in[2], v = in[3];
                    double lr = a.get_float("lr"), b1 = a.get_float("beta1"),
                           b2 = a.get_float("beta2");
                    double eps = a.get_float("eps"), wd = a.get_float("weight_decay");
                    auto t = static_cast<double>(a.get_int("step"));
                    bool decoupled = a.get_int("decoupled") != 0;
                    for (size_t i = 0; i < p.v.size(); ++i) {
                      double g = in[1].v[i];
                      if (decoupled)
                        p.v[i] *= 1.0 - lr * wd;
                      else
                        g += wd * p.v[i];
                      m.v[i] = b1 * m.v[i] + (1 - b1) * g;
                      v.v[i] = b2 * v.v[i] + (1 - b2) * g * g;
                      double mh = m.v[i] / (1 - std::pow(b1, t)),
                             vh = v.v[i] / (1 - std::pow(b2, t));
                      p.v[i] -= lr * mh / (std::sqrt(vh) + eps);
                    }
                    return std::vector<RefArray>{p, m, v};
                  },
              .samples =
                  [] {
                    Attrs a{{"lr", 0.01},
                            {"beta1", 0.9},
                            {"beta2", 0.999},
                            {"eps", 1e-8},
                            {"weight_decay", 0.0},
                            {"step", int64_t{3}},
                            {"decoupled", int64_t{0}}};
                    Attrs w = a;
                    w.set("weight_decay", 0.1);
                    w.set("decoupled", int64_t{1});
                    OpSample s1 = sample({f32({4, 3}), f32({4, 3}), f32({4, 3}), f32({4, 3})}, a);
                    OpSample s2 = sample({f32({9}), f32({9}), f32({9}), f32({9})}, w, "adamw");
                    s1.lo = s2.lo = 0.0;  // v must be non-negative: draw all inputs in [0, 1)
                    return std::vector<OpSample>{s1, s2};
                  },
              .kind = OpKind::Update,
              .mutated_inputs = {0, 2, 3},
              .doc = "in place: (param, grad, m, v)"});
  // PyTorch's RMSprop, centered=False and momentum=0 (momentum would need a 4th state input):
  // g += wd p; s = alpha s + (1 - alpha) g^2; p -= lr g / (sqrt(s) + eps).
  reg.define({.name = "rmsprop_update",
              .num_inputs = 3,
              .num_outputs = 0,
              .attrs = {{"lr", AttrKind::Float},
                        {"alpha", AttrKind::Float},
                        {"eps", AttrKind::Float},
                        {"weight_decay", AttrKind::Float}},
              .infer = infer_all_same,
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    RefArray p = in[0], s = in[2];
                    double lr = a.get_float("lr"), alpha = a.get_float("alpha");
                    double eps = a.get_float("eps"), wd = a.get_float("weight_decay");
                    for (size_t i = 0; i < p.v.size(); ++i) {
                      double g = in[1].v[i] + wd * p.v[i];
                      s.v[i] = alpha * s.v[i] + (1 - alpha) * g * g;
                      p.v[i] -= lr * g / (std::sqrt(s.v[i]) + eps);
                    }
                    return std::vector<RefArray>{p, s};
                  },
              .samples =
                  [] {
                    Attrs a{{"lr", 0.01}, {"alpha", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.0}};
                    Attrs w = a;
                    w.set("weight_decay", 0.1);
                    OpSample s1 = sample({f32({3, 4}), f32({3, 4}), f32({3, 4})}, a);
                    OpSample s2 = sample({f32({8}), f32({8}), f32({8})}, w, "weight decay");
                    s1.lo = s2.lo = 0.0;  // the square average must be non-negative
                    return std::vector<OpSample>{s1, s2};
                  },
              .kind = OpKind::Update,
              .mutated_inputs = {0, 2},
              .doc = "in place: (param, grad, square_avg)"});
  // PyTorch's Adagrad; step counts from 1: clr = lr / (1 + (step - 1) lr_decay);
  // g += wd p; s += g^2; p -= clr g / (sqrt(s) + eps).
  reg.define({.name = "adagrad_update",
              .num_inputs = 3,
              .num_outputs = 0,
              .attrs = {{"lr", AttrKind::Float},
                        {"eps", AttrKind::Float},
                        {"weight_decay", AttrKind::Float},
                        {"lr_decay", AttrKind::Float},
                        {"step", AttrKind::Int}},
              .infer = infer_all_same,
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    RefArray p = in[0], s = in[2];
                    double eps = a.get_float("eps"), wd = a.get_float("weight_decay");
                    auto t = static_cast<double>(a.get_int("step"));
                    double clr = a.get_float("lr") / (1 + (t - 1) * a.get_float("lr_decay"));
                    for (size_t i = 0; i < p.v.size(); ++i) {
                      double g = in[1].v[i] + wd * p.v[i];
                      s.v[i] += g * g;
                      p.v[i] -= clr * g / (std::sqrt(s.v[i]) + eps);
                    }
                    return std::vector<RefArray>{p, s};
                  },
              .samples =
                  [] {
                    Attrs a{{"lr", 0.01},
                            {"eps", 1e-10},
                            {"weight_decay", 0.0},
                            {"lr_decay", 0.0},
                            {"step", int64_t{1}}};
                    Attrs d{{"lr", 0.05},
                            {"eps", 1e-10},
                            {"weight_decay", 0.05},
                            {"lr_decay", 0.1},
                            {"step", int64_t{4}}};
                    OpSample s1 = sample({f32({5, 3}), f32({5, 3}), f32({5, 3})}, a);
                    OpSample s2 = sample({f32({6}), f32({6}), f32({6})}, d, "decay");
                    s1.lo = s2.lo = 0.0;  // the sum of squares must be non-negative
                    return std::vector<OpSample>{s1, s2};
                  },
              .kind = OpKind::Update,
              .mutated_inputs = {0, 2},
              .doc = "in place: (param, grad, sum)"});
}

}  // namespace mls::ops

namespace mls {

AdamScalars adam_scalars(const Attrs& a) {
  const double lr = a.get_float("lr"), b1 = a.get_float("beta1"), b2 = a.get_float("beta2");
  const auto t = static_cast<double>(a.get_int("step"));
  return {static_cast<float>(lr / (1.0 - std::pow(b1, t))), static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, t))),
          static_cast<float>(1.0 - lr * a.get_float("weight_decay"))};
}

float adagrad_rate(const Attrs& a) {
  const auto t = static_cast<double>(a.get_int("step"));
  return static_cast<float>(a.get_float("lr") / (1 + (t - 1) * a.get_float("lr_decay")));
}

}  // namespace mls

