// Convolution ops (NCHW): conv2d, its two gradients as ops of their own, conv_transpose2d;
// the attribute parsing and builders of engine/ops/conv.h. Pooling: conv_pool_ops.cpp.
//
// conv2d is bilinear in (x, w), and so are its gradients, so every derivative is another
// member of the family: with B(g, w) = conv2d_backward_input and W(x, g) =
// conv2d_backward_weight, <g, conv2d(x, w)> = <B(g, w), x> = <W(x, g), w>. conv_transpose2d
// is B with the output shape taken from output_padding.
#include <tuple>
#include <variant>

#include "engine/ops/conv.h"
#include "engine/ops/op_helpers.h"

namespace mls {

// [SECTION] Attributes

namespace {

std::string pair_str(const Pair2& p) {
  return std::to_string(p[0]) + "x" + std::to_string(p[1]);
}

Result<Pair2> pair_attr(const Attrs& a, const std::string& name, Pair2 def, int64_t min) {
  Pair2 r = def;
  if (const AttrValue* v = a.find(name)) {
    const auto* list = std::get_if<std::vector<int64_t>>(v);
    if (!list || list->empty() || list->size() > 2)
      return make_error("attribute '" + name + "' must be a list of one or two ints");
    r = {list->front(), list->back()};
  }
  if (r[0] < min || r[1] < min)
    return make_error("attribute '" + name + "' must be >= " + std::to_string(min) + ", got " +
                      pair_str(r));
  return r;
}

Result<int64_t> int_attr(const Attrs& a, const std::string& name, int64_t def, int64_t min) {
  int64_t r = def;
  if (const AttrValue* v = a.find(name)) {
    const auto* i = std::get_if<int64_t>(v);
    if (!i) return make_error("attribute '" + name + "' must be an int");
    r = *i;
  }
  if (r < min)
    return make_error("attribute '" + name + "' must be >= " + std::to_string(min) + ", got " +
                      std::to_string(r));
  return r;
}

}  // namespace

Result<Conv2dParams> conv2d_params(const Attrs& a) {
  Conv2dParams p;
  for (auto [name, field, min] : {std::tuple{"stride", &p.stride, 1},
                                  {"padding", &p.padding, 0},
                                  {"dilation", &p.dilation, 1},
                                  {"output_padding", &p.output_padding, 0}}) {
    auto r = pair_attr(a, name, *field, min);
    if (!r) return r.error();
    *field = *r;
  }
  auto g = int_attr(a, "groups", 1, 1);
  if (!g) return g.error();
  p.groups = *g;
  return p;
}

Result<Pool2dParams> pool2d_params(const Attrs& a) {
  Pool2dParams p;
  if (!a.has("kernel")) return make_error("missing attribute 'kernel'");
  auto k = pair_attr(a, "kernel", {1, 1}, 1);
  if (!k) return k.error();
  p.kernel = *k;
  auto s = pair_attr(a, "stride", p.kernel, 1);
  if (!s) return s.error();
  p.stride = *s;
  auto pad = pair_attr(a, "padding", {0, 0}, 0);
  if (!pad) return pad.error();
  p.padding = *pad;
  auto cip = int_attr(a, "count_include_pad", 1, 0);
  if (!cip) return cip.error();
  p.count_include_pad = *cip != 0;
  return p;
}

Attrs conv2d_attrs(const Conv2dParams& p, bool transpose) {
  auto v = [](const Pair2& x) { return std::vector<int64_t>{x[0], x[1]}; };
  Attrs a{{"stride", v(p.stride)},
          {"padding", v(p.padding)},
          {"dilation", v(p.dilation)},
          {"groups", p.groups}};
  if (transpose) a.set("output_padding", v(p.output_padding));
  return a;
}

Attrs pool2d_attrs(const Pool2dParams& p, bool avg) {
  auto v = [](const Pair2& x) { return std::vector<int64_t>{x[0], x[1]}; };
  Pair2 stride{p.stride[0] > 0 ? p.stride[0] : p.kernel[0],
               p.stride[1] > 0 ? p.stride[1] : p.kernel[1]};
  Attrs a{{"kernel", v(p.kernel)}, {"stride", v(stride)}, {"padding", v(p.padding)}};
  if (avg) a.set("count_include_pad", int64_t{p.count_include_pad});
  return a;
}

// [SECTION] Builders

Ref conv2d(Emitter& e, Ref x, Ref w, const Conv2dParams& p) {
  return e.emit1("conv2d", {x, w}, conv2d_attrs(p));
}

Ref conv_transpose2d(Emitter& e, Ref x, Ref w, const Conv2dParams& p) {
  return e.emit1("conv_transpose2d", {x, w}, conv2d_attrs(p, true));
}

Ref max_pool2d(Emitter& e, Ref x, const Pool2dParams& p) {
  return e.emit1("max_pool2d", {x}, pool2d_attrs(p));
}

Ref avg_pool2d(Emitter& e, Ref x, const Pool2dParams& p) {
  return e.emit1("avg_pool2d", {x}, pool2d_attrs(p, true));
}

Ref global_avg_pool(Emitter& e, Ref x, bool keepdims) {
  return mean(e, x, {2, 3}, keepdims);
}

namespace ops {

// [SECTION] Type inference

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}


// A 4-D shape attribute (input_shape, weight_shape).
Result<Shape> shape_attr(const Attrs& a, const std::string& name) {
  const AttrValue* v = a.find(name);
  const auto* s = v ? std::get_if<std::vector<int64_t>>(v) : nullptr;
  if (!s || s->size() != 4)
    return make_error("attribute '" + name + "' must be a 4-D shape [N,C,H,W] or [O,C,kh,kw]");
  for (int64_t d : *s)
    if (d < 0)
      return make_error("attribute '" + name + "' has a negative extent: " + shape_str(*s));
  return *s;
}

// The conv2d output shape for an input xs and a weight ws, or what is wrong with them.
Result<Shape> conv_out_shape(const Shape& xs, const Shape& ws, const Conv2dParams& p) {
  if (xs.size() != 4) return make_error("expects an input [N,C,H,W], got " + shape_str(xs));
  if (ws.size() != 4 || ws[2] < 1 || ws[3] < 1)
    return make_error("expects a weight [O,C/groups,kh,kw], got " + shape_str(ws));
  if (ws[0] % p.groups != 0)
    return make_error("the weight's " + str(ws[0]) + " output channels do not split into " +
                      str(p.groups) + " groups");
  if (xs[1] != ws[1] * p.groups)
    return make_error("input has " + str(xs[1]) + " channels but the weight expects " +
                      str(ws[1] * p.groups) + " (groups " + str(p.groups) + ")");
  int64_t oh = window_out_size(xs[2], ws[2], p.stride[0], p.padding[0], p.dilation[0]);
  int64_t ow = window_out_size(xs[3], ws[3], p.stride[1], p.padding[1], p.dilation[1]);
  if (oh < 1 || ow < 1)
    return make_error("the " + pair_str({xs[2], xs[3]}) + " input padded by " +
                      pair_str(p.padding) + " is smaller than the " + pair_str({ws[2], ws[3]}) +
                      " kernel dilated by " + pair_str(p.dilation));
  return Shape{xs[0], ws[0], oh, ow};
}

Result<Types> infer_conv2d(InTypes in, const Attrs& a) {
  auto p = conv2d_params(a);
  if (!p) return p.error();
  if (auto f = require_float(in); !f) return f.error();
  auto y = conv_out_shape(in[0].shape, in[1].shape, *p);
  if (!y) return y.error();
  return Types{{in[0].dtype, *y}};
}

// Checks that g is the conv2d output of (xs, ws).
Result<void> check_grad(const Shape& g, const Shape& xs, const Shape& ws, const Conv2dParams& p) {
  auto y = conv_out_shape(xs, ws, p);
  if (!y) return y.error();
  if (*y != g)
    return make_error("gradient " + shape_str(g) + " is not the shape of the conv2d output " +
                      shape_str(*y) + " of input " + shape_str(xs) + " and weight " +
                      shape_str(ws));
  return {};
}

Result<Types> infer_backward_input(InTypes in, const Attrs& a) {  // (g, w)
  auto p = conv2d_params(a);
  if (!p) return p.error();
  auto xs = shape_attr(a, "input_shape");
  if (!xs) return xs.error();
  if (auto f = require_float(in); !f) return f.error();
  if (auto ok = check_grad(in[0].shape, *xs, in[1].shape, *p); !ok) return ok.error();
  return Types{{in[0].dtype, *xs}};
}

Result<Types> infer_backward_weight(InTypes in, const Attrs& a) {  // (x, g)
  auto p = conv2d_params(a);
  if (!p) return p.error();
  auto ws = shape_attr(a, "weight_shape");
  if (!ws) return ws.error();
  if (auto f = require_float(in); !f) return f.error();
  if (auto ok = check_grad(in[1].shape, in[0].shape, *ws, *p); !ok) return ok.error();
  return Types{{in[0].dtype, *ws}};
}

Result<Types> infer_conv_transpose2d(InTypes in, const Attrs& a) {
  auto p = conv2d_params(a);
  if (!p) return p.error();
  if (auto f = require_float(in); !f) return f.error();
  const Shape &xs = in[0].shape, &ws = in[1].shape;
  if (xs.size() != 4) return make_error("expects an input [N,Cin,H,W], got " + shape_str(xs));
  if (ws.size() != 4 || ws[2] < 1 || ws[3] < 1)
    return make_error("expects a weight [Cin,Cout/groups,kh,kw], got " + shape_str(ws));
  if (xs[1] != ws[0])
    return make_error("input has " + str(xs[1]) + " channels but the weight expects " + str(ws[0]));
  if (ws[0] % p->groups != 0)
    return make_error("the weight's " + str(ws[0]) + " input channels do not split into " +
                      str(p->groups) + " groups");
  Shape y{xs[0], ws[1] * p->groups, 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    // Where output_padding reaches the stride, the adjoint would be no conv2d (PyTorch also
    // allows output_padding < dilation; this engine does not).
    if (p->output_padding[d] >= p->stride[d])
      return make_error("output_padding " + pair_str(p->output_padding) +
                        " must be smaller than the stride " + pair_str(p->stride));
    y[d + 2] = (xs[d + 2] - 1) * p->stride[d] - 2 * p->padding[d] +
               p->dilation[d] * (ws[d + 2] - 1) + p->output_padding[d] + 1;
  }
  if (y[2] < 1 || y[3] < 1)
    return make_error("padding " + pair_str(p->padding) + " leaves no output for the " +
                      pair_str({xs[2], xs[3]}) + " input");
  return Types{{in[0].dtype, y}};
}

// [SECTION] Derivatives

Ref backward_input(Emitter& e, Ref g, Ref w, const Shape& input_shape, const Conv2dParams& p) {
  Attrs a = conv2d_attrs(p);
  a.set("input_shape", input_shape);
  return e.emit1("conv2d_backward_input", {g, w}, a);
}

Ref backward_weight(Emitter& e, Ref x, Ref g, const Shape& weight_shape, const Conv2dParams& p) {
  Attrs a = conv2d_attrs(p);
  a.set("weight_shape", weight_shape);
  return e.emit1("conv2d_backward_weight", {x, g}, a);
}

// f(a, b) bilinear: its tangent is f(ta, b) + f(a, tb), with the node's own attributes.
Refs bilinear_jvp(const JvpContext& c, std::string_view op) {
  Ref l = c.tan(0).valid() ? c.e.emit1(op, {c.tan(0), c.in(1)}, c.attrs) : Ref{};
  Ref r = c.tan(1).valid() ? c.e.emit1(op, {c.in(0), c.tan(1)}, c.attrs) : Ref{};
  return {accumulate(c.e, l, r)};
}

Refs conv2d_vjp(const GradContext& c) {  // (x, w)
  Conv2dParams p = *conv2d_params(c.attrs);
  Refs r(2);
  if (c.needs(0)) r[0] = backward_input(c.e, c.gout(0), c.in(1), c.e.shape_of(c.in(0)), p);
  if (c.needs(1)) r[1] = backward_weight(c.e, c.in(0), c.gout(0), c.e.shape_of(c.in(1)), p);
  return r;
}

Refs backward_input_vjp(const GradContext& c) {  // (g, w) -> dx; G is x-shaped
  Conv2dParams p = *conv2d_params(c.attrs);
  Refs r(2);
  if (c.needs(0)) r[0] = conv2d(c.e, c.gout(0), c.in(1), p);
  if (c.needs(1)) r[1] = backward_weight(c.e, c.gout(0), c.in(0), c.e.shape_of(c.in(1)), p);
  return r;
}

Refs backward_weight_vjp(const GradContext& c) {  // (x, g) -> dw; G is w-shaped
  Conv2dParams p = *conv2d_params(c.attrs);
  Refs r(2);
  if (c.needs(0)) r[0] = backward_input(c.e, c.in(1), c.gout(0), c.e.shape_of(c.in(0)), p);
  if (c.needs(1)) r[1] = conv2d(c.e, c.in(0), c.gout(0), p);
  return r;
}

Refs conv_transpose2d_vjp(const GradContext& c) {  // (x, w) -> y; conv2d(y, w) is x-shaped
  Conv2dParams p = *conv2d_params(c.attrs);
  Refs r(2);
  if (c.needs(0)) r[0] = conv2d(c.e, c.gout(0), c.in(1), p);
  if (c.needs(1)) r[1] = backward_weight(c.e, c.gout(0), c.in(0), c.e.shape_of(c.in(1)), p);
  return r;
}

// [SECTION] float64 references

RefArray zeros(const Shape& s) {
  return {s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
}

// fn(xi, wi, yi) for every output element of a convolution and every kernel tap of it that
// lands inside the input (flat offsets into x, w and y): the loop nest of every reference.
template <typename Fn>
void for_each_tap(const Shape& xs, const Shape& ws, const Shape& ys, const Conv2dParams& p, Fn fn) {
  int64_t og = ws[0] / p.groups;
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t o = 0; o < ys[1]; ++o)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow)
          for (int64_t ci = 0; ci < ws[1]; ++ci)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j) {
                int64_t ih = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
                int64_t iw = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
                if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                int64_t ch = o / og * ws[1] + ci;
                fn(((n * xs[1] + ch) * xs[2] + ih) * xs[3] + iw,
                   ((o * ws[1] + ci) * ws[2] + i) * ws[3] + j,
                   ((n * ys[1] + o) * ys[2] + oh) * ys[3] + ow);
              }
}

