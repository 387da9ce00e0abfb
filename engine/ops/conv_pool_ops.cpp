// Pooling ops (NCHW): max_pool2d with max_pool2d_backward and max_pool2d_gather, avg_pool2d
// with avg_pool2d_backward.
//
// max_pool2d_relu_backward(g, y) is relu_backward(max_pool2d_backward(g, y), y), for the pool
// of a relu's output y (the pool-gradient fusion pass makes it of a step graph after autodiff):
// each window's gradient reaches its argmax only where that is > 0, and the [N,C,H,W] gradient
// is written once instead of written, read and written again.
//
// max_pool2d_backward (g added at each window's argmax of x) and max_pool2d_gather (t read
// at each window's argmax of x) are linear in their first input and adjoint to each other;
// the argmax does not move under small changes of x away from ties, so their derivative in x
// is zero. avg_pool2d and avg_pool2d_backward are an adjoint linear pair too. Windows never
// lie wholly in the padding (padding <= kernel / 2), so every window has an argmax.
#include "engine/ops/conv.h"
#include "engine/ops/op_helpers.h"

namespace mls::ops {

namespace {

std::string pair_str(const Pair2& p) {
  return std::to_string(p[0]) + "x" + std::to_string(p[1]);
}

// [SECTION] Type inference

Result<Shape> pool_out_shape(const Shape& xs, const Pool2dParams& p) {
  if (xs.size() != 4) return make_error("expects an input [N,C,H,W], got " + shape_str(xs));
  for (size_t d = 0; d < 2; ++d)
    if (2 * p.padding[d] > p.kernel[d])
      return make_error("padding " + pair_str(p.padding) + " must be at most half the " +
                        pair_str(p.kernel) + " window");
  int64_t oh = window_out_size(xs[2], p.kernel[0], p.stride[0], p.padding[0]);
  int64_t ow = window_out_size(xs[3], p.kernel[1], p.stride[1], p.padding[1]);
  if (oh < 1 || ow < 1)
    return make_error("the " + pair_str({xs[2], xs[3]}) + " input padded by " +
                      pair_str(p.padding) + " is smaller than the " + pair_str(p.kernel) +
                      " window");
  return Shape{xs[0], xs[1], oh, ow};
}


// The pooled shape of `xs`, checked against `g` when given (a gradient or a tangent).
Result<Shape> pooled(const Shape& xs, const Attrs& a, const Shape* g = nullptr) {
  auto p = pool2d_params(a);
  if (!p) return p.error();
  auto y = pool_out_shape(xs, *p);
  if (y && g && *g != *y)
    return make_error("gradient " + shape_str(*g) + " is not the shape of the pooled output " +
                      shape_str(*y) + " of input " + shape_str(xs));
  return y;
}

Result<Types> infer_pool(InTypes in, const Attrs& a) {  // (x) -> y
  if (auto f = require_float(in); !f) return f.error();
  auto y = pooled(in[0].shape, a);
  if (!y) return y.error();
  return Types{{in[0].dtype, *y}};
}

Result<Types> infer_max_backward(InTypes in, const Attrs& a) {  // (g, x) -> dx
  if (auto f = require_float(in); !f) return f.error();
  auto y = pooled(in[1].shape, a, &in[0].shape);
  if (!y) return y.error();
  return Types{in[1]};
}

Result<Types> infer_max_gather(InTypes in, const Attrs& a) {  // (t, x) -> y
  if (auto f = require_float(in); !f) return f.error();
  if (in[0].shape != in[1].shape)
    return make_error("t " + shape_str(in[0].shape) + " and x " + shape_str(in[1].shape) +
                      " differ in shape");
  auto y = pooled(in[1].shape, a);
  if (!y) return y.error();
  return Types{{in[0].dtype, *y}};
}

Result<Types> infer_avg_backward(InTypes in, const Attrs& a) {  // (g) -> dx
  if (auto f = require_float(in); !f) return f.error();
  const AttrValue* v = a.find("input_shape");
  const auto* xs = v ? std::get_if<std::vector<int64_t>>(v) : nullptr;
  if (!xs || xs->size() != 4)
    return make_error("attribute 'input_shape' must be a shape [N,C,H,W]");
  auto y = pooled(*xs, a, &in[0].shape);
  if (!y) return y.error();
  return Types{{in[0].dtype, *xs}};
}

// [SECTION] Derivatives

Ref max_backward(Emitter& e, Ref g, Ref x, const Attrs& a) {
  return e.emit1("max_pool2d_backward", {g, x}, pool2d_attrs(*pool2d_params(a)));
}
Ref max_gather(Emitter& e, Ref t, Ref x, const Attrs& a) {
  return e.emit1("max_pool2d_gather", {t, x}, pool2d_attrs(*pool2d_params(a)));
}
Ref avg_backward(Emitter& e, Ref g, const Shape& input_shape, const Attrs& a) {
  Attrs b = pool2d_attrs(*pool2d_params(a), true);
  b.set("input_shape", input_shape);
  return e.emit1("avg_pool2d_backward", {g}, b);
}

// [SECTION] float64 references

// fn(yi, taps) for every pooled element, with the flat input offsets of its window that lie
// inside the input, in row-major order (the first of equal maxima wins, as in the kernels).
template <typename Fn>
void for_each_window(const Shape& xs, const Shape& ys, const Pool2dParams& p, Fn fn) {
  std::vector<int64_t> taps;
  for (int64_t plane = 0; plane < ys[0] * ys[1]; ++plane)
    for (int64_t oh = 0; oh < ys[2]; ++oh)
      for (int64_t ow = 0; ow < ys[3]; ++ow) {
        taps.clear();
        for (int64_t i = 0; i < p.kernel[0]; ++i)
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            int64_t ih = oh * p.stride[0] - p.padding[0] + i;
            int64_t iw = ow * p.stride[1] - p.padding[1] + j;
            if (ih >= 0 && ih < xs[2] && iw >= 0 && iw < xs[3])
              taps.push_back((plane * xs[2] + ih) * xs[3] + iw);
          }
        fn((plane * ys[2] + oh) * ys[3] + ow, taps);
      }
}

int64_t argmax(const std::vector<double>& x, const std::vector<int64_t>& taps) {
  int64_t best = taps.front();
  for (int64_t t : taps)
    if (x[t] > x[best]) best = t;
  return best;
}

RefArray zeros(const Shape& s) {
  return {s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
}

std::vector<RefArray> max_pool_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray& x = in[0];
  RefArray y = zeros(*pooled(x.shape, a));
  for_each_window(
      x.shape, y.shape, *pool2d_params(a),
      [&](int64_t yi, const std::vector<int64_t>& taps) { y.v[yi] = x.v[argmax(x.v, taps)]; });
  return {y};
}

std::vector<RefArray> max_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &g = in[0], &x = in[1];
  RefArray dx = zeros(x.shape);
  for_each_window(
      x.shape, g.shape, *pool2d_params(a),
      [&](int64_t yi, const std::vector<int64_t>& taps) { dx.v[argmax(x.v, taps)] += g.v[yi]; });
  return {dx};
}

