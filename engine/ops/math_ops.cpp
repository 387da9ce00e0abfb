// More elementwise math: unary activations, broadcasting binary ops, comparisons, where and
// cast. Every gradient is a graph of registry ops, and the backward ops defined here
// (gelu_backward, clamp_backward) have rules of their own, so higher orders work.
//
// [SECTION] Builders (engine/ops/math.h)
// [SECTION] Helpers
// [SECTION] Derivative graphs
// [SECTION] Unary ops
// [SECTION] Backward ops
// [SECTION] Binary ops
// [SECTION] Comparisons
// [SECTION] where
// [SECTION] cast
#include "engine/ops/math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <variant>

#include "engine/ops/op_helpers.h"

// [SECTION] Builders (engine/ops/math.h)
namespace mls {

Ref abs(Emitter& e, Ref x) {
  return e.emit1("abs", {x});
}
Ref sign(Emitter& e, Ref x) {
  return e.emit1("sign", {x});
}
Ref round(Emitter& e, Ref x) {
  return e.emit1("round", {x});
}
Ref sqrt(Emitter& e, Ref x) {
  return e.emit1("sqrt", {x});
}
Ref rsqrt(Emitter& e, Ref x) {
  return e.emit1("rsqrt", {x});
}
Ref leaky_relu(Emitter& e, Ref x, double alpha) {
  return e.emit1("leaky_relu", {x}, {{"alpha", alpha}});
}
Ref gelu(Emitter& e, Ref x, std::string_view approximate) {
  return e.emit1("gelu", {x}, {{"approximate", std::string(approximate)}});
}
Ref silu(Emitter& e, Ref x) {
  return e.emit1("silu", {x});
}
Ref softplus(Emitter& e, Ref x, double beta, double threshold) {
  return e.emit1("softplus", {x}, {{"beta", beta}, {"threshold", threshold}});
}
Ref clamp(Emitter& e, Ref x, double min, double max) {
  Attrs a;
  if (std::isfinite(min)) a.set("min", min);
  if (std::isfinite(max)) a.set("max", max);
  return e.emit1("clamp", {x}, a);
}
Ref pow(Emitter& e, Ref a, Ref b) {
  return e.emit1("pow", {a, b});
}
Ref maximum(Emitter& e, Ref a, Ref b) {
  return e.emit1("maximum", {a, b});
}
Ref minimum(Emitter& e, Ref a, Ref b) {
  return e.emit1("minimum", {a, b});
}
Ref equal(Emitter& e, Ref a, Ref b) {
  return e.emit1("equal", {a, b});
}
Ref not_equal(Emitter& e, Ref a, Ref b) {
  return e.emit1("not_equal", {a, b});
}
Ref less(Emitter& e, Ref a, Ref b) {
  return e.emit1("less", {a, b});
}
Ref less_equal(Emitter& e, Ref a, Ref b) {
  return e.emit1("less_equal", {a, b});
}
Ref greater(Emitter& e, Ref a, Ref b) {
  return e.emit1("greater", {a, b});
}
Ref greater_equal(Emitter& e, Ref a, Ref b) {
  return e.emit1("greater_equal", {a, b});
}
Ref where(Emitter& e, Ref cond, Ref a, Ref b) {
  return e.emit1("where", {cond, a, b});
}
Ref cast(Emitter& e, Ref x, DType dtype) {
  if (e.type_of(x).dtype == dtype) return x;
  return e.emit1("cast", {x}, {{"dtype", std::string(dtype_name(dtype))}});
}

}  // namespace mls

