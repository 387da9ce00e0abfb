// Batch norm in training: batch_norm_train, and the fused pair the batch-norm fusion pass
// (engine/passes/norm_fusion.cpp) makes of it where the backend has their kernels:
//
//   batch_norm_act(x, gamma, beta, act)   -> (act(y), mean, var)     y as batch_norm_train's
//   batch_norm_backward(g, x, mean, var, gamma[, beta], act) -> (dx, dgamma, dbeta)
//
// batch_norm_act's gradient is one batch_norm_backward node: the statistics' two sums in one
// pass over the activations and dx in a second, where batch_norm_train's rule below takes
// about six passes. With act = relu, relu's mask is where gamma (x - mean) rstd + beta > 0,
// recomputed from x (the CPU kernels compute it as the forward did, bit for bit) rather than
// read from y: one tensor fewer in each pass (the residual CNN's stem: 6.4 MB twice a step).
// batch_norm_backward's own derivatives differentiate its composite (the formula of
// batch_norm_train's rule, written with primitives), so higher orders still work.
//
//   batch_norm_pool_backward(gp, x, mean, var, gamma, beta, act) -> (dx, dgamma, dbeta)
//
// is batch_norm_backward of max_pool2d_backward(gp, y) for a 2x2, stride-2 max pool of
// batch_norm_act's y: the pool-gradient fusion pass (engine/passes/norm_fusion.cpp) makes it
// of the step graph, after autodiff, and the kernel recomputes y from x plane by plane, so
// the pooled gradient is routed without y or the 2x2 gradient ever being read or written
// (the residual CNN's stem: 6.4 MB written and 19 MB read less a step). It is never
// differentiated.
//
// [SECTION] helpers
// [SECTION] batch_norm_train
// [SECTION] batch_norm_act
// [SECTION] batch_norm_backward
// [SECTION] batch_norm_pool_backward
// [SECTION] registration
#include <algorithm>
#include <variant>

#include "engine/autodiff/autodiff.h"
#include "engine/ir/graph.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "engine/ops/op_helpers.h"
#include "engine/ops/tape_emitter.h"

namespace mls::ops {

namespace {

// [SECTION] helpers

const std::vector<AttrSpec> kNormAttrs{{"eps", AttrKind::Float, false}};
const std::vector<AttrSpec> kNormActAttrs{{"eps", AttrKind::Float, false},
                                          {"act", AttrKind::String, false}};

double eps_of(const Attrs& a) {
  return a.get_float_or("eps", kNormEps);
}

// "eps" a number when given; "act" (the fused ops) "none" or "relu".
Result<void> check_norm_attrs(const Attrs& a) {
  if (const AttrValue* v = a.find("eps");
      v && !std::holds_alternative<double>(*v) && !std::holds_alternative<int64_t>(*v))
    return make_error("attribute 'eps' has the wrong kind");
  if (eps_of(a) <= 0) return make_error("eps must be > 0");
  if (const AttrValue* v = a.find("act")) {
    const std::string* s = std::get_if<std::string>(v);
    if (!s || (*s != "none" && *s != "relu")) return make_error("act must be \"none\" or \"relu\"");
  }
  return {};
}

bool relu_of(const Attrs& a) {
  const AttrValue* v = a.find("act");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  return s && *s == "relu";
}

Result<void> check_f32(const ValueType& t, const char* what) {
  if (t.dtype != DType::F32)
    return make_error(std::string(what) + " must be f32, got " + type_str(t));
  return {};
}

// [1, C, 1, ...] and the axes other than 1, for x [N, C, ...].
Shape channel_shape(const Shape& x) {
  Shape s(x.size(), 1);
  s[1] = x[1];
  return s;
}
std::vector<int64_t> batch_axes(const Shape& x) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d)
    if (d != 1) axes.push_back(d);
  return axes;
}

// [SECTION] batch_norm_train

Result<Types> infer_batch_norm(InTypes in, const Attrs& a) {
  if (a.has("act")) return make_error("batch_norm_train takes no 'act' (batch_norm_act does)");
  if (auto r = check_norm_attrs(a); !r) return r.error();
  const Shape& x = in[0].shape;
  if (x.size() < 2) return make_error("expects x [N, C, ...], got " + shape_str(x));
  for (size_t i = 0; i < 3; ++i)
    if (auto r = check_f32(in[i], i == 0 ? "x" : i == 1 ? "gamma" : "beta"); !r) return r.error();
  Shape c{x[1]};
  if (in[1].shape != c || in[2].shape != c)
    return make_error("gamma and beta must be [C] = " + shape_str(c) + " for x " + shape_str(x) +
                      ", got " + shape_str(in[1].shape) + " and " + shape_str(in[2].shape));
  if (numel(x) == 0) return make_error("x " + shape_str(x) + " has no elements to average");
  return Types{in[0], {DType::F32, c}, {DType::F32, c}};
}