// Counted as the two nodes it stands for (max_pool2d_backward and relu_backward, one FLOP an
// element each), so a step's count does not change with the fusion.
double max_relu_backward_flops(std::span<const ValueType>, std::span<const ValueType> out,
                               const Attrs&) {
  return 2.0 * static_cast<double>(numel(out[0].shape));
}

std::vector<RefArray> max_relu_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  std::vector<RefArray> r = max_backward_ref(in, a);
  for (size_t i = 0; i < r[0].v.size(); ++i)
    if (!(in[1].v[i] > 0)) r[0].v[i] = 0;
  return r;
}

std::vector<RefArray> max_gather_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &t = in[0], &x = in[1];
  RefArray y = zeros(*pooled(x.shape, a));
  for_each_window(
      x.shape, y.shape, *pool2d_params(a),
      [&](int64_t yi, const std::vector<int64_t>& taps) { y.v[yi] = t.v[argmax(x.v, taps)]; });
  return {y};
}

double divisor(const Pool2dParams& p, const std::vector<int64_t>& taps) {
  return p.count_include_pad ? static_cast<double>(p.kernel[0] * p.kernel[1])
                             : static_cast<double>(taps.size());
}

std::vector<RefArray> avg_pool_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray& x = in[0];
  Pool2dParams p = *pool2d_params(a);
  RefArray y = zeros(*pooled(x.shape, a));
  for_each_window(x.shape, y.shape, p, [&](int64_t yi, const std::vector<int64_t>& taps) {
    for (int64_t t : taps) y.v[yi] += x.v[t] / divisor(p, taps);
  });
  return {y};
}