namespace mls::ops {

namespace {

// [SECTION] Helpers

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSqrt2 = std::numbers::sqrt2;
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;  // 1/sqrt(2 pi)
constexpr double kGeluK = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;       // sqrt(2/pi)
constexpr double kGeluC = 0.044715;

Result<Types> infer_float(InTypes in, const Attrs&) {
  if (!dtype_is_float(in[0].dtype))
    return make_error("expects a float tensor, got " + type_str(in[0]));
  return Types{in[0]};
}

Result<Types> infer_float_broadcast(InTypes in, const Attrs& a) {
  if (!dtype_is_float(in[0].dtype))
    return make_error("expects float tensors, got " + type_str(in[0]) + " and " + type_str(in[1]));
  return infer_broadcast(in, a);
}

// (dy, x) of one type: the inputs of a backward op.
Result<Types> infer_dy_x(InTypes in, const Attrs& a) {
  if (!(in[0] == in[1]))
    return make_error("dy and x must have the same type, got " + type_str(in[0]) + " and " +
                      type_str(in[1]));
  return infer_float(in, a);
}

// A scalar of `like`'s dtype: broadcasts against anything.
Ref scalar(Emitter& e, Ref like, double v) {
  return fill(e, {e.type_of(like).dtype, {}}, v);
}

bool tanh_gelu(const Attrs& a) {
  const AttrValue* v = a.find("approximate");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  return s && *s == "tanh";
}

Result<Types> infer_gelu(InTypes in, const Attrs& a) {
  if (a.has("approximate")) {
    const std::string& s = a.get_string("approximate");
    if (s != "none" && s != "tanh")
      return make_error("approximate must be \"none\" or \"tanh\", got \"" + s + "\"");
  }
  return in.size() == 1 ? infer_float(in, a) : infer_dy_x(in, a);
}

Result<Types> infer_clamp(InTypes in, const Attrs& a) {
  double lo = a.get_float_or("min", -kInf), hi = a.get_float_or("max", kInf);
  if (std::isnan(lo) || std::isnan(hi) || lo > hi)
    return make_error("needs min <= max, got min " + std::to_string(lo) + " and max " +
                      std::to_string(hi));
  return in.size() == 1 ? infer_float(in, a) : infer_dy_x(in, a);
}

// Reference derivatives of gelu (float64).
double gelu_ref(double x, bool tanh_form) {
  if (tanh_form) return 0.5 * x * (1.0 + std::tanh(kGeluK * (x + kGeluC * x * x * x)));
  return 0.5 * x * std::erfc(-x / kSqrt2);
}
double gelu_grad_ref(double x, bool tanh_form) {
  if (tanh_form) {
    double t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluK * (1.0 + 3.0 * kGeluC * x * x);
  }
  return 0.5 * std::erfc(-x / kSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

std::vector<OpSample> with_range(std::vector<OpSample> v, double lo, double hi,
                                 double min_abs = 0) {
  for (OpSample& s : v) {
    s.lo = lo;
    s.hi = hi;
    s.min_abs = min_abs;
  }
  return v;
}

// [SECTION] Derivative graphs

// gelu''(x) as a graph, for the x-gradient of gelu_backward.
Ref gelu_second(Emitter& e, Ref x, bool tanh_form) {
  Ref xx = mul(e, x, x);
  if (!tanh_form) {  // phi(x) (2 - x^2), phi the standard normal density
    Ref phi = scale(e, exp(e, scale(e, xx, -0.5)), kInvSqrt2Pi);
    return mul(e, phi, add_scalar(e, neg(e, xx), 2.0));
  }
  // u = k (x + c x^3), t = tanh(u), s = 1 - t^2:  s (u' + x/2 (u'' - 2 t u'^2))
  Ref t = e.emit1("tanh", {scale(e, mul(e, x, add_scalar(e, scale(e, xx, kGeluC), 1.0)), kGeluK)});
  Ref s = add_scalar(e, neg(e, mul(e, t, t)), 1.0);
  Ref du = scale(e, add_scalar(e, scale(e, xx, 3.0 * kGeluC), 1.0), kGeluK);
  Ref ddu = scale(e, x, 6.0 * kGeluK * kGeluC);
  Ref inner = sub(e, ddu, scale(e, mul(e, t, mul(e, du, du)), 2.0));
  return mul(e, s, add(e, du, scale(e, mul(e, x, inner), 0.5)));
}

// d pow(a, b) / da = b a^(b-1); 0 where b == 0 (PyTorch's convention, avoids 0 * inf).
Ref pow_da(Emitter& e, Ref a, Ref b) {
  Ref zero = scalar(e, a, 0.0);
  Ref d = mul(e, b, pow(e, a, add_scalar(e, b, -1.0)));
  return where(e, equal(e, b, zero), zero, d);
}

// d pow(a, b) / db = a^b log(a); 0 where a == 0 (the limit for b > 0).
Ref pow_db(Emitter& e, Ref a, Ref y) {
  Ref zero = scalar(e, a, 0.0);
  return where(e, equal(e, a, zero), zero, mul(e, y, log(e, a)));
}

// The share of maximum's (or minimum's) gradient that goes to a: 1 where a wins, 1/2 on
// ties (as PyTorch), 0 where b wins. The rest goes to b.
Ref share_of_a(Emitter& e, Ref a, Ref b, bool is_max) {
  Ref wins = is_max ? greater(e, a, b) : less(e, a, b);
  Ref tie = where(e, equal(e, a, b), scalar(e, a, 0.5), scalar(e, a, 0.0));
  return where(e, wins, scalar(e, a, 1.0), tie);
}

// [SECTION] Unary ops

using UnaryFn = std::function<double(double, const Attrs&)>;
// dy/dx * t as a graph, for t the output gradient or the input tangent (the derivative of
// an elementwise op is diagonal, so the vjp and the jvp are the same product).
using DerivFn = std::function<Ref(Emitter& e, Ref x, Ref y, Ref t, const Attrs& a)>;

void def_unary(OpRegistry& reg, const char* name, std::vector<AttrSpec> attrs, UnaryFn f, DerivFn d,
               std::vector<OpSample> samples, const char* doc, InferFn infer = infer_float) {
  reg.define(
      {.name = name,
       .attrs = std::move(attrs),
       .infer = std::move(infer),
       .vjp =
           [d](const GradContext& c) {
             return Refs{d(c.e, c.in(0), c.out(0), c.gout(0), c.attrs)};
           },
       .jvp =
           [d](const JvpContext& c) { return Refs{d(c.e, c.in(0), c.out(0), c.tan(0), c.attrs)}; },
       .reference =
           [f](std::span<const RefArray> in, const Attrs& a) {
             return std::vector<RefArray>{ref_unary(in[0], [&](double x) { return f(x, a); })};
           },
       .samples = [samples] { return samples; },
       .inplace = true,  // elementwise: may write over an input of its type (OpDef::inplace)
       .doc = doc});
}

void register_unary(OpRegistry& reg) {
  const std::vector<OpSample> plain{sample({f32({3, 4})}), sample({f32({2, 3, 2})})};
  const std::vector<OpSample> away = with_range(plain, -1, 1, 0.05);  // kinks at 0
  const std::vector<OpSample> positive = with_range(plain, 0.5, 2.0);

  def_unary(
      reg, "abs", {}, [](double x, const Attrs&) { return std::abs(x); },
      [](Emitter& e, Ref x, Ref, Ref t, const Attrs&) { return mul(e, t, sign(e, x)); }, away,
      "|x|; the gradient at 0 is 0");
  def_unary(
      reg, "sqrt", {}, [](double x, const Attrs&) { return std::sqrt(x); },
      [](Emitter& e, Ref, Ref y, Ref t, const Attrs&) { return div(e, scale(e, t, 0.5), y); },
      positive, "square root");
  def_unary(
      reg, "rsqrt", {}, [](double x, const Attrs&) { return 1.0 / std::sqrt(x); },
      [](Emitter& e, Ref x, Ref y, Ref t, const Attrs&) {  // -y / (2x)
        return scale(e, mul(e, t, div(e, y, x)), -0.5);
      },
      positive, "1 / sqrt(x)");

  std::vector<OpSample> leaky = away;
  leaky[1].attrs = {{"alpha", 0.2}};
  def_unary(
      reg, "leaky_relu", {{"alpha", AttrKind::Float, false}},
      [](double x, const Attrs& a) { return x > 0 ? x : a.get_float_or("alpha", 0.01) * x; },
      [](Emitter& e, Ref x, Ref y, Ref t, const Attrs& a) {  // t (x > 0) (1 - alpha) + alpha t
        double alpha = a.get_float_or("alpha", 0.01);
        // With alpha >= 0, y > 0 exactly where x > 0: reading y (as relu's rule does) lets the
        // backward pass keep the output alone, and the bias + activation fusion apply.
        Ref sign_of = alpha >= 0 ? y : x;
        return add(e, scale(e, e.emit1("relu_backward", {t, sign_of}), 1.0 - alpha), scale(e, t, alpha));
      },
      leaky, "x where x > 0, else alpha * x (alpha: 0.01 unless given)");

  std::vector<OpSample> gelu_s = with_range(plain, -3, 3);
  gelu_s[1].attrs = {{"approximate", std::string("tanh")}};
  def_unary(
      reg, "gelu", {{"approximate", AttrKind::String, false}},
      [](double x, const Attrs& a) { return gelu_ref(x, tanh_gelu(a)); },
      [](Emitter& e, Ref x, Ref, Ref t, const Attrs& a) {
        return e.emit1("gelu_backward", {t, x}, a);
      },
      gelu_s,
      "x * Phi(x) with the normal CDF Phi (approximate \"none\", the default, as PyTorch), or "
      "x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate \"tanh\")",
      infer_gelu);

  def_unary(
      reg, "silu", {}, [](double x, const Attrs&) { return x / (1.0 + std::exp(-x)); },
      [](Emitter& e, Ref x, Ref y, Ref t, const Attrs&) {  // s + y (1 - s), s = sigmoid(x)
        Ref s = e.emit1("sigmoid", {x});
        return mul(e, t, add(e, s, mul(e, y, add_scalar(e, neg(e, s), 1.0))));
      },
      with_range(plain, -3, 3), "x * sigmoid(x) (swish)");

  std::vector<OpSample> softplus_s = with_range(plain, -2, 2);
  softplus_s[1].attrs = {{"beta", 2.0}, {"threshold", 1.5}};  // x > 0.75 is linear
  def_unary(
      reg, "softplus", {{"beta", AttrKind::Float, false}, {"threshold", AttrKind::Float, false}},
      [](double x, const Attrs& a) {
        double beta = a.get_float_or("beta", 1.0), z = beta * x;
        if (z > a.get_float_or("threshold", 20.0)) return x;
        return (std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z)))) / beta;
      },
      [](Emitter& e, Ref x, Ref, Ref t, const Attrs& a) {  // sigmoid(beta x), 1 past the threshold
        double beta = a.get_float_or("beta", 1.0);
        Ref z = beta == 1.0 ? x : scale(e, x, beta);
        Ref linear = greater(e, z, scalar(e, z, a.get_float_or("threshold", 20.0)));
        return where(e, linear, t, mul(e, t, e.emit1("sigmoid", {z})));
      },
      softplus_s,
      "log(1 + exp(beta x)) / beta, and x where beta x > threshold (beta 1 and threshold 20 "
      "unless given, as PyTorch)",
      [](InTypes in, const Attrs& a) -> Result<Types> {
        if (a.get_float_or("beta", 1.0) == 0.0) return make_error("beta must not be 0");
        return infer_float(in, a);
      });