// The output shape of a reference's op, through its own type inference.
Shape out_shape(const InferFn& infer, std::span<const RefArray> in, const Attrs& a) {
  Types t;
  for (const RefArray& r : in) t.push_back(f32(r.shape));
  return (*infer(t, a))[0].shape;
}

std::vector<RefArray> conv2d_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &x = in[0], &w = in[1];
  RefArray y = zeros(out_shape(infer_conv2d, in, a));
  for_each_tap(x.shape, w.shape, y.shape, *conv2d_params(a),
               [&](int64_t xi, int64_t wi, int64_t yi) { y.v[yi] += x.v[xi] * w.v[wi]; });
  return {y};
}

std::vector<RefArray> backward_input_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &g = in[0], &w = in[1];
  RefArray dx = zeros(*shape_attr(a, "input_shape"));
  for_each_tap(dx.shape, w.shape, g.shape, *conv2d_params(a),
               [&](int64_t xi, int64_t wi, int64_t yi) { dx.v[xi] += g.v[yi] * w.v[wi]; });
  return {dx};
}

std::vector<RefArray> backward_weight_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &x = in[0], &g = in[1];
  RefArray dw = zeros(*shape_attr(a, "weight_shape"));
  for_each_tap(x.shape, dw.shape, g.shape, *conv2d_params(a),
               [&](int64_t xi, int64_t wi, int64_t yi) { dw.v[wi] += x.v[xi] * g.v[yi]; });
  return {dw};
}