// The classic formula, with m = N * spatial, xhat = (x - mean) rstd, sums over axes != 1:
//   dx = gamma rstd (g - sum(g)/m - xhat sum(g xhat)/m) + g_mean/m + g_var 2 (x - mean)/m.
// gy, gmean, gvar: the gradients of y, mean and var (invalid: none); -> {dx, dgamma, dbeta},
// each only where `needs` asks (bit i: output i).
Refs batch_norm_grads(Emitter& e, Ref x, Ref mean, Ref var, Ref gamma, Ref gy, Ref gmean, Ref gvar,
                      double eps, unsigned needs) {
  const Shape xs = e.shape_of(x);
  const Shape cs = channel_shape(xs);
  const std::vector<int64_t> axes = batch_axes(xs);
  const double m = static_cast<double>(numel(xs) / xs[1]);
  Ref xc = sub(e, x, reshape(e, mean, cs));
  Refs r(3);
  Ref gx;
  if (gy.valid()) {
    Ref rstd = inv_std(e, reshape(e, var, cs), eps);
    Ref xhat = mul(e, xc, rstd);
    Ref sg = sum(e, gy, axes, true);
    Ref sgx = sum(e, mul(e, gy, xhat), axes, true);
    if (needs & 2) r[1] = reshape(e, sgx, {xs[1]});
    if (needs & 4) r[2] = reshape(e, sg, {xs[1]});
    if (needs & 1) {
      Ref centred = sub(e, gy, add(e, scale(e, sg, 1.0 / m), mul(e, xhat, scale(e, sgx, 1.0 / m))));
      gx = mul(e, centred, mul(e, reshape(e, gamma, cs), rstd));
    }
  }
  if ((needs & 1) && gmean.valid())
    gx = accumulate(e, gx, expand(e, reshape(e, scale(e, gmean, 1.0 / m), cs), xs));
  if ((needs & 1) && gvar.valid())
    gx = accumulate(e, gx, mul(e, xc, reshape(e, scale(e, gvar, 2.0 / m), cs)));
  r[0] = gx;
  return r;
}

unsigned needs_mask(const GradContext& c) {
  return (c.needs(0) ? 1u : 0u) | (c.needs(1) ? 2u : 0u) | (c.needs(2) ? 4u : 0u);
}

Refs batch_norm_vjp(const GradContext& c) {
  return batch_norm_grads(c.e, c.in(0), c.out(1), c.out(2), c.in(1), c.gout(0), c.gout(1),
                          c.gout(2), eps_of(c.attrs), needs_mask(c));
}

// d mean = mean(t);  d var = 2 mean((x - mean)(t - d mean));
// d y = gamma (rstd (t - d mean) - xhat rstd^2 d var / 2) + d gamma xhat + d beta.
Refs batch_norm_jvp(const JvpContext& c) {
  Emitter& e = c.e;
  const Shape xs = e.shape_of(c.in(0));
  const Shape cs = channel_shape(xs);
  const std::vector<int64_t> axes = batch_axes(xs);
  Ref xc = sub(e, c.in(0), reshape(e, c.out(1), cs));
  Ref rstd = inv_std(e, reshape(e, c.out(2), cs), eps_of(c.attrs));
  Ref xhat = mul(e, xc, rstd);
  Ref ty, tmean, tvar;
  if (Ref tx = c.tan(0); tx.valid()) {
    Ref tm = mean(e, tx, axes, true);
    Ref tc = sub(e, tx, tm);
    Ref tv = scale(e, mean(e, mul(e, xc, tc), axes, true), 2.0);
    tmean = reshape(e, tm, {xs[1]});
    tvar = reshape(e, tv, {xs[1]});
    Ref txhat =
        sub(e, mul(e, tc, rstd), mul(e, xhat, scale(e, mul(e, mul(e, rstd, rstd), tv), 0.5)));
    ty = mul(e, txhat, reshape(e, c.in(1), cs));
  }
  if (c.tan(1).valid()) ty = accumulate(e, ty, mul(e, xhat, reshape(e, c.tan(1), cs)));
  if (c.tan(2).valid()) ty = accumulate(e, ty, expand(e, reshape(e, c.tan(2), cs), xs));
  return {ty, tmean, tvar};
}

