// Elementwise ops: unary, binary with numpy broadcasting, and scalar forms.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

namespace {

Refs one(Ref r) { return Refs{r}; }

void def_unary(OpRegistry& reg, const char* name, std::function<double(double)> f, VjpFn vjp,
               JvpFn jvp, OpSample s, const char* doc) {
  reg.define({.name = name,
              .infer = infer_same,
              .vjp = std::move(vjp),
              .jvp = std::move(jvp),
              .reference = [f](std::span<const RefArray> in, const Attrs&) {
                return std::vector<RefArray>{ref_unary(in[0], f)};
              },
              .samples = [s] { return std::vector<OpSample>{s}; },
              .inplace = true,  // elementwise: may write over an input of its type (OpDef::inplace)
              .doc = doc});
}


}  // namespace

void register_elementwise_ops(OpRegistry& reg) {
  OpSample s = sample({f32({3, 5})});
  OpSample away = s;
  away.min_abs = 0.05;
  OpSample positive = s;
  positive.lo = 0.5;
  positive.hi = 2.0;

  def_unary(
      reg, "neg", [](double x) { return -x; },
      [](const GradContext& c) { return one(neg(c.e, c.gout(0))); },
      [](const JvpContext& c) { return one(neg(c.e, c.tan(0))); }, s, "y = -x");
  def_unary(
      reg, "exp", [](double x) { return std::exp(x); },
      [](const GradContext& c) { return one(mul(c.e, c.gout(0), c.out(0))); },
      [](const JvpContext& c) { return one(mul(c.e, c.tan(0), c.out(0))); }, s, "y = e^x");
  def_unary(
      reg, "log", [](double x) { return std::log(x); },
      [](const GradContext& c) { return one(div(c.e, c.gout(0), c.in(0))); },
      [](const JvpContext& c) { return one(div(c.e, c.tan(0), c.in(0))); }, positive,
      "natural logarithm");
  def_unary(
      reg, "relu", [](double x) { return x > 0 ? x : 0.0; },
      // Reads the output, not the input (y > 0 exactly where x > 0): then x need not be kept
      // for the backward pass, as in PyTorch, which halves what a ReLU layer stores.
      [](const GradContext& c) { return one(c.e.emit1("relu_backward", {c.gout(0), c.out(0)})); },
      [](const JvpContext& c) { return one(c.e.emit1("relu_backward", {c.tan(0), c.in(0)})); },
      away, "y = max(x, 0)");
  def_unary(
      reg, "tanh", [](double x) { return std::tanh(x); },
      [](const GradContext& c) {  // dy * (1 - y^2)
        Ref y = c.out(0);
        return one(mul(c.e, c.gout(0), add_scalar(c.e, neg(c.e, mul(c.e, y, y)), 1.0)));
      },
      [](const JvpContext& c) {
        Ref y = c.out(0);
        return one(mul(c.e, c.tan(0), add_scalar(c.e, neg(c.e, mul(c.e, y, y)), 1.0)));
      },
      s, "hyperbolic tangent");
  // sin and cos over several periods, so every quadrant of a backend's range reduction runs.
  OpSample periods = s;
  periods.lo = -7.0;
  periods.hi = 7.0;
  def_unary(
      reg, "sin", [](double x) { return std::sin(x); },
      [](const GradContext& c) { return one(mul(c.e, c.gout(0), c.e.emit1("cos", {c.in(0)}))); },
      [](const JvpContext& c) { return one(mul(c.e, c.tan(0), c.e.emit1("cos", {c.in(0)}))); },
      periods, "sine (radians)");
  def_unary(
      reg, "cos", [](double x) { return std::cos(x); },
      [](const GradContext& c) {  // -dy * sin(x)
        return one(neg(c.e, mul(c.e, c.gout(0), c.e.emit1("sin", {c.in(0)}))));
      },
      [](const JvpContext& c) {
        return one(neg(c.e, mul(c.e, c.tan(0), c.e.emit1("sin", {c.in(0)}))));
      },
      periods, "cosine (radians)");
  def_unary(
      reg, "sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
      [](const GradContext& c) {  // dy * y * (1 - y)
        Ref y = c.out(0);
        return one(mul(c.e, c.gout(0), mul(c.e, y, add_scalar(c.e, neg(c.e, y), 1.0))));
      },
      [](const JvpContext& c) {
        Ref y = c.out(0);
        return one(mul(c.e, c.tan(0), mul(c.e, y, add_scalar(c.e, neg(c.e, y), 1.0))));
      },
      s, "logistic function");

  // relu_backward(dy, x) = x > 0 ? dy : 0. Linear in dy; its derivative in x is zero a.e.
  reg.define({.name = "relu_backward",
              .num_inputs = 2,
              .infer =
                  [](InTypes in, const Attrs&) -> Result<Types> {
                if (!(in[0] == in[1])) return make_error("dy and x must have the same type");
                return Types{in[0]};
              },
              .vjp = [](const GradContext& c) {
                return Refs{c.e.emit1("relu_backward", {c.gout(0), c.in(1)}), Ref{}};
              },
              .jvp = [](const JvpContext& c) {
                return Refs{c.tan(0).valid() ? c.e.emit1("relu_backward", {c.tan(0), c.in(1)}) : Ref{}};
              },
              .reference = [](std::span<const RefArray> in, const Attrs&) {
                return std::vector<RefArray>{
                    ref_binary(in[0], in[1], [](double dy, double x) { return x > 0 ? dy : 0.0; })};
              },
              .samples = [] {
                OpSample a = sample({f32({4, 6}), f32({4, 6})});
                a.min_abs = 0.05;
                return std::vector<OpSample>{a};
              },
              .inplace = true,
              .doc = "the gradient of relu: dy where x > 0, else 0"});

  define_binary(
      reg, "add", [](double a, double b) { return a + b; },
      [](const GradContext& c) {
        return Refs{unbroadcast(c.e, c.gout(0), c.e.shape_of(c.in(0))),
                    unbroadcast(c.e, c.gout(0), c.e.shape_of(c.in(1)))};
      },
      [](const JvpContext& c) {
        Shape s = c.e.shape_of(c.out(0));
        Ref a = c.tan(0).valid() ? expand(c.e, c.tan(0), s) : Ref{};
        Ref b = c.tan(1).valid() ? expand(c.e, c.tan(1), s) : Ref{};
        return Refs{accumulate(c.e, a, b)};
      },
      -1, 1, "a + b, broadcasting");
  define_binary(
      reg, "sub", [](double a, double b) { return a - b; },
      [](const GradContext& c) {
        return Refs{unbroadcast(c.e, c.gout(0), c.e.shape_of(c.in(0))),
                    unbroadcast(c.e, neg(c.e, c.gout(0)), c.e.shape_of(c.in(1)))};
      },
      [](const JvpContext& c) {
        Shape s = c.e.shape_of(c.out(0));
        Ref a = c.tan(0).valid() ? expand(c.e, c.tan(0), s) : Ref{};
        Ref b = c.tan(1).valid() ? expand(c.e, neg(c.e, c.tan(1)), s) : Ref{};
        return Refs{accumulate(c.e, a, b)};
      },
      -1, 1, "a - b, broadcasting");
  define_binary(
      reg, "mul", [](double a, double b) { return a * b; },
      [](const GradContext& c) {
        return Refs{unbroadcast(c.e, mul(c.e, c.gout(0), c.in(1)), c.e.shape_of(c.in(0))),
                    unbroadcast(c.e, mul(c.e, c.gout(0), c.in(0)), c.e.shape_of(c.in(1)))};
      },
      [](const JvpContext& c) {
        Shape s = c.e.shape_of(c.out(0));
        Ref a = c.tan(0).valid() ? expand(c.e, mul(c.e, c.tan(0), c.in(1)), s) : Ref{};
        Ref b = c.tan(1).valid() ? expand(c.e, mul(c.e, c.in(0), c.tan(1)), s) : Ref{};
        return Refs{accumulate(c.e, a, b)};
      },
      -1, 1, "a * b, broadcasting");
  define_binary(
      reg, "div", [](double a, double b) { return a / b; },
      [](const GradContext& c) {  // d/da = 1/b; d/db = -a/b^2 = -y/b
        Ref ga = div(c.e, c.gout(0), c.in(1));
        Ref gb = neg(c.e, mul(c.e, ga, div(c.e, c.in(0), c.in(1))));
        return Refs{unbroadcast(c.e, ga, c.e.shape_of(c.in(0))),
                    unbroadcast(c.e, gb, c.e.shape_of(c.in(1)))};
      },
      [](const JvpContext& c) {
        Shape s = c.e.shape_of(c.out(0));
        Ref a = c.tan(0).valid() ? expand(c.e, div(c.e, c.tan(0), c.in(1)), s) : Ref{};
        Ref b = c.tan(1).valid()
                    ? expand(c.e, neg(c.e, mul(c.e, c.tan(1), div(c.e, c.out(0), c.in(1)))), s)
                    : Ref{};
        return Refs{accumulate(c.e, a, b)};
      },
      0.5, 2.0, "a / b, broadcasting");

  reg.define({.name = "scale",
              .attrs = {{"alpha", AttrKind::Float}},
              .infer = infer_same,
              .vjp = [](const GradContext& c) {
                return one(scale(c.e, c.gout(0), c.attrs.get_float("alpha")));
              },
              .jvp = [](const JvpContext& c) {
                return one(scale(c.e, c.tan(0), c.attrs.get_float("alpha")));
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                double alpha = a.get_float("alpha");
                return std::vector<RefArray>{ref_unary(in[0], [alpha](double x) { return alpha * x; })};
              },
              .samples = [] { return std::vector<OpSample>{sample({f32({2, 7})}, {{"alpha", -1.5}})}; },
              .inplace = true,
              .doc = "y = alpha * x"});
  reg.define({.name = "add_scalar",
              .attrs = {{"value", AttrKind::Float}},
              .infer = infer_same,
              .vjp = [](const GradContext& c) { return one(c.gout(0)); },
              .jvp = [](const JvpContext& c) { return one(c.tan(0)); },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                double v = a.get_float("value");
                return std::vector<RefArray>{ref_unary(in[0], [v](double x) { return x + v; })};
              },
              .samples = [] { return std::vector<OpSample>{sample({f32({2, 7})}, {{"value", 0.25}})}; },
              .inplace = true,
              .doc = "y = x + value"});
}

}  // namespace mls::ops
