// Reductions (max, min, var) and layout ops: slice, concat, split, index_select, pad, with
// the ops their gradients need (max_mask, min_mask, slice_backward, index_add). Squeeze and
// unsqueeze are builders that emit reshape.
//
// [SECTION] Shared helpers and builders
// [SECTION] max, min, var
// [SECTION] slice, concat, split
// [SECTION] index_select, pad
#include <algorithm>
#include <limits>
#include <numeric>

#include "engine/ops/layout.h"
#include "engine/ops/op_helpers.h"

namespace mls {

// [SECTION] Shared helpers and builders

SliceRange slice_range(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
  SliceRange r{clamp(start), step, 0};
  int64_t e = clamp(end);
  if (step > 0 && e > r.start) r.len = (e - r.start + step - 1) / step;
  return r;
}

AxisLines axis_lines(const Shape& s, int64_t axis) {
  AxisLines l;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (d < axis ? l.outer : d == axis ? l.len : l.inner) *= s[static_cast<size_t>(d)];
  return l;
}

namespace {

Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}};
}

Attrs slice_attrs(int64_t axis, int64_t start, int64_t end, int64_t step) {
  return {{"axis", axis}, {"start", start}, {"end", end}, {"step", step}};
}

}  // namespace

Ref max(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims) {
  return e.emit1("max", {x}, reduce_attrs(std::move(axes), keepdims));
}

Ref min(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims) {
  return e.emit1("min", {x}, reduce_attrs(std::move(axes), keepdims));
}

Ref var(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims, int64_t correction) {
  Attrs a = reduce_attrs(std::move(axes), keepdims);
  a.set("correction", correction);
  return e.emit1("var", {x}, a);
}

Ref slice(Emitter& e, Ref x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  return e.emit1("slice", {x}, slice_attrs(axis, start, end, step));
}

Ref concat(Emitter& e, std::vector<Ref> xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  return e.emit("concat", xs, {{"axis", axis}})[0];
}

Refs split(Emitter& e, Ref x, int64_t axis, std::vector<int64_t> sizes) {
  return e.emit("split", std::span<const Ref>(&x, 1),
                {{"axis", axis}, {"sizes", std::move(sizes)}});
}

Ref index_select(Emitter& e, Ref x, Ref index, int64_t axis) {
  return e.emit1("index_select", {x, index}, {{"axis", axis}});
}

Ref pad(Emitter& e, Ref x, std::vector<int64_t> pads, double value) {
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
      pads.size() == 2 * e.shape_of(x).size())
    return x;
  return e.emit1("pad", {x}, {{"pads", std::move(pads)}, {"value", value}});
}

Ref squeeze(Emitter& e, Ref x, std::vector<int64_t> axes) {
  const Shape s = e.shape_of(x);
  auto rank = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), axes.empty());
  for (int64_t a : axes) {
    auto n = normalize_axis(a, rank);
    MLS_CHECK(n.has_value(), "squeeze: axis out of range");
    drop[static_cast<size_t>(*n)] = true;
  }
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!drop[d] || s[d] != 1) out.push_back(s[d]);  // a non-1 axis stays, as in torch
  return reshape(e, x, out);
}

Ref unsqueeze(Emitter& e, Ref x, int64_t axis) {
  Shape s = e.shape_of(x);
  auto n = normalize_axis(axis, static_cast<int64_t>(s.size()) + 1);
  MLS_CHECK(n.has_value(), "unsqueeze: axis out of range");
  s.insert(s.begin() + *n, 1);
  return reshape(e, x, s);
}

}  // namespace mls