  std::vector<OpSample> clamp_s = plain;
  clamp_s[0].attrs = {{"min", -0.5}, {"max", 0.5}};
  clamp_s[1].attrs = {{"min", -0.25}};
  def_unary(
      reg, "clamp", {{"min", AttrKind::Float, false}, {"max", AttrKind::Float, false}},
      [](double x, const Attrs& a) {
        return std::min(std::max(x, a.get_float_or("min", -kInf)), a.get_float_or("max", kInf));
      },
      [](Emitter& e, Ref x, Ref, Ref t, const Attrs& a) {
        return e.emit1("clamp_backward", {t, x}, a);
      },
      clamp_s,
      "min(max(x, min), max); a bound not given does not clamp. The gradient passes only "
      "strictly inside (min, max)",
      infer_clamp);

  reg.define({.name = "sign",
              .infer = infer_float,
              .reference =
                  [](std::span<const RefArray> in, const Attrs&) {
                    return std::vector<RefArray>{ref_unary(
                        in[0], [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); })};
                  },
              .samples =
                  [] {
                    OpSample s = sample({f32({3, 4})});
                    s.min_abs = 0.05;
                    return std::vector<OpSample>{s};
                  },
              .kind = OpKind::NonDiff,
              .inplace = true,
              .doc = "-1, 0 or 1 by the sign of x (piecewise constant: no gradient)"});