std::vector<RefArray> avg_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray& g = in[0];
  Pool2dParams p = *pool2d_params(a);
  RefArray dx = zeros(a.get_ints("input_shape"));
  for_each_window(dx.shape, g.shape, p, [&](int64_t yi, const std::vector<int64_t>& taps) {
    for (int64_t t : taps) dx.v[t] += g.v[yi] / divisor(p, taps);
  });
  return {dx};
}

// [SECTION] Samples

using Ints = std::vector<int64_t>;

struct PoolCase {
  Shape x;
  Attrs attrs;
  std::string note;
};

std::vector<PoolCase> max_cases() {
  return {{{2, 3, 6, 6}, {{"kernel", Ints{2, 2}}}, "2x2"},
          {{2, 3, 5, 5},
           {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}},
           "3x3 stride 2 padding 1"},
          {{2, 2, 5, 4}, {{"kernel", Ints{2, 3}}, {"stride", Ints{1, 1}}}, "2x3 stride 1"}};
}

std::vector<PoolCase> avg_cases() {
  Attrs k3{{"kernel", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}};
  Attrs k3x = k3;
  k3x.set("count_include_pad", int64_t{0});
  return {{{2, 3, 6, 6}, {{"kernel", Ints{2, 2}}}, "2x2"},
          {{2, 3, 5, 5}, k3, "3x3 stride 2 padding 1"},
          {{2, 3, 5, 5}, k3x, "3x3 stride 2 padding 1, padding not counted"},
          {{2, 2, 5, 4},
           {{"kernel", Ints{3, 2}}, {"stride", Ints{1, 2}}, {"padding", Ints{1, 0}}},
           "3x2 stride 1x2"}};
}

// Max pooling is piecewise linear: draws far apart (in [-1000, 1000)) keep every window's
// argmax where a finite-difference step of 1e-4 leaves it.
OpSample spread(OpSample s) {
  s.lo = -1000;
  s.hi = 1000;
  return s;
}

std::vector<OpSample> max_samples(bool with_g, bool with_t) {
  std::vector<OpSample> v;
  for (const PoolCase& c : max_cases()) {
    Shape y = *pooled(c.x, c.attrs);
    std::vector<ValueType> in{f32(c.x)};
    if (with_g) in.insert(in.begin(), f32(y));
    if (with_t) in.insert(in.begin(), f32(c.x));
    v.push_back(spread(sample(in, c.attrs, c.note)));
  }
  return v;
}

std::vector<OpSample> avg_samples(bool backward) {
  std::vector<OpSample> v;
  for (PoolCase& c : avg_cases()) {
    if (!backward) {
      v.push_back(sample({f32(c.x)}, c.attrs, c.note));
      continue;
    }
    Shape y = *pooled(c.x, c.attrs);
    c.attrs.set("input_shape", c.x);
    v.push_back(sample({f32(y)}, c.attrs, c.note));
  }
  return v;
}

}  // namespace