std::vector<RefArray> conv_transpose2d_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &x = in[0], &w = in[1];
  RefArray y = zeros(out_shape(infer_conv_transpose2d, in, a));
  for_each_tap(y.shape, w.shape, x.shape, *conv2d_params(a),
               [&](int64_t yi, int64_t wi, int64_t xi) { y.v[yi] += x.v[xi] * w.v[wi]; });
  return {y};
}

// [SECTION] Samples

using Ints = std::vector<int64_t>;

Attrs conv_sample_attrs(Ints stride, Ints padding, Ints dilation, int64_t groups) {
  return {{"stride", std::move(stride)},
          {"padding", std::move(padding)},
          {"dilation", std::move(dilation)},
          {"groups", groups}};
}

// Each conv2d case as (x, w, attrs, note); the gradient ops' samples derive from them.
struct ConvCase {
  Shape x, w;
  Attrs attrs;
  std::string note;
};

std::vector<ConvCase> conv_cases() {
  return {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, {}, "defaults"},
      {{2, 3, 5, 5},
       {4, 3, 3, 3},
       conv_sample_attrs({2, 2}, {1, 1}, {1, 1}, 1),
       "stride 2, padding 1"},
      {{2, 3, 6, 5}, {4, 3, 3, 2}, conv_sample_attrs({1, 1}, {2, 1}, {2, 2}, 1), "dilation 2"},
      {{2, 4, 5, 5}, {4, 2, 3, 3}, conv_sample_attrs({1, 1}, {1, 1}, {1, 1}, 2), "groups 2"},
      {{2, 3, 6, 5},
       {4, 3, 3, 3},
       conv_sample_attrs({2, 1}, {0, 1}, {1, 1}, 1),
       "stride 2x1, uneven"},
      {{2, 3, 4, 4}, {5, 3, 1, 1}, {{"stride", Ints{1}}}, "1x1"},
  };
}