  reg.define({.name = "round",
              .infer = infer_float,
              .reference =
                  [](std::span<const RefArray> in, const Attrs&) {
                    // Through f32, as the kernel sees it; nearbyint rounds halves to even.
                    return std::vector<RefArray>{ref_unary(
                        in[0], [](double x) { return std::nearbyint(static_cast<double>(static_cast<float>(x))); })};
                  },
              .samples =
                  [] {
                    OpSample s = sample({f32({3, 4})});
                    s.lo = -4;
                    s.hi = 4;
                    return std::vector<OpSample>{s};
                  },
              .kind = OpKind::NonDiff,
              .inplace = true,
              .doc = "x rounded to the nearest integer, halves to even (piecewise constant: no "
                     "gradient); what quantization rounds with"});
}

// [SECTION] Backward ops

void register_backward(OpRegistry& reg) {
  // gelu_backward(dy, x) = dy * gelu'(x): linear in dy, gelu'' for x.
  reg.define({.name = "gelu_backward",
              .num_inputs = 2,
              .attrs = {{"approximate", AttrKind::String, false}},
              .infer = infer_gelu,
              .vjp =
                  [](const GradContext& c) {
                    Refs r(2);
                    if (c.needs(0))
                      r[0] = c.e.emit1("gelu_backward", {c.gout(0), c.in(1)}, c.attrs);
                    if (c.needs(1))
                      r[1] = mul(c.e, mul(c.e, c.gout(0), c.in(0)),
                                 gelu_second(c.e, c.in(1), tanh_gelu(c.attrs)));
                    return r;
                  },
              .jvp =
                  [](const JvpContext& c) {
                    Ref a = c.tan(0).valid()
                                ? c.e.emit1("gelu_backward", {c.tan(0), c.in(1)}, c.attrs)
                                : Ref{};
                    Ref b = c.tan(1).valid() ? mul(c.e, mul(c.e, c.tan(1), c.in(0)),
                                                   gelu_second(c.e, c.in(1), tanh_gelu(c.attrs)))
                                             : Ref{};
                    return Refs{accumulate(c.e, a, b)};
                  },
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    bool t = tanh_gelu(a);
                    return std::vector<RefArray>{ref_binary(in[0], in[1], [t](double dy, double x) {
                      return dy * gelu_grad_ref(x, t);
                    })};
                  },
              .samples =
                  [] {
                    return with_range({sample({f32({3, 4}), f32({3, 4})}),
                                       sample({f32({3, 4}), f32({3, 4})},
                                              {{"approximate", std::string("tanh")}}, "tanh form")},
                                      -3, 3);
                  },
              .inplace = true,
              .doc = "the gradient of gelu: dy * gelu'(x)"});

  // clamp_backward(dy, x) = dy inside (min, max), else 0. Linear in dy; zero a.e. in x.
  reg.define({.name = "clamp_backward",
              .num_inputs = 2,
              .attrs = {{"min", AttrKind::Float, false}, {"max", AttrKind::Float, false}},
              .infer = infer_clamp,
              .vjp =
                  [](const GradContext& c) {
                    return Refs{c.e.emit1("clamp_backward", {c.gout(0), c.in(1)}, c.attrs), Ref{}};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{c.tan(0).valid()
                                    ? c.e.emit1("clamp_backward", {c.tan(0), c.in(1)}, c.attrs)
                                    : Ref{}};
                  },
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    double lo = a.get_float_or("min", -kInf), hi = a.get_float_or("max", kInf);
                    return std::vector<RefArray>{ref_binary(
                        in[0], in[1],
                        [lo, hi](double dy, double x) { return x > lo && x < hi ? dy : 0.0; })};
                  },
              .samples =
                  [] {
                    return std::vector<OpSample>{
                        sample({f32({3, 4}), f32({3, 4})}, {{"min", -0.5}, {"max", 0.5}})};
                  },
              .inplace = true,
              .doc = "the gradient of clamp: dy where min < x < max, else 0"});
}

