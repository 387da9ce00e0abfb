#include "engine/ops/op_helpers.h"

#include <algorithm>
#include <mutex>

namespace mls {

namespace {

void register_core_ops(OpRegistry& reg) {
  ops::register_elementwise_ops(reg);
  ops::register_reduce_ops(reg);
  ops::register_shape_ops(reg);
  ops::register_nn_ops(reg);
  ops::register_optimizer_ops(reg);
  ops::register_math_ops(reg);
  ops::register_layout_ops(reg);
  ops::register_conv_ops(reg);
  ops::register_norm_ops(reg);
  ops::register_fused_ops(reg);
  ops::register_attention_ops(reg);
}

}  // namespace

// Declared in engine/core/op.h beside the registry it fills, defined here: core knows no op.
void engine_init() {
  static std::once_flag once;
  std::call_once(once, [] { register_core_ops(op_registry()); });
}

namespace ops {

Result<Types> infer_same(InTypes in, const Attrs&) { return Types{in[0]}; }

Result<Types> infer_broadcast(InTypes in, const Attrs&) {
  if (in[0].dtype != in[1].dtype)
    return make_error("operands have different dtypes (" + type_str(in[0]) + " and " +
                      type_str(in[1]) + ")");
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s)
    return make_error("shapes " + shape_str(in[0].shape) + " and " + shape_str(in[1].shape) +
                      " do not broadcast");
  return Types{{in[0].dtype, *s}};
}

std::vector<int64_t> norm_axes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(a < 0 ? a + rank : a);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<Shape> reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  auto rank = static_cast<int64_t>(in.size());
  for (int64_t a : axes)
    if (!normalize_axis(a, rank))
      return make_error("axis " + std::to_string(a) + " is out of range for " + shape_str(in));
  std::vector<int64_t> ax = norm_axes(axes, rank);
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = std::find(ax.begin(), ax.end(), i) != ax.end();
    if (!reduced) out.push_back(in[static_cast<size_t>(i)]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

Result<Types> infer_reduce(InTypes in, const Attrs& a) {
  auto s = reduced_shape(in[0].shape, a.get_ints("axes"), a.get_int("keepdims") != 0);
  if (!s) return s.error();
  return Types{{in[0].dtype, *s}};
}

Ref spread(Emitter& e, Ref g, Ref x, const Attrs& a) {
  const Shape xs = e.shape_of(x);
  auto keep = reduced_shape(xs, a.get_ints("axes"), true);
  return expand(e, reshape(e, g, *keep), xs);
}

int64_t reduced_count(const Shape& xs, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t ax : norm_axes(axes, static_cast<int64_t>(xs.size()))) n *= xs[static_cast<size_t>(ax)];
  return n;
}

RefArray ref_unary(const RefArray& a, const std::function<double(double)>& f) {
  RefArray out{a.shape, a.v};
  for (double& x : out.v) x = f(x);
  return out;
}

int64_t broadcast_index(const Shape& a, const Shape& out_shape, int64_t i) {
  int64_t idx = 0, stride = 1;
  size_t lead = out_shape.size() - a.size();
  for (size_t d = out_shape.size(); d-- > 0;) {
    int64_t coord = i % out_shape[d];
    i /= out_shape[d];
    if (d >= lead) {
      int64_t ad = a[d - lead];
      if (ad != 1) idx += coord * stride;
      stride *= ad;
    }
  }
  return idx;
}

RefArray ref_binary(const RefArray& a, const RefArray& b,
                    const std::function<double(double, double)>& f) {
  Shape s = *broadcast_shapes(a.shape, b.shape);
  RefArray out{s, std::vector<double>(static_cast<size_t>(numel(s)))};
  for (int64_t i = 0; i < numel(s); ++i)
    out.v[static_cast<size_t>(i)] = f(a.v[static_cast<size_t>(broadcast_index(a.shape, s, i))],
                                      b.v[static_cast<size_t>(broadcast_index(b.shape, s, i))]);
  return out;
}

void define_binary(OpRegistry& reg, const char* name, std::function<double(double, double)> f, VjpFn vjp,
                   JvpFn jvp, double lo, double hi, const char* doc, InferFn infer) {
  reg.define({.name = name,
              .num_inputs = 2,
              .infer = std::move(infer),
              .vjp = std::move(vjp),
              .jvp = std::move(jvp),
              .reference = [f](std::span<const RefArray> in, const Attrs&) {
                return std::vector<RefArray>{ref_binary(in[0], in[1], f)};
              },
              .samples =
                  [lo, hi] {
                    std::vector<OpSample> v{sample({f32({3, 4}), f32({3, 4})}, {}, "same shape"),
                                            sample({f32({3, 4}), f32({4})}, {}, "row broadcast"),
                                            sample({f32({2, 1, 3}), f32({4, 1})}, {}, "both broadcast")};
                    for (auto& s : v) {
                      s.lo = lo;
                      s.hi = hi;
                    }
                    return v;
                  },
              .inplace = true,  // elementwise: may write over an input of its type (OpDef::inplace)
              .doc = doc});
}

Result<void> require_float(InTypes in) {
  for (const ValueType& t : in)
    if (!dtype_is_float(t.dtype)) return make_error("expects float tensors, got " + type_str(t));
  if (in.size() == 2 && in[0].dtype != in[1].dtype)
    return make_error("operands have different dtypes (" + type_str(in[0]) + " and " + type_str(in[1]) + ")");
  return {};
}

std::vector<OpSample> at_dtypes(const OpSample& s, std::span<const DType> dtypes) {
  std::vector<OpSample> out;
  for (DType d : dtypes) {
    OpSample v = s;
    for (ValueType& t : v.inputs)
      if (t.dtype == DType::F32) t.dtype = d;
    v.forward_only = true;
    v.note = (s.note.empty() ? "" : s.note + ", ") + "at " + std::string(dtype_name(d));
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<OpSample> with_dtypes(std::vector<OpSample> samples, std::span<const DType> dtypes) {
  auto more = at_dtypes(samples.at(0), dtypes);
  samples.insert(samples.end(), more.begin(), more.end());
  return samples;
}

OpSample sample(std::vector<ValueType> inputs, Attrs attrs, std::string note) {
  OpSample s;
  s.inputs = std::move(inputs);
  s.attrs = std::move(attrs);
  s.note = std::move(note);
  return s;
}

}  // namespace ops
}  // namespace mls