std::vector<OpSample> conv2d_samples() {
  std::vector<OpSample> v;
  for (ConvCase& c : conv_cases()) v.push_back(sample({f32(c.x), f32(c.w)}, c.attrs, c.note));
  return v;
}

std::vector<OpSample> backward_input_samples() {
  std::vector<OpSample> v;
  for (ConvCase& c : conv_cases()) {
    Shape g = *conv_out_shape(c.x, c.w, *conv2d_params(c.attrs));
    c.attrs.set("input_shape", c.x);
    v.push_back(sample({f32(g), f32(c.w)}, c.attrs, c.note));
  }
  return v;
}

std::vector<OpSample> backward_weight_samples() {
  std::vector<OpSample> v;
  for (ConvCase& c : conv_cases()) {
    Shape g = *conv_out_shape(c.x, c.w, *conv2d_params(c.attrs));
    c.attrs.set("weight_shape", c.w);
    v.push_back(sample({f32(c.x), f32(g)}, c.attrs, c.note));
  }
  return v;
}

std::vector<OpSample> conv_transpose2d_samples() {
  Attrs s2 = conv_sample_attrs({2, 2}, {1, 1}, {1, 1}, 1);
  s2.set("output_padding", Ints{1, 1});
  Attrs g2 = conv_sample_attrs({2, 1}, {0, 1}, {1, 2}, 2);
  g2.set("output_padding", Ints{1, 0});
  return {
      sample({f32({2, 4, 3, 3}), f32({4, 3, 3, 3})}, {}, "defaults"),
      sample({f32({2, 4, 3, 3}), f32({4, 3, 3, 3})}, s2, "stride 2, padding 1, output_padding 1"),
      sample({f32({2, 4, 3, 4}), f32({4, 2, 2, 3})}, g2, "groups 2, dilation 1x2")};
}

}  // namespace