// [SECTION] Binary ops


void def_minmax(OpRegistry& reg, const char* name, bool is_max) {
  define_binary(
      reg, name, [is_max](double a, double b) { return is_max ? std::max(a, b) : std::min(a, b); },
      [is_max](const GradContext& c) {
        Emitter& e = c.e;
        Ref ga = mul(e, c.gout(0), share_of_a(e, c.in(0), c.in(1), is_max));
        Refs r(2);
        if (c.needs(0)) r[0] = unbroadcast(e, ga, e.shape_of(c.in(0)));
        if (c.needs(1)) r[1] = unbroadcast(e, sub(e, c.gout(0), ga), e.shape_of(c.in(1)));
        return r;
      },
      [is_max](const JvpContext& c) {
        Emitter& e = c.e;
        Ref w = share_of_a(e, c.in(0), c.in(1), is_max);  // already the output's shape
        Ref a = c.tan(0).valid() ? mul(e, c.tan(0), w) : Ref{};
        Ref b = c.tan(1).valid() ? mul(e, c.tan(1), add_scalar(e, neg(e, w), 1.0)) : Ref{};
        return Refs{accumulate(e, a, b)};
      },
      -1, 1,
      is_max ? "elementwise max(a, b), broadcasting; on ties the gradient is split evenly"
             : "elementwise min(a, b), broadcasting; on ties the gradient is split evenly", infer_float_broadcast);
}