namespace mls::ops {

namespace {

Refs one(Ref r) {
  return Refs{r};
}

Result<int64_t> axis_in(const Shape& s, int64_t axis) {
  auto n = normalize_axis(axis, static_cast<int64_t>(s.size()));
  if (!n)
    return make_error("axis " + std::to_string(axis) + " is out of range for " + shape_str(s));
  return *n;
}

// [SECTION] max, min, var

// For each element of x, the flat index of its reduction group (x's shape with the reduced
// axes kept as size 1).
std::vector<int64_t> group_index(const Shape& xs, const std::vector<int64_t>& axes) {
  Shape keep = *reduced_shape(xs, axes, true);
  std::vector<int64_t> g(static_cast<size_t>(numel(xs)));
  for (int64_t i = 0; i < numel(xs); ++i) g[static_cast<size_t>(i)] = broadcast_index(keep, xs, i);
  return g;
}

RefArray ref_extreme(const RefArray& x, const Attrs& a, bool is_max) {
  const auto& axes = a.get_ints("axes");
  Shape out = *reduced_shape(x.shape, axes, a.get_int("keepdims") != 0);
  double init =
      is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  RefArray r{out, std::vector<double>(static_cast<size_t>(numel(out)), init)};
  std::vector<int64_t> g = group_index(x.shape, axes);
  for (size_t i = 0; i < x.v.size(); ++i) {
    double& y = r.v[static_cast<size_t>(g[i])];
    if (is_max ? x.v[i] > y : x.v[i] < y) y = x.v[i];
  }
  return r;
}

// 1 at the first (row-major) position of each group's extreme, else 0.
RefArray ref_extreme_mask(const RefArray& x, const Attrs& a, bool is_max) {
  const auto& axes = a.get_ints("axes");
  std::vector<int64_t> g = group_index(x.shape, axes);
  Shape keep = *reduced_shape(x.shape, axes, true);
  std::vector<int64_t> best(static_cast<size_t>(numel(keep)), -1);
  for (size_t i = 0; i < x.v.size(); ++i) {
    int64_t& b = best[static_cast<size_t>(g[i])];
    if (b < 0 ||
        (is_max ? x.v[i] > x.v[static_cast<size_t>(b)] : x.v[i] < x.v[static_cast<size_t>(b)]))
      b = static_cast<int64_t>(i);
  }
  RefArray r{x.shape, std::vector<double>(x.v.size(), 0.0)};
  for (int64_t b : best)
    if (b >= 0) r.v[static_cast<size_t>(b)] = 1.0;
  return r;
}

RefArray ref_var(const RefArray& x, const Attrs& a) {
  const auto& axes = a.get_ints("axes");
  Shape keep = *reduced_shape(x.shape, axes, true);
  Shape out = *reduced_shape(x.shape, axes, a.get_int("keepdims") != 0);
  std::vector<int64_t> g = group_index(x.shape, axes);
  auto n = static_cast<double>(reduced_count(x.shape, axes));
  std::vector<double> mean(static_cast<size_t>(numel(keep)), 0.0);
  for (size_t i = 0; i < x.v.size(); ++i) mean[static_cast<size_t>(g[i])] += x.v[i] / n;
  RefArray r{out, std::vector<double>(mean.size(), 0.0)};
  for (size_t i = 0; i < x.v.size(); ++i) {
    double d = x.v[i] - mean[static_cast<size_t>(g[i])];
    r.v[static_cast<size_t>(g[i])] += d * d;
  }
  double denom = n - static_cast<double>(a.get_int("correction"));
  for (double& v : r.v) v /= denom;
  return r;
}

std::vector<OpSample> extreme_samples() {
  using V = std::vector<int64_t>;
  return {sample({f32({3, 4})}, {{"axes", V{}}, {"keepdims", int64_t{0}}}, "all"),
          sample({f32({3, 4})}, {{"axes", V{1}}, {"keepdims", int64_t{1}}}, "rows keepdims"),
          sample({f32({2, 3, 4})}, {{"axes", V{1}}, {"keepdims", int64_t{0}}}, "middle axis"),
          sample({f32({2, 3, 4})}, {{"axes", V{0, -1}}, {"keepdims", int64_t{0}}}, "outer axes")};
}

void def_extreme(OpRegistry& reg, const char* name, const char* mask_name, bool is_max) {
  std::string mask_op = mask_name;
  reg.define(
      {.name = name,
       .attrs = {{"axes", AttrKind::Ints}, {"keepdims", AttrKind::Int}},
       .infer = infer_reduce,
       .vjp =
           [mask_op](const GradContext& c) {  // the gradient goes to the extreme
             Ref mask = c.e.emit1(mask_op, {c.in(0)}, {{"axes", c.attrs.get_ints("axes")}});
             return one(mul(c.e, spread(c.e, c.gout(0), c.in(0), c.attrs), mask));
           },
       .jvp =
           [mask_op](const JvpContext& c) {
             Ref mask = c.e.emit1(mask_op, {c.in(0)}, {{"axes", c.attrs.get_ints("axes")}});
             return one(c.e.emit1("sum", {mul(c.e, c.tan(0), mask)}, c.attrs));
           },
       .reference =
           [is_max](std::span<const RefArray> in, const Attrs& a) {
             return std::vector<RefArray>{ref_extreme(in[0], a, is_max)};
           },
       .samples = extreme_samples,
       .doc = is_max
                  ? "largest element over axes (empty: all); the gradient goes to its position"
                  : "smallest element over axes (empty: all); the gradient goes to its position"});
  reg.define(
      {.name = mask_name,
       .attrs = {{"axes", AttrKind::Ints}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto s = reduced_shape(in[0].shape, a.get_ints("axes"), true);
         if (!s) return s.error();
         if (!dtype_is_float(in[0].dtype))
           return make_error("expects a float tensor, got " + type_str(in[0]));
         return Types{in[0]};
       },
       .reference =
           [is_max](std::span<const RefArray> in, const Attrs& a) {
             return std::vector<RefArray>{ref_extreme_mask(in[0], a, is_max)};
           },
       .samples =
           [] {
             using V = std::vector<int64_t>;
             return std::vector<OpSample>{
                 sample({f32({3, 4})}, {{"axes", V{1}}}, "rows"),
                 sample({f32({2, 3, 4})}, {{"axes", V{}}}, "all"),
                 sample({f32({2, 3, 4})}, {{"axes", V{1}}}, "middle axis"),
                 sample({f32({2, 3, 4})}, {{"axes", V{0, 2}}}, "outer axes")};
           },
       .kind = OpKind::NonDiff,
       .doc = is_max
                  ? "1 at the first position of the largest element of each group over axes, else 0"
                  : "1 at the first position of the smallest element of each group over axes, else "
                    "0"});
}

void register_reductions(OpRegistry& reg) {
  def_extreme(reg, "max", "max_mask", true);
  def_extreme(reg, "min", "min_mask", false);

  // d var / dx = 2 (x - mean) / (n - correction); the mean's own derivative sums to zero.
  auto centred = [](Emitter& e, Ref x, const Attrs& a) {
    double n = static_cast<double>(reduced_count(e.shape_of(x), a.get_ints("axes")));
    Ref m = mean(e, x, a.get_ints("axes"), true);
    return scale(e, sub(e, x, m), 2.0 / (n - static_cast<double>(a.get_int("correction"))));
  };
  reg.define(
      {.name = "var",
       .attrs = {{"axes", AttrKind::Ints},
                 {"keepdims", AttrKind::Int},
                 {"correction", AttrKind::Int}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto t = infer_reduce(in, a);
         if (!t) return t;
         int64_t c = a.get_int("correction");
         int64_t n = reduced_count(in[0].shape, a.get_ints("axes"));
         if (c < 0) return make_error("correction must be >= 0, got " + std::to_string(c));
         if (n - c <= 0)
           return make_error("the variance of " + std::to_string(n) +
                             " element(s) with correction " + std::to_string(c) +
                             " divides by zero (input " + shape_str(in[0].shape) + ")");
         return t;
       },
       .vjp =
           [centred](const GradContext& c) {
             return one(mul(c.e, spread(c.e, c.gout(0), c.in(0), c.attrs),
                            centred(c.e, c.in(0), c.attrs)));
           },
       .jvp =
           [centred](const JvpContext& c) {
             Attrs s{{"axes", c.attrs.get_ints("axes")}, {"keepdims", c.attrs.get_int("keepdims")}};
             return one(c.e.emit1("sum", {mul(c.e, centred(c.e, c.in(0), c.attrs), c.tan(0))}, s));
           },
       .reference = [](std::span<const RefArray> in,
                       const Attrs& a) { return std::vector<RefArray>{ref_var(in[0], a)}; },
       .samples =
           [] {
             using V = std::vector<int64_t>;
             auto at = [](V axes, int64_t keep, int64_t corr) {
               return Attrs{{"axes", std::move(axes)}, {"keepdims", keep}, {"correction", corr}};
             };
             return std::vector<OpSample>{
                 sample({f32({3, 4})}, at({}, 0, 1), "all, unbiased"),
                 sample({f32({3, 4})}, at({1}, 1, 0), "rows keepdims, population"),
                 sample({f32({2, 3, 4})}, at({1}, 0, 1), "middle axis"),
                 sample({f32({2, 3, 4})}, at({0, -1}, 0, 1), "outer axes")};
           },
       .doc = "variance over axes (empty: all), dividing by n - correction as torch.var"});
}

// [SECTION] slice, concat, split

// Reads x's slice along `axis` of length r.len into y (the reference of slice).
RefArray ref_slice(const RefArray& x, int64_t axis, const SliceRange& r) {
  AxisLines l = axis_lines(x.shape, axis);
  Shape out = x.shape;
  out[static_cast<size_t>(axis)] = r.len;
  RefArray y{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < r.len; ++i)
      for (int64_t j = 0; j < l.inner; ++j)
        y.v[static_cast<size_t>((o * r.len + i) * l.inner + j)] =
            x.v[static_cast<size_t>((o * l.len + r.start + i * r.step) * l.inner + j)];
  return y;
}

Result<SliceRange> checked_slice(const Shape& s, int64_t axis, const Attrs& a) {
  int64_t step = a.get_int("step");
  if (step < 1) return make_error("step must be >= 1, got " + std::to_string(step));
  SliceRange r =
      slice_range(s[static_cast<size_t>(axis)], a.get_int("start"), a.get_int("end"), step);
  if (r.len == 0)
    return make_error("slice " + std::to_string(a.get_int("start")) + ":" +
                      std::to_string(a.get_int("end")) + ":" + std::to_string(step) + " of axis " +
                      std::to_string(axis) + " of " + shape_str(s) + " is empty");
  return r;
}

Attrs attrs_of_slice(const Attrs& a) {
  return {{"axis", a.get_int("axis")},
          {"start", a.get_int("start")},
          {"end", a.get_int("end")},
          {"step", a.get_int("step")}};
}

void register_slicing(OpRegistry& reg) {
  std::vector<AttrSpec> slice_spec{{"axis", AttrKind::Int},
                                   {"start", AttrKind::Int},
                                   {"end", AttrKind::Int},
                                   {"step", AttrKind::Int}};
  reg.define(
      {.name = "slice",
       .attrs = slice_spec,
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         auto r = checked_slice(in[0].shape, *ax, a);
         if (!r) return r.error();
         Shape s = in[0].shape;
         s[static_cast<size_t>(*ax)] = r->len;
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             Attrs a = attrs_of_slice(c.attrs);
             int64_t ax = *normalize_axis(c.attrs.get_int("axis"),
                                          static_cast<int64_t>(c.e.shape_of(c.in(0)).size()));
             a.set("size", c.e.shape_of(c.in(0))[static_cast<size_t>(ax)]);
             return one(c.e.emit1("slice_backward", {c.gout(0)}, a));
           },
       .jvp = [](const JvpContext& c) { return one(c.e.emit1("slice", {c.tan(0)}, c.attrs)); },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             int64_t ax =
                 *normalize_axis(a.get_int("axis"), static_cast<int64_t>(in[0].shape.size()));
             SliceRange r = slice_range(in[0].shape[static_cast<size_t>(ax)], a.get_int("start"),
                                        a.get_int("end"), a.get_int("step"));
             return std::vector<RefArray>{ref_slice(in[0], ax, r)};
           },
       .samples =
           [] {
             auto at = [](int64_t axis, int64_t start, int64_t end, int64_t step) {
               return Attrs{{"axis", axis}, {"start", start}, {"end", end}, {"step", step}};
             };
             return with_dtypes(
                 {sample({f32({4, 5})}, at(1, 1, 4, 1), "columns 1:4"),
                  sample({f32({5, 3})}, at(0, 0, 5, 2), "every other row"),
                  sample({f32({2, 6, 3})}, at(-2, -4, 100, 1), "negative start, clamped end"),
                  sample({f32({2, 3, 4})}, at(2, 1, 4, 2), "last axis, step 2")},
                 kNonF32Dtypes);
           },
       .doc = "x[start:end:step] along an axis (a copy); negative start/end count from the end"});