std::vector<RefArray> batch_norm_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &x = in[0], &gamma = in[1], &beta = in[2];
  const int64_t n = x.shape[0], ch = x.shape[1], s = numel(x.shape) / (n * ch);
  const auto m = static_cast<double>(n * s);
  RefArray y{x.shape, std::vector<double>(x.v.size())};
  RefArray mu{{ch}, std::vector<double>(static_cast<size_t>(ch))}, var = mu;
  auto at = [&](int64_t i, int64_t c, int64_t j) {
    return static_cast<size_t>((i * ch + c) * s + j);
  };
  for (int64_t c = 0; c < ch; ++c) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sum += x.v[at(i, c, j)];
    const double mc = sum / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sq += (x.v[at(i, c, j)] - mc) * (x.v[at(i, c, j)] - mc);
    const double vc = sq / m, rstd = 1.0 / std::sqrt(vc + eps_of(a));
    const auto cu = static_cast<size_t>(c);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        y.v[at(i, c, j)] = gamma.v[cu] * (x.v[at(i, c, j)] - mc) * rstd + beta.v[cu];
    mu.v[cu] = mc;
    var.v[cu] = vc;
  }
  return {y, mu, var};
}

// [SECTION] batch_norm_act

Result<Types> infer_batch_norm_act(InTypes in, const Attrs& a) {
  if (auto r = check_norm_attrs(a); !r) return r.error();
  Attrs plain{{"eps", eps_of(a)}};
  return infer_batch_norm(in, plain);
}

Attrs plain_attrs(const Attrs& a) {
  return {{"eps", eps_of(a)}};
}

// The gradient of y is one batch_norm_backward node; those of mean and var (nothing reads
// them in a training step: the running statistics take no gradient) as batch_norm_train's.
Refs batch_norm_act_vjp(const GradContext& c) {
  Emitter& e = c.e;
  Refs r(3);
  if (c.gout(0).valid()) {
    Refs in{c.gout(0), c.in(0), c.out(1), c.out(2), c.in(1)};
    if (relu_of(c.attrs)) in.push_back(c.in(2));  // beta: the mask is recomputed from x
    Refs g = e.emit("batch_norm_backward", in, c.attrs);
    for (size_t i = 0; i < 3; ++i)
      if (c.needs(i)) r[i] = g[i];
  }
  if (c.needs(0) && (c.gout(1).valid() || c.gout(2).valid())) {
    Refs extra = batch_norm_grads(e, c.in(0), c.out(1), c.out(2), c.in(1), Ref{}, c.gout(1),
                                  c.gout(2), eps_of(c.attrs), 1u);
    r[0] = accumulate(e, r[0], extra[0]);
  }
  return r;
}

Refs batch_norm_act_jvp(const JvpContext& c) {
  TapeEmitter t(c.e, "batch norm");
  BatchNormOut bn = batch_norm_train(t, c.in(0), c.in(1), c.in(2), eps_of(c.attrs));
  const Ref outs[] = {relu_of(c.attrs) ? relu(t, bn.y) : bn.y, bn.mean, bn.var};
  return t.jvp(c, outs);
}

std::vector<RefArray> batch_norm_act_ref(std::span<const RefArray> in, const Attrs& a) {
  std::vector<RefArray> r = batch_norm_ref(in, plain_attrs(a));
  if (relu_of(a))
    for (double& v : r[0].v) v = std::max(v, 0.0);
  return r;
}

// [SECTION] batch_norm_backward

Result<Types> infer_batch_norm_backward(InTypes in, const Attrs& a) {
  if (auto r = check_norm_attrs(a); !r) return r.error();
  const size_t want = relu_of(a) ? 6 : 5;
  if (in.size() != want)
    return make_error("takes (g, x, mean, var, gamma" + std::string(want == 6 ? ", beta)" : ")") +
                      " with act " + (want == 6 ? "relu" : "none") + ", got " +
                      std::to_string(in.size()) + " inputs");
  for (const ValueType& t : in)
    if (auto r = check_f32(t, "every input"); !r) return r.error();
  const Shape& x = in[1].shape;
  if (x.size() < 2 || numel(x) == 0)
    return make_error("expects x [N, C, ...] with elements, got " + shape_str(x));
  const Shape c{x[1]};
  if (in[0].shape != x) return make_error("g must have x's shape " + shape_str(x));
  for (size_t i = 2; i < want; ++i)
    if (in[i].shape != c)
      return make_error("mean, var, gamma (and beta) must be [C] = " + shape_str(c) + ", got " +
                        shape_str(in[i].shape));
  return Types{in[1], in[4], in[4]};
}