void register_binary(OpRegistry& reg) {
  define_binary(
      reg, "pow", [](double a, double b) { return std::pow(a, b); },
      [](const GradContext& c) {
        Emitter& e = c.e;
        Refs r(2);
        if (c.needs(0))
          r[0] =
              unbroadcast(e, mul(e, c.gout(0), pow_da(e, c.in(0), c.in(1))), e.shape_of(c.in(0)));
        if (c.needs(1))
          r[1] =
              unbroadcast(e, mul(e, c.gout(0), pow_db(e, c.in(0), c.out(0))), e.shape_of(c.in(1)));
        return r;
      },
      [](const JvpContext& c) {
        Emitter& e = c.e;
        Shape s = e.shape_of(c.out(0));
        Ref a =
            c.tan(0).valid() ? expand(e, mul(e, c.tan(0), pow_da(e, c.in(0), c.in(1))), s) : Ref{};
        Ref b =
            c.tan(1).valid() ? expand(e, mul(e, c.tan(1), pow_db(e, c.in(0), c.out(0))), s) : Ref{};
        return Refs{accumulate(e, a, b)};
      },
      0.5, 2.0,
      "a ^ b, broadcasting (NaN for a < 0 with a non-integer b); d/db is taken as 0 where a == 0", infer_float_broadcast);
  def_minmax(reg, "maximum", true);
  def_minmax(reg, "minimum", false);
}

// [SECTION] Comparisons

Result<Types> infer_compare(InTypes in, const Attrs& a) {
  auto t = infer_broadcast(in, a);
  if (!t) return t;
  return Types{{DType::Bool, (*t)[0].shape}};
}

void def_compare(OpRegistry& reg, const char* name, bool (*f)(double, double), const char* doc) {
  reg.define({.name = name,
              .num_inputs = 2,
              .infer = infer_compare,
              .reference =
                  [f](std::span<const RefArray> in, const Attrs&) {
                    return std::vector<RefArray>{ref_binary(
                        in[0], in[1], [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; })};
                  },
              .samples =
                  [] {
                    std::vector<OpSample> v{
                        sample({f32({3, 4}), f32({3, 4})}, {}, "f32"),
                        sample({f32({2, 1, 3}), f32({4, 1})}, {}, "f32 both broadcast"),
                        sample({i64({3, 4}), i64({4})}, {}, "i64 row broadcast, with ties"),
                        sample({{DType::I32, {3, 4}}, {DType::I32, {3, 1}}}, {}, "i32 with ties"),
                        sample({{DType::Bool, {3, 4}}, {DType::Bool, {4}}}, {}, "bool with ties")};
                    for (OpSample& s : v) s.int_high = 3;
                    return v;
                  },
              .kind = OpKind::NonDiff,
              .doc = doc});
}