  // The gradient of slice: g scattered into zeros of the sliced tensor's shape.
  std::vector<AttrSpec> back_spec = slice_spec;
  back_spec.push_back({"size", AttrKind::Int});
  reg.define(
      {.name = "slice_backward",
       .attrs = back_spec,
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         int64_t size = a.get_int("size");
         if (size < 1) return make_error("size must be >= 1, got " + std::to_string(size));
         Shape s = in[0].shape;
         s[static_cast<size_t>(*ax)] = size;
         auto r = checked_slice(s, *ax, a);
         if (!r) return r.error();
         if (r->len != in[0].shape[static_cast<size_t>(*ax)])
           return make_error("the slice takes " + std::to_string(r->len) + " of " +
                             std::to_string(size) + " elements along axis " + std::to_string(*ax) +
                             ", but the gradient " + shape_str(in[0].shape) + " has " +
                             std::to_string(in[0].shape[static_cast<size_t>(*ax)]));
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             return one(c.e.emit1("slice", {c.gout(0)}, attrs_of_slice(c.attrs)));
           },
       .jvp =
           [](const JvpContext& c) {
             return one(c.e.emit1("slice_backward", {c.tan(0)}, c.attrs));
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const RefArray& g = in[0];
             int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(g.shape.size()));
             int64_t size = a.get_int("size");
             SliceRange r =
                 slice_range(size, a.get_int("start"), a.get_int("end"), a.get_int("step"));
             AxisLines l = axis_lines(g.shape, ax);
             Shape s = g.shape;
             s[static_cast<size_t>(ax)] = size;
             RefArray y{s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
             for (int64_t o = 0; o < l.outer; ++o)
               for (int64_t i = 0; i < r.len; ++i)
                 for (int64_t j = 0; j < l.inner; ++j)
                   y.v[static_cast<size_t>((o * size + r.start + i * r.step) * l.inner + j)] =
                       g.v[static_cast<size_t>((o * r.len + i) * l.inner + j)];
             return std::vector<RefArray>{y};
           },
       .samples =
           [] {
             auto at = [](int64_t axis, int64_t start, int64_t end, int64_t step, int64_t size) {
               return Attrs{
                   {"axis", axis}, {"start", start}, {"end", end}, {"step", step}, {"size", size}};
             };
             return with_dtypes({sample({f32({4, 3})}, at(1, 1, 4, 1, 5), "columns 1:4 of 5"),
                                 sample({f32({3, 2})}, at(0, 0, 5, 2, 5), "every other row of 5")},
                                kNonF32Dtypes);
           },
       .doc = "the gradient of slice: g written into zeros at the sliced positions"});

  reg.define(
      {.name = "concat",
       .num_inputs = -1,
       .attrs = {{"axis", AttrKind::Int}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         if (in.empty()) return make_error("needs at least one input");
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         Shape s = in[0].shape;
         s[static_cast<size_t>(*ax)] = 0;
         for (size_t i = 0; i < in.size(); ++i) {
           Shape t = in[i].shape;
           if (in[i].dtype != in[0].dtype)
             return make_error("input " + std::to_string(i) + " is " + type_str(in[i]) +
                               " but input 0 is " + type_str(in[0]));
           bool same = t.size() == s.size();
           for (size_t d = 0; same && d < t.size(); ++d)
             same = d == static_cast<size_t>(*ax) || t[d] == s[d];
           if (!same)
             return make_error("input " + std::to_string(i) + " " + shape_str(t) +
                               " does not match input 0 " + shape_str(in[0].shape) +
                               " outside axis " + std::to_string(*ax));
           s[static_cast<size_t>(*ax)] += t[static_cast<size_t>(*ax)];
         }
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             int64_t ax = *normalize_axis(c.attrs.get_int("axis"),
                                          static_cast<int64_t>(c.e.shape_of(c.out(0)).size()));
             Refs r(c.inputs.size());
             int64_t off = 0;
             for (size_t i = 0; i < c.inputs.size(); ++i) {
               int64_t len = c.e.shape_of(c.in(i))[static_cast<size_t>(ax)];
               if (c.needs(i)) r[i] = slice(c.e, c.gout(0), ax, off, off + len, 1);
               off += len;
             }
             return r;
           },
       .jvp =
           [](const JvpContext& c) {
             std::vector<Ref> parts;
             for (size_t i = 0; i < c.inputs.size(); ++i)
               parts.push_back(c.tan(i).valid() ? c.tan(i) : fill(c.e, c.e.type_of(c.in(i)), 0.0));
             return one(concat(c.e, parts, c.attrs.get_int("axis")));
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             int64_t ax =
                 *normalize_axis(a.get_int("axis"), static_cast<int64_t>(in[0].shape.size()));
             Shape s = in[0].shape;
             s[static_cast<size_t>(ax)] = 0;
             for (const RefArray& x : in)
               s[static_cast<size_t>(ax)] += x.shape[static_cast<size_t>(ax)];
             AxisLines l = axis_lines(s, ax);
             RefArray y{s, {}};
             for (int64_t o = 0; o < l.outer; ++o)
               for (const RefArray& x : in) {
                 int64_t n = x.shape[static_cast<size_t>(ax)] * l.inner;
                 y.v.insert(y.v.end(), x.v.begin() + o * n, x.v.begin() + (o + 1) * n);
               }
             return std::vector<RefArray>{y};
           },
       .samples =
           [] {
             return with_dtypes(
                 {sample({f32({2, 3}), f32({4, 3})}, {{"axis", int64_t{0}}}, "rows"),
                  sample({f32({2, 3}), f32({2, 1}), f32({2, 4})}, {{"axis", int64_t{-1}}},
                         "three, last axis"),
                  sample({f32({2, 2, 3}), f32({2, 1, 3})}, {{"axis", int64_t{1}}}, "middle axis")},
                 kNonF32Dtypes);
           },
       .doc = "joins tensors along an axis (all other dims equal)"});

  reg.define(
      {.name = "split",
       .num_outputs = -1,
       .attrs = {{"axis", AttrKind::Int}, {"sizes", AttrKind::Ints}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         const auto& sizes = a.get_ints("sizes");
         if (sizes.empty()) return make_error("sizes is empty");
         if (std::any_of(sizes.begin(), sizes.end(), [](int64_t n) { return n < 1; }))
           return make_error("sizes " + shape_str(sizes) + " must all be >= 1");
         int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
         int64_t dim = in[0].shape[static_cast<size_t>(*ax)];
         if (total != dim)
           return make_error("sizes " + shape_str(sizes) + " sum to " + std::to_string(total) +
                             " but axis " + std::to_string(*ax) + " of " + shape_str(in[0].shape) +
                             " has " + std::to_string(dim));
         Types out;
         for (int64_t n : sizes) {
           Shape s = in[0].shape;
           s[static_cast<size_t>(*ax)] = n;
           out.push_back({in[0].dtype, s});
         }
         return out;
       },
       .vjp =
           [](const GradContext& c) {  // outputs without a gradient contribute zeros
             std::vector<Ref> parts;
             for (size_t i = 0; i < c.outputs.size(); ++i)
               parts.push_back(c.gout(i).valid() ? c.gout(i)
                                                 : fill(c.e, c.e.type_of(c.out(i)), 0.0));
             return one(concat(c.e, parts, c.attrs.get_int("axis")));
           },
       .jvp =
           [](const JvpContext& c) {
             return split(c.e, c.tan(0), c.attrs.get_int("axis"), c.attrs.get_ints("sizes"));
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const RefArray& x = in[0];
             int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(x.shape.size()));
             std::vector<RefArray> out;
             int64_t off = 0;
             for (int64_t n : a.get_ints("sizes")) {
               out.push_back(ref_slice(x, ax, SliceRange{off, 1, n}));
               off += n;
             }
             return out;
           },
       .samples =
           [] {
             using V = std::vector<int64_t>;
             return with_dtypes(
                 {sample({f32({5, 3})}, {{"axis", int64_t{0}}, {"sizes", V{2, 3}}}, "rows"),
                  sample({f32({2, 6})}, {{"axis", int64_t{-1}}, {"sizes", V{1, 2, 3}}}, "three"),
                  sample({f32({2, 4, 3})}, {{"axis", int64_t{1}}, {"sizes", V{3, 1}}},
                         "middle axis")},
                 kNonF32Dtypes);
           },
       .doc = "splits a tensor along an axis into parts of the given sizes (one output each)"});
}