void register_pool_ops(OpRegistry& reg) {
  std::vector<AttrSpec> attrs{{"kernel", AttrKind::Ints},
                              {"stride", AttrKind::Ints, false},
                              {"padding", AttrKind::Ints, false}};
  std::vector<AttrSpec> avg_attrs = attrs;
  avg_attrs.push_back({"count_include_pad", AttrKind::Int, false});
  std::vector<AttrSpec> avg_backward_attrs = avg_attrs;
  avg_backward_attrs.push_back({"input_shape", AttrKind::Ints});

  reg.define(
      {.name = "max_pool2d",
       .attrs = attrs,
       .infer = infer_pool,
       .vjp =
           [](const GradContext& c) {
             return Refs{max_backward(c.e, c.gout(0), c.in(0), c.attrs)};
           },
       .jvp = [](const JvpContext& c) { return Refs{max_gather(c.e, c.tan(0), c.in(0), c.attrs)}; },
       .reference = max_pool_ref,
       .samples = [] { return max_samples(false, false); },
       .doc = "max over kernel windows of x [N,C,H,W] (stride defaults to the kernel; "
              "padding, at most half the kernel, never wins)"});
  reg.define(
      {.name = "max_pool2d_backward",
       .num_inputs = 2,
       .attrs = attrs,
       .infer = infer_max_backward,
       .vjp =
           [](const GradContext& c) {  // zero in x (almost everywhere)
             return Refs{c.needs(0) ? max_gather(c.e, c.gout(0), c.in(1), c.attrs) : Ref{}, Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             return Refs{c.tan(0).valid() ? max_backward(c.e, c.tan(0), c.in(1), c.attrs) : Ref{}};
           },
       .reference = max_backward_ref,
       .samples = [] { return max_samples(true, false); },
       .doc = "the gradient of max_pool2d: (g, x) -> g added at each window's argmax of x"});
  reg.define(
      {.name = "max_pool2d_relu_backward",
       .num_inputs = 2,
       .attrs = attrs,
       .infer = infer_max_backward,
       .vjp =
           [](const GradContext& c) {  // linear in g; zero in y (almost everywhere)
             if (!c.needs(0)) return Refs{Ref{}, Ref{}};
             return Refs{max_gather(c.e, c.e.emit1("relu_backward", {c.gout(0), c.in(1)}),
                                    c.in(1), c.attrs),
                         Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             if (!c.tan(0).valid()) return Refs{Ref{}};
             return Refs{c.e.emit1("relu_backward",
                                   {max_backward(c.e, c.tan(0), c.in(1), c.attrs), c.in(1)})};
           },
       .reference = max_relu_backward_ref,
       .samples = [] { return max_samples(true, false); },
       .doc = "relu_backward(max_pool2d_backward(g, y), y) in one pass, for the max pool of a "
              "relu's output y: g added at each window's argmax of y where that is > 0. Made "
              "by the pool-gradient fusion pass",
       .flops = max_relu_backward_flops});
  reg.define({.name = "max_pool2d_gather",
              .num_inputs = 2,
              .attrs = attrs,
              .infer = infer_max_gather,
              .vjp =
                  [](const GradContext& c) {  // zero in x (almost everywhere)
                    return Refs{c.needs(0) ? max_backward(c.e, c.gout(0), c.in(1), c.attrs) : Ref{},
                                Ref{}};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{c.tan(0).valid() ? max_gather(c.e, c.tan(0), c.in(1), c.attrs)
                                                 : Ref{}};
                  },
              .reference = max_gather_ref,
              .samples = [] { return max_samples(false, true); },
              .doc = "(t, x) -> t at each window's argmax of x: max_pool2d's tangent, and the "
                     "adjoint of max_pool2d_backward"});
  reg.define(
      {.name = "avg_pool2d",
       .attrs = avg_attrs,
       .infer = infer_pool,
       .vjp =
           [](const GradContext& c) {
             return Refs{avg_backward(c.e, c.gout(0), c.e.shape_of(c.in(0)), c.attrs)};
           },
       .jvp =
           [](const JvpContext& c) { return Refs{c.e.emit1("avg_pool2d", {c.tan(0)}, c.attrs)}; },
       .reference = avg_pool_ref,
       .samples = [] { return avg_samples(false); },
       .doc = "mean over kernel windows of x [N,C,H,W]; count_include_pad (default 1) "
              "counts padded cells in the divisor"});
  reg.define({.name = "avg_pool2d_backward",
              .attrs = avg_backward_attrs,
              .infer = infer_avg_backward,
              .vjp =
                  [](const GradContext& c) {
                    return Refs{avg_pool2d(c.e, c.gout(0), *pool2d_params(c.attrs))};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{c.e.emit1("avg_pool2d_backward", {c.tan(0)}, c.attrs)};
                  },
              .reference = avg_backward_ref,
              .samples = [] { return avg_samples(true); },
              .doc = "the gradient of avg_pool2d: g [N,C,OH,OW] spread back over each window -> "
                     "input_shape"});
}

}  // namespace mls::ops