// What the op computes, with primitives: relu's rule on g (act relu) at the recomputed
// pre-activation gamma (x - mean) rstd + beta, then batch_norm_train's.
Refs batch_norm_backward_composite(Emitter& e, std::span<const Ref> in, const Attrs& a) {
  Ref gy = in[0];
  if (relu_of(a)) {
    const Shape cs = channel_shape(e.shape_of(in[1]));
    Ref xhat = mul(e, sub(e, in[1], reshape(e, in[2], cs)), inv_std(e, reshape(e, in[3], cs), eps_of(a)));
    Ref pre = add(e, mul(e, xhat, reshape(e, in[4], cs)), reshape(e, in[5], cs));
    gy = e.emit1("relu_backward", {in[0], pre});
  }
  return batch_norm_grads(e, in[1], in[2], in[3], in[4], gy, Ref{}, Ref{}, eps_of(a), 7u);
}

Refs batch_norm_backward_vjp(const GradContext& c) {
  return composite_vjp(c, batch_norm_backward_composite, "batch norm");
}
Refs batch_norm_backward_jvp(const JvpContext& c) {
  return composite_jvp(c, batch_norm_backward_composite, "batch norm");
}

std::vector<RefArray> batch_norm_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &g = in[0], &x = in[1], &mean = in[2], &var = in[3], &gamma = in[4];
  const bool relu = relu_of(a);
  const int64_t n = x.shape[0], ch = x.shape[1], s = numel(x.shape) / (n * ch);
  const auto m = static_cast<double>(n * s);
  RefArray dx{x.shape, std::vector<double>(x.v.size())};
  RefArray dgamma{{ch}, std::vector<double>(static_cast<size_t>(ch))}, dbeta = dgamma;
  auto at = [&](int64_t i, int64_t c, int64_t j) {
    return static_cast<size_t>((i * ch + c) * s + j);
  };
  for (int64_t c = 0; c < ch; ++c) {
    const auto cu = static_cast<size_t>(c);
    const double rstd = 1.0 / std::sqrt(var.v[cu] + eps_of(a));
    auto gy = [&](size_t k) {
      const double pre = gamma.v[cu] * (x.v[k] - mean.v[cu]) * rstd + (relu ? in[5].v[cu] : 0.0);
      return relu && !(pre > 0) ? 0.0 : g.v[k];
    };
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const size_t k = at(i, c, j);
        sg += gy(k);
        sgx += gy(k) * (x.v[k] - mean.v[cu]) * rstd;
      }
    dgamma.v[cu] = sgx;
    dbeta.v[cu] = sg;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const size_t k = at(i, c, j);
        const double xhat = (x.v[k] - mean.v[cu]) * rstd;
        dx.v[k] = gamma.v[cu] * rstd * (gy(k) - sg / m - xhat * sgx / m);
      }
  }
  return {dx, dgamma, dbeta};
}

// [SECTION] batch_norm_pool_backward

Result<Types> infer_batch_norm_pool_backward(InTypes in, const Attrs& a) {
  if (auto r = check_norm_attrs(a); !r) return r.error();
  if (in.size() != 6)
    return make_error("takes (gp, x, mean, var, gamma, beta), got " + std::to_string(in.size()) +
                      " inputs");
  for (const ValueType& t : in)
    if (auto r = check_f32(t, "every input"); !r) return r.error();
  const Shape& x = in[1].shape;
  if (x.size() != 4 || numel(x) == 0 || x[2] % 2 != 0 || x[3] % 2 != 0)
    return make_error("expects x [N, C, H, W] with H and W even (2x2 windows, stride 2), got " +
                      shape_str(x));
  const Shape gp{x[0], x[1], x[2] / 2, x[3] / 2}, c{x[1]};
  if (in[0].shape != gp) return make_error("gp must be the pooled shape " + shape_str(gp));
  for (size_t i = 2; i < 6; ++i)
    if (in[i].shape != c)
      return make_error("mean, var, gamma and beta must be [C] = " + shape_str(c) + ", got " +
                        shape_str(in[i].shape));
  return Types{in[1], in[4], in[4]};
}

