// Reductions over any axes, with keepdims.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

namespace {


RefArray ref_reduce(const RefArray& x, const Attrs& a, bool average) {
  auto rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> ax = norm_axes(a.get_ints("axes"), rank);
  Shape keep = *reduced_shape(x.shape, a.get_ints("axes"), true);
  Shape out = *reduced_shape(x.shape, a.get_ints("axes"), a.get_int("keepdims") != 0);
  RefArray r{out, std::vector<double>(static_cast<size_t>(numel(out)), 0.0)};
  for (int64_t i = 0; i < numel(x.shape); ++i)
    r.v[static_cast<size_t>(broadcast_index(keep, x.shape, i))] += x.v[static_cast<size_t>(i)];
  if (average) {
    double n = static_cast<double>(numel(x.shape)) / static_cast<double>(std::max<int64_t>(numel(out), 1));
    for (double& v : r.v) v /= n;
  }
  return r;
}

std::vector<OpSample> reduce_samples() {
  return {sample({f32({3, 4})}, {{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t{0}}}, "all"),
          sample({f32({3, 4})}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}, "rows keepdims"),
          sample({f32({2, 3, 4})}, {{"axes", std::vector<int64_t>{0, -1}}, {"keepdims", int64_t{0}}}, "outer axes")};
}

}  // namespace

void register_reduce_ops(OpRegistry& reg) {
  std::vector<AttrSpec> attrs{{"axes", AttrKind::Ints}, {"keepdims", AttrKind::Int}};
  reg.define({.name = "sum",
              .attrs = attrs,
              .infer = infer_reduce,
              .vjp = [](const GradContext& c) { return Refs{spread(c.e, c.gout(0), c.in(0), c.attrs)}; },
              .jvp = [](const JvpContext& c) {
                return Refs{c.e.emit1("sum", {c.tan(0)}, c.attrs)};
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                return std::vector<RefArray>{ref_reduce(in[0], a, false)};
              },
              .samples = reduce_samples,
              .doc = "sum over axes (empty: all)"});
  reg.define({.name = "mean",
              .attrs = attrs,
              .infer = infer_reduce,
              .vjp = [](const GradContext& c) {
                double n = static_cast<double>(reduced_count(c.e.shape_of(c.in(0)), c.attrs.get_ints("axes")));
                return Refs{scale(c.e, spread(c.e, c.gout(0), c.in(0), c.attrs), 1.0 / n)};
              },
              .jvp = [](const JvpContext& c) {
                return Refs{c.e.emit1("mean", {c.tan(0)}, c.attrs)};
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                return std::vector<RefArray>{ref_reduce(in[0], a, true)};
              },
              .samples = reduce_samples,
              .doc = "mean over axes (empty: all)"});
}

}  // namespace mls::ops