void register_pool_ops(OpRegistry& reg);                // conv_pool_ops.cpp
void register_conv_pool_backward_ops(OpRegistry& reg);  // conv_pool_backward_ops.cpp

void register_conv_ops(OpRegistry& reg) {
  std::vector<AttrSpec> conv_attrs{{"stride", AttrKind::Ints, false},
                                   {"padding", AttrKind::Ints, false},
                                   {"dilation", AttrKind::Ints, false},
                                   {"groups", AttrKind::Int, false}};
  auto with = [&](AttrSpec extra) {
    auto v = conv_attrs;
    v.push_back(std::move(extra));
    return v;
  };
  reg.define({.name = "conv2d",
              .num_inputs = 2,
              .attrs = conv_attrs,
              .infer = infer_conv2d,
              .vjp = conv2d_vjp,
              .jvp = [](const JvpContext& c) { return bilinear_jvp(c, "conv2d"); },
              .reference = conv2d_ref,
              .samples = conv2d_samples,
              .doc = "2-D cross-correlation of x [N,C,H,W] with w [O,C/groups,kh,kw] -> "
                     "[N,O,OH,OW]; stride, padding, dilation (pairs) and groups; no bias",
              .flops = conv_flops});
  reg.define({.name = "conv2d_backward_input",
              .num_inputs = 2,
              .attrs = with({"input_shape", AttrKind::Ints}),
              .infer = infer_backward_input,
              .vjp = backward_input_vjp,
              .jvp = [](const JvpContext& c) { return bilinear_jvp(c, "conv2d_backward_input"); },
              .reference = backward_input_ref,
              .samples = backward_input_samples,
              .doc = "the gradient of conv2d in its input: (g [N,O,OH,OW], w) -> [N,C,H,W] "
                     "(input_shape); the math of conv_transpose2d",
              .flops = conv_flops_per_input});
  reg.define({.name = "conv2d_backward_weight",
              .num_inputs = 2,
              .attrs = with({"weight_shape", AttrKind::Ints}),
              .infer = infer_backward_weight,
              .vjp = backward_weight_vjp,
              .jvp = [](const JvpContext& c) { return bilinear_jvp(c, "conv2d_backward_weight"); },
              .reference = backward_weight_ref,
              .samples = backward_weight_samples,
              .doc = "the gradient of conv2d in its weight: (x, g [N,O,OH,OW]) -> "
                     "[O,C/groups,kh,kw] (weight_shape)",
              .flops = conv_backward_weight_flops});
  reg.define({.name = "conv_transpose2d",
              .num_inputs = 2,
              .attrs = with({"output_padding", AttrKind::Ints, false}),
              .infer = infer_conv_transpose2d,
              .vjp = conv_transpose2d_vjp,
              .jvp = [](const JvpContext& c) { return bilinear_jvp(c, "conv_transpose2d"); },
              .reference = conv_transpose2d_ref,
              .samples = conv_transpose2d_samples,
              .doc = "transposed convolution of x [N,Cin,H,W] with w [Cin,Cout/groups,kh,kw] -> "
                     "[N,Cout,(H-1)*stride-2*padding+dilation*(kh-1)+output_padding+1,...]",
              .flops = conv_flops_per_input});
  register_pool_ops(reg);
  register_conv_pool_backward_ops(reg);
}

}  // namespace ops
}  // namespace mls