// What the op computes, with ops: y rebuilt from x, the pool's gradient, then
// batch_norm_backward's composite (its derivatives differentiate this).
Refs batch_norm_pool_backward_composite(Emitter& e, std::span<const Ref> in, const Attrs& a) {
  const Shape cs = channel_shape(e.shape_of(in[1]));
  Ref xhat = mul(e, sub(e, in[1], reshape(e, in[2], cs)), inv_std(e, reshape(e, in[3], cs), eps_of(a)));
  Ref y = add(e, mul(e, xhat, reshape(e, in[4], cs)), reshape(e, in[5], cs));
  if (relu_of(a)) y = relu(e, y);
  const Ref gy = e.emit1("max_pool2d_backward", {in[0], y},
                         Attrs{{"kernel", std::vector<int64_t>{2, 2}}});
  std::vector<Ref> bn{gy, in[1], in[2], in[3], in[4]};
  if (relu_of(a)) bn.push_back(in[5]);
  return batch_norm_backward_composite(e, bn, a);
}

Refs batch_norm_pool_backward_vjp(const GradContext& c) {
  return composite_vjp(c, batch_norm_pool_backward_composite, "batch norm");
}
Refs batch_norm_pool_backward_jvp(const JvpContext& c) {
  return composite_jvp(c, batch_norm_pool_backward_composite, "batch norm");
}

// y = act(gamma (x - mean) rstd + beta), its 2x2 max pool's gradient, then batch_norm_backward's
// reference.
std::vector<RefArray> batch_norm_pool_backward_ref(std::span<const RefArray> in,
                                                   const Attrs& a) {
  const RefArray &x = in[1], &mean = in[2], &var = in[3], &gamma = in[4], &beta = in[5];
  const int64_t n = x.shape[0], ch = x.shape[1], s = x.shape[2] * x.shape[3];
  RefArray y{x.shape, std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < ch; ++c) {
      const auto cu = static_cast<size_t>(c);
      const double rstd = 1.0 / std::sqrt(var.v[cu] + eps_of(a));
      for (int64_t j = 0; j < s; ++j) {
        const auto k = static_cast<size_t>((i * ch + c) * s + j);
        const double pre = (x.v[k] - mean.v[cu]) * rstd * gamma.v[cu] + beta.v[cu];
        y.v[k] = relu_of(a) ? std::max(pre, 0.0) : pre;
      }
    }
  const OpDef* pool = op_registry().find("max_pool2d_backward");
  const RefArray gy = pool->reference(std::vector<RefArray>{in[0], y},
                                      Attrs{{"kernel", std::vector<int64_t>{2, 2}}})[0];
  std::vector<RefArray> bn{gy, x, mean, var, gamma};
  if (relu_of(a)) bn.push_back(beta);
  return batch_norm_backward_ref(bn, a);
}

// Counted as the two nodes it stands for (max_pool2d_backward and batch_norm_backward, one
// FLOP an element each), so a step's count does not change with the fusion.
double batch_norm_pool_backward_flops(std::span<const ValueType>, std::span<const ValueType> out,
                                      const Attrs&) {
  return 2.0 * static_cast<double>(numel(out[0].shape));
}

}  // namespace

// [SECTION] registration