void register_compare(OpRegistry& reg) {
  def_compare(
      reg, "equal", [](double a, double b) { return a == b; }, "a == b, broadcasting: bool");
  def_compare(
      reg, "not_equal", [](double a, double b) { return a != b; }, "a != b, broadcasting: bool");
  def_compare(
      reg, "less", [](double a, double b) { return a < b; }, "a < b, broadcasting: bool");
  def_compare(
      reg, "less_equal", [](double a, double b) { return a <= b; }, "a <= b, broadcasting: bool");
  def_compare(
      reg, "greater", [](double a, double b) { return a > b; }, "a > b, broadcasting: bool");
  def_compare(
      reg, "greater_equal", [](double a, double b) { return a >= b; },
      "a >= b, broadcasting: bool");
}

// [SECTION] where

Result<Types> infer_where(InTypes in, const Attrs&) {
  if (in[0].dtype != DType::Bool) return make_error("cond must be bool, got " + type_str(in[0]));
  if (in[1].dtype != in[2].dtype)
    return make_error("a and b have different dtypes (" + type_str(in[1]) + " and " +
                      type_str(in[2]) + ")");
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (s) s = broadcast_shapes(*s, in[2].shape);
  if (!s)
    return make_error("shapes " + shape_str(in[0].shape) + " (cond), " + shape_str(in[1].shape) +
                      " (a) and " + shape_str(in[2].shape) + " (b) do not broadcast");
  return Types{{in[1].dtype, *s}};
}

void register_where(OpRegistry& reg) {
  reg.define(
      {.name = "where",
       .num_inputs = 3,
       .infer = infer_where,
       .vjp =
           [](const GradContext& c) {
             Emitter& e = c.e;
             Ref zero = scalar(e, c.gout(0), 0.0);
             Refs r(3);
             if (c.needs(1))
               r[1] = unbroadcast(e, where(e, c.in(0), c.gout(0), zero), e.shape_of(c.in(1)));
             if (c.needs(2))
               r[2] = unbroadcast(e, where(e, c.in(0), zero, c.gout(0)), e.shape_of(c.in(2)));
             return r;
           },
       .jvp =
           [](const JvpContext& c) {
             Emitter& e = c.e;
             Ref a = c.tan(1).valid() ? c.tan(1) : scalar(e, c.out(0), 0.0);
             Ref b = c.tan(2).valid() ? c.tan(2) : scalar(e, c.out(0), 0.0);
             return Refs{expand(e, where(e, c.in(0), a, b), e.shape_of(c.out(0)))};
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs&) {
             Shape s = *broadcast_shapes(*broadcast_shapes(in[0].shape, in[1].shape), in[2].shape);
             RefArray r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
             auto at = [&](size_t k, int64_t i) {
               return in[k].v[static_cast<size_t>(broadcast_index(in[k].shape, s, i))];
             };
             for (int64_t i = 0; i < numel(s); ++i)
               r.v[static_cast<size_t>(i)] = at(0, i) != 0.0 ? at(1, i) : at(2, i);
             return std::vector<RefArray>{r};
           },
       .samples =
           [] {
             ValueType b34{DType::Bool, {3, 4}}, b31{DType::Bool, {3, 1}},
                 b214{DType::Bool, {2, 1, 4}};
             return std::vector<OpSample>{
                 sample({b34, f32({3, 4}), f32({3, 4})}, {}, "same shape"),
                 sample({b31, f32({4}), f32({3, 4})}, {}, "cond and a broadcast"),
                 sample({b214, f32({3, 1}), f32({})}, {}, "all broadcast, scalar b")};
           },
       .inplace = true,  // element i of a (or b) read before element i is written
       .doc = "cond ? a : b elementwise (cond bool); all three broadcast. Gradients: to a "
              "where cond holds, to b elsewhere"});
}

}  // namespace

// [SECTION] cast

// cast lives in precision_ops.cpp with the other mixed precision op (matmul_lowp).
void register_precision_ops(OpRegistry& reg);

void register_math_ops(OpRegistry& reg) {
  register_unary(reg);
  register_backward(reg);
  register_binary(reg);
  register_compare(reg);
  register_where(reg);
  register_precision_ops(reg);
}

}  // namespace mls::ops