// [SECTION] index_select, pad

Result<int64_t> checked_index(const ValueType& t) {
  if (t.dtype != DType::I64 || t.shape.size() != 1 || t.shape[0] < 1)
    return make_error("index must be i64 [K] with K >= 1, got " + type_str(t));
  return t.shape[0];
}

void register_gather(OpRegistry& reg) {
  reg.define(
      {.name = "index_select",
       .num_inputs = 2,
       .attrs = {{"axis", AttrKind::Int}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         auto k = checked_index(in[1]);
         if (!k) return k.error();
         Shape s = in[0].shape;
         s[static_cast<size_t>(*ax)] = *k;
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             int64_t ax = *normalize_axis(c.attrs.get_int("axis"),
                                          static_cast<int64_t>(c.e.shape_of(c.in(0)).size()));
             int64_t size = c.e.shape_of(c.in(0))[static_cast<size_t>(ax)];
             return Refs{
                 c.e.emit1("index_add", {c.gout(0), c.in(1)}, {{"axis", ax}, {"size", size}}),
                 Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             return one(c.tan(0).valid()
                            ? index_select(c.e, c.tan(0), c.in(1), c.attrs.get_int("axis"))
                            : Ref{});
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const RefArray &x = in[0], &idx = in[1];
             int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(x.shape.size()));
             AxisLines l = axis_lines(x.shape, ax);
             auto k = static_cast<int64_t>(idx.v.size());
             Shape s = x.shape;
             s[static_cast<size_t>(ax)] = k;
             RefArray y{s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
             for (int64_t o = 0; o < l.outer; ++o)
               for (int64_t i = 0; i < k; ++i) {
                 auto src = static_cast<int64_t>(idx.v[static_cast<size_t>(i)]);
                 if (src < 0 || src >= l.len) continue;
                 for (int64_t j = 0; j < l.inner; ++j)
                   y.v[static_cast<size_t>((o * k + i) * l.inner + j)] =
                       x.v[static_cast<size_t>((o * l.len + src) * l.inner + j)];
               }
             return std::vector<RefArray>{y};
           },
       .samples =
           [] {
             OpSample rows = sample({f32({5, 3}), i64({4})}, {{"axis", int64_t{0}}}, "rows");
             rows.int_high = 5;
             OpSample mid =
                 sample({f32({2, 6, 3}), i64({4})}, {{"axis", int64_t{-2}}}, "middle axis");
             mid.int_high = 6;
             return with_dtypes({rows, mid}, kNonF32Dtypes);
           },
       .doc =
           "picks the entries at index (i64 [K]) along an axis; out-of-range indices give zeros"});

  reg.define(
      {.name = "index_add",
       .num_inputs = 2,
       .attrs = {{"axis", AttrKind::Int}, {"size", AttrKind::Int}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto ax = axis_in(in[0].shape, a.get_int("axis"));
         if (!ax) return ax.error();
         auto k = checked_index(in[1]);
         if (!k) return k.error();
         if (*k != in[0].shape[static_cast<size_t>(*ax)])
           return make_error("index has " + std::to_string(*k) + " entries but " +
                             shape_str(in[0].shape) + " has " +
                             std::to_string(in[0].shape[static_cast<size_t>(*ax)]) +
                             " along axis " + std::to_string(*ax));
         if (a.get_int("size") < 1) return make_error("size must be >= 1");
         Shape s = in[0].shape;
         s[static_cast<size_t>(*ax)] = a.get_int("size");
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             return Refs{index_select(c.e, c.gout(0), c.in(1), c.attrs.get_int("axis")), Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             return one(c.tan(0).valid() ? c.e.emit1("index_add", {c.tan(0), c.in(1)}, c.attrs)
                                         : Ref{});
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const RefArray &g = in[0], &idx = in[1];
             int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(g.shape.size()));
             int64_t size = a.get_int("size");
             AxisLines l = axis_lines(g.shape, ax);
             Shape s = g.shape;
             s[static_cast<size_t>(ax)] = size;
             RefArray y{s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
             for (int64_t o = 0; o < l.outer; ++o)
               for (int64_t i = 0; i < l.len; ++i) {
                 auto dst = static_cast<int64_t>(idx.v[static_cast<size_t>(i)]);
                 if (dst < 0 || dst >= size) continue;
                 for (int64_t j = 0; j < l.inner; ++j)
                   y.v[static_cast<size_t>((o * size + dst) * l.inner + j)] +=
                       g.v[static_cast<size_t>((o * l.len + i) * l.inner + j)];
               }
             return std::vector<RefArray>{y};
           },
       .samples =
           [] {
             OpSample s = sample({f32({6, 3}), i64({6})},
                                 {{"axis", int64_t{0}}, {"size", int64_t{4}}}, "repeats");
             s.int_high = 4;
             OpSample t = sample({f32({2, 3}), i64({3})},
                                 {{"axis", int64_t{1}}, {"size", int64_t{5}}}, "columns");
             t.int_high = 5;
             return std::vector<OpSample>{s, t};
           },
       .doc =
           "zeros with `size` entries along an axis, g's entries added at index (the gradient of "
           "index_select)"});

  reg.define(
      {.name = "pad",
       .attrs = {{"pads", AttrKind::Ints}, {"value", AttrKind::Float}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         const auto& p = a.get_ints("pads");
         const Shape& x = in[0].shape;
         if (p.size() != 2 * x.size())
           return make_error("pads " + shape_str(p) + " has " + std::to_string(p.size()) +
                             " entries; " + shape_str(x) + " needs 2 per axis (before, after)");
         if (std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; }))
           return make_error("pads " + shape_str(p) + " must be >= 0");
         Shape s = x;
         for (size_t d = 0; d < s.size(); ++d) s[d] += p[2 * d] + p[2 * d + 1];
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             const auto& p = c.attrs.get_ints("pads");
             const Shape xs = c.e.shape_of(c.in(0));
             Ref g = c.gout(0);
             for (size_t d = 0; d < xs.size(); ++d)
               if (p[2 * d] != 0 || p[2 * d + 1] != 0)
                 g = slice(c.e, g, static_cast<int64_t>(d), p[2 * d], p[2 * d] + xs[d], 1);
             return one(g);
           },
       .jvp =
           [](const JvpContext& c) {
             return one(pad(c.e, c.tan(0), c.attrs.get_ints("pads"), 0.0));
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const RefArray& x = in[0];
             const auto& p = a.get_ints("pads");
             Shape s = x.shape;
             for (size_t d = 0; d < s.size(); ++d) s[d] += p[2 * d] + p[2 * d + 1];
             RefArray y{s,
                        std::vector<double>(static_cast<size_t>(numel(s)), a.get_float("value"))};
             for (int64_t i = 0; i < numel(x.shape); ++i) {
               int64_t rem = i, dst = 0, stride = 1;
               for (size_t d = s.size(); d-- > 0;) {
                 dst += (rem % x.shape[d] + p[2 * d]) * stride;
                 rem /= x.shape[d];
                 stride *= s[d];
               }
               y.v[static_cast<size_t>(dst)] = x.v[static_cast<size_t>(i)];
             }
             return std::vector<RefArray>{y};
           },
       .samples =
           [] {
             using V = std::vector<int64_t>;
             return with_dtypes(
                 // The first (a whole pad value) is also checked at i64: shape arithmetic pads
                 // index vectors.
                 {sample({f32({4})}, {{"pads", V{3, 0}}, {"value", -1.0}}, "1-D"),
                  sample({f32({3, 4})}, {{"pads", V{1, 2, 0, 1}}, {"value", 0.5}}, "2-D"),
                  sample({f32({2, 3, 4})}, {{"pads", V{0, 0, 2, 1, 1, 0}}, {"value", 0.0}}, "3-D")},
                 std::array{DType::I64});
           },
       .doc = "pads each axis with `value`: pads = {before0, after0, before1, after1, ...}"});
}

}  // namespace

void register_layout_ops(OpRegistry& reg) {
  register_reductions(reg);
  register_slicing(reg);
  register_gather(reg);
}

}  // namespace mls::ops