void register_batch_norm_ops(OpRegistry& reg) {
  reg.define({.name = "batch_norm_train",
              .num_inputs = 3,
              .num_outputs = 3,
              .attrs = kNormAttrs,
              .infer = infer_batch_norm,
              .vjp = batch_norm_vjp,
              .jvp = batch_norm_jvp,
              .reference = batch_norm_ref,
              .samples =
                  [] {
                    Attrs a{{"eps", 1e-5}};
                    return std::vector<OpSample>{
                        sample({f32({5, 3}), f32({3}), f32({3})}, a, "[N, C]"),
                        sample({f32({3, 2, 2, 2}), f32({2}), f32({2})}, a, "[N, C, H, W]")};
                  },
              .doc = "training batch norm of x [N, C, ...] with gamma, beta [C] -> (y, mean [C], "
                     "var [C]); the batch statistics over every axis but 1, var biased; "
                     "batch_norm_unbiased_factor (engine/ops/nn.h) gives running_var's factor"});

  reg.define(
      {.name = "batch_norm_act",
       .num_inputs = 3,
       .num_outputs = 3,
       .attrs = kNormActAttrs,
       .infer = infer_batch_norm_act,
       .vjp = batch_norm_act_vjp,
       .jvp = batch_norm_act_jvp,
       .reference = batch_norm_act_ref,
       .samples =
           [] {
             auto a = [](const char* act) {
               return Attrs{{"eps", 1e-5}, {"act", std::string(act)}};
             };
             std::vector<OpSample> v{
                 sample({f32({5, 3}), f32({3}), f32({3})}, a("relu"), "[N, C], relu"),
                 sample({f32({3, 2, 2, 3}), f32({2}), f32({2})}, a("relu"), "[N, C, H, W], relu"),
                 sample({f32({3, 2, 2, 2}), f32({2}), f32({2})}, a("none"), "[N, C, H, W], none")};
             return v;
           },
       .doc = "batch_norm_train followed by an activation (act none or relu) in one kernel: "
              "(act(y), mean [C], var [C]); its gradient is one batch_norm_backward. Made "
              "by the batch-norm fusion pass"});

  reg.define(
      {.name = "batch_norm_backward",
       .num_inputs = -1,
       .num_outputs = 3,
       .attrs = kNormActAttrs,
       .infer = infer_batch_norm_backward,
       .vjp = batch_norm_backward_vjp,
       .jvp = batch_norm_backward_jvp,
       .reference = batch_norm_backward_ref,
       .samples =
           [] {
             auto a = [](const char* act) {
               return Attrs{{"eps", 1e-5}, {"act", std::string(act)}};
             };
             // var must be >= 0: every input is drawn in [0.2, 1.5) (x - mean of either
             // sign: relu's mask is mixed; tests/engine/batch_norm_fusion_test.cpp checks
             // masks at the residual CNN's shapes).
             std::vector<OpSample> v{
                 sample({f32({3, 2, 2, 2}), f32({3, 2, 2, 2}), f32({2}), f32({2}), f32({2})},
                        a("none"), "[N, C, H, W], none"),
                 sample({f32({4, 3}), f32({4, 3}), f32({3}), f32({3}), f32({3}), f32({3})},
                        a("relu"), "[N, C], relu")};
             for (OpSample& s : v) {
               s.lo = 0.2;
               s.hi = 1.5;
             }
             return v;
           },
       .doc = "the gradient of batch_norm_act: (g, x, mean, var, gamma[, beta]) -> (dx, "
              "dgamma, dbeta); with act relu, g is first masked where gamma (x - mean) rstd + "
              "beta <= 0 (where batch_norm_act's relu was off)"});

  reg.define(
      {.name = "batch_norm_pool_backward",
       .num_inputs = 6,
       .num_outputs = 3,
       .attrs = kNormActAttrs,
       .infer = infer_batch_norm_pool_backward,
       .vjp = batch_norm_pool_backward_vjp,
       .jvp = batch_norm_pool_backward_jvp,
       .reference = batch_norm_pool_backward_ref,
       .samples =
           [] {
             auto a = [](const char* act) {
               return Attrs{{"eps", 1e-5}, {"act", std::string(act)}};
             };
             // As batch_norm_backward's (var >= 0). Only the values are checked: a finite
             // difference across the pool's argmax or relu's kink would not be a derivative,
             // and the pass makes the op after autodiff (its rules differentiate the
             // composite, as batch_norm_backward's do).
             std::vector<OpSample> v{
                 sample({f32({2, 3, 4, 6}), f32({2, 3, 8, 12}), f32({3}), f32({3}), f32({3}),
                         f32({3})},
                        a("relu"), "[N, C, H, W], relu"),
                 sample({f32({3, 2, 2, 1}), f32({3, 2, 4, 2}), f32({2}), f32({2}), f32({2}),
                         f32({2})},
                        a("none"), "[N, C, H, W], none")};
             for (OpSample& s : v) {
               s.lo = 0.2;
               s.hi = 1.5;
               s.forward_only = true;
             }
             return v;
           },
       .doc = "batch_norm_backward (act none or relu) of the gradient a 2x2, stride-2 max pool "
              "sends back to batch_norm_act's y: (gp, x, mean, var, gamma, beta) -> (dx, dgamma, "
              "dbeta), y recomputed from x as the forward wrote it and gp routed to each "
              "window's first largest cell. Made of the step graph by the pool-gradient fusion "
              "pass",
       .flops = batch_norm_pool_backward_flops});
}

}  // namespace mls::ops
