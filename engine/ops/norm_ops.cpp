// Softmax, layer norm, dropout, embedding and the elementwise loss op (batch norm:
// batch_norm_ops.cpp).
//
// [SECTION] helpers
// [SECTION] softmax
// [SECTION] layer_norm
// [SECTION] dropout
// [SECTION] embedding, embedding_backward
// [SECTION] sigmoid_cross_entropy
// [SECTION] registration
//
// The norms' derivatives are written with existing ops (1/sqrt through inv_std), so they
// differentiate again with no dedicated backward op.
#include <algorithm>
#include <limits>
#include <variant>

#include "engine/ops/nn.h"
#include "engine/ops/op_helpers.h"

namespace mls::ops {

void register_batch_norm_ops(OpRegistry& reg);  // batch_norm_ops.cpp

namespace {

// [SECTION] helpers

// Attribute kinds are not checked before infer runs: a wrong kind is the user's error, so it
// is reported here rather than asserted in get_int.
Result<void> check_attr_kinds(const Attrs& a, const std::vector<AttrSpec>& specs) {
  for (const AttrSpec& s : specs) {
    const AttrValue* v = a.find(s.name);
    if (!v) continue;
    bool ok = false;
    switch (s.kind) {
      case AttrKind::Int:
        ok = std::holds_alternative<int64_t>(*v);
        break;
      case AttrKind::Float:
        ok = std::holds_alternative<double>(*v) || std::holds_alternative<int64_t>(*v);
        break;
      case AttrKind::Ints:
        ok = std::holds_alternative<std::vector<int64_t>>(*v);
        break;
      case AttrKind::String:
        ok = std::holds_alternative<std::string>(*v);
        break;
    }
    if (!ok) return make_error("attribute '" + s.name + "' has the wrong kind");
  }
  return {};
}

Result<void> check_f32(const ValueType& t, const char* what) {
  if (t.dtype != DType::F32)
    return make_error(std::string(what) + " must be f32, got " + type_str(t));
  return {};
}

// Iterates the lines along `axis`: fn(offset of the first element, stride, length).
template <typename Fn>
void for_each_line(const Shape& s, int64_t axis, Fn fn) {
  int64_t len = s[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  int64_t outer = numel(s) / std::max<int64_t>(len * inner, 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) fn(o * len * inner + i, inner, len);
}

// The last k axes of a rank-r shape.
std::vector<int64_t> last_axes(size_t r, size_t k) {
  std::vector<int64_t> axes;
  for (size_t d = r - k; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  return axes;
}

double eps_of(const Attrs& a) {
  return a.get_float_or("eps", kNormEps);
}

// [SECTION] softmax

const std::vector<AttrSpec> kSoftmaxAttrs{{"axis", AttrKind::Int}};

Result<Types> infer_softmax(InTypes in, const Attrs& a) {
  if (auto r = check_attr_kinds(a, kSoftmaxAttrs); !r) return r.error();
  if (auto r = check_f32(in[0], "x"); !r) return r.error();
  if (!normalize_axis(a.get_int("axis"), static_cast<int64_t>(in[0].shape.size())))
    return make_error("axis " + std::to_string(a.get_int("axis")) + " is out of range for " +
                      shape_str(in[0].shape));
  return Types{in[0]};
}

// y (t - sum(t y)) is both the vjp (t = g) and the jvp (t = tangent): the Jacobian is symmetric.
Ref softmax_jac(Emitter& e, Ref y, Ref t, int64_t axis) {
  return mul(e, y, sub(e, t, sum(e, mul(e, t, y), {axis}, true)));
}

std::vector<RefArray> softmax_ref(std::span<const RefArray> in, const Attrs& a) {
  RefArray r = in[0];
  int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(r.shape.size()));
  for_each_line(r.shape, ax, [&](int64_t off, int64_t stride, int64_t len) {
    auto at = [&](int64_t i) -> double& { return r.v[static_cast<size_t>(off + i * stride)]; };
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < len; ++i) mx = std::max(mx, at(i));
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += (at(i) = std::exp(at(i) - mx));
    for (int64_t i = 0; i < len; ++i) at(i) /= s;
  });
  return {r};
}

// [SECTION] layer_norm

const std::vector<AttrSpec> kLayerNormAttrs{{"eps", AttrKind::Float, false},
                                            {"axes_count", AttrKind::Int, false}};

Result<Types> infer_layer_norm(InTypes in, const Attrs& a) {
  if (auto r = check_attr_kinds(a, kLayerNormAttrs); !r) return r.error();
  for (size_t i = 0; i < 3; ++i)
    if (auto r = check_f32(in[i], i == 0 ? "x" : i == 1 ? "gamma" : "beta"); !r) return r.error();
  const Shape &x = in[0].shape, &g = in[1].shape;
  size_t k = g.size();
  if (a.has("axes_count") && a.get_int("axes_count") != static_cast<int64_t>(k))
    return make_error("axes_count " + std::to_string(a.get_int("axes_count")) +
                      " differs from the rank of gamma " + shape_str(g));
  if (k < 1 || k > x.size() || !std::equal(g.begin(), g.end(), x.end() - static_cast<ptrdiff_t>(k)))
    return make_error("gamma " + shape_str(g) + " must be the trailing (normalised) shape of x " +
                      shape_str(x));
  if (in[2].shape != g)
    return make_error("beta " + shape_str(in[2].shape) + " must have gamma's shape " +
                      shape_str(g));
  if (numel(g) == 0) return make_error("nothing to normalise in x " + shape_str(x));
  if (eps_of(a) <= 0) return make_error("eps must be > 0");
  return Types{in[0]};
}

// Statistics recomputed from x (a handful of ops), so the op keeps one output.
struct LayerStats {
  std::vector<int64_t> axes;
  Ref rstd, xhat;
};
LayerStats layer_stats(Emitter& e, Ref x, Ref gamma, const Attrs& a) {
  LayerStats s;
  s.axes = last_axes(e.shape_of(x).size(), e.shape_of(gamma).size());
  Ref xc = sub(e, x, mean(e, x, s.axes, true));
  s.rstd = inv_std(e, mean(e, mul(e, xc, xc), s.axes, true), eps_of(a));
  s.xhat = mul(e, xc, s.rstd);
  return s;
}

// dx = rstd (h - mean(h) - xhat mean(h xhat)) with h = g gamma, means over the normalised axes.
Refs layer_norm_vjp(const GradContext& c) {
  Emitter& e = c.e;
  LayerStats s = layer_stats(e, c.in(0), c.in(1), c.attrs);
  Ref gy = c.gout(0);
  Refs r(3);
  if (c.needs(0)) {
    Ref h = mul(e, gy, c.in(1));
    Ref proj =
        add(e, mean(e, h, s.axes, true), mul(e, s.xhat, mean(e, mul(e, h, s.xhat), s.axes, true)));
    r[0] = mul(e, s.rstd, sub(e, h, proj));
  }
  if (c.needs(1)) r[1] = unbroadcast(e, mul(e, gy, s.xhat), e.shape_of(c.in(1)));
  if (c.needs(2)) r[2] = unbroadcast(e, gy, e.shape_of(c.in(2)));
  return r;
}

// d xhat = rstd (tc - xhat mean(xhat tc)) with tc = t - mean(t).
Refs layer_norm_jvp(const JvpContext& c) {
  Emitter& e = c.e;
  LayerStats s = layer_stats(e, c.in(0), c.in(1), c.attrs);
  const Shape xs = e.shape_of(c.in(0));
  Ref ty;
  if (Ref tx = c.tan(0); tx.valid()) {
    Ref tc = sub(e, tx, mean(e, tx, s.axes, true));
    Ref txhat =
        mul(e, s.rstd, sub(e, tc, mul(e, s.xhat, mean(e, mul(e, s.xhat, tc), s.axes, true))));
    ty = mul(e, txhat, c.in(1));
  }
  if (c.tan(1).valid()) ty = accumulate(e, ty, mul(e, s.xhat, c.tan(1)));
  if (c.tan(2).valid()) ty = accumulate(e, ty, expand(e, c.tan(2), xs));
  return {ty};
}

std::vector<RefArray> layer_norm_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &x = in[0], &gamma = in[1], &beta = in[2];
  const auto inner = static_cast<size_t>(numel(gamma.shape));
  const size_t rows = x.v.size() / inner;
  RefArray y{x.shape, std::vector<double>(x.v.size())};
  for (size_t r = 0; r < rows; ++r) {
    const double* xr = x.v.data() + r * inner;
    double sum = 0, sq = 0;
    for (size_t j = 0; j < inner; ++j) sum += xr[j];
    const double mu = sum / static_cast<double>(inner);
    for (size_t j = 0; j < inner; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps_of(a));
    for (size_t j = 0; j < inner; ++j)
      y.v[r * inner + j] = gamma.v[j] * (xr[j] - mu) * rstd + beta.v[j];
  }
  return {y};
}

// [SECTION] dropout

const std::vector<AttrSpec> kDropoutAttrs{
    {"p", AttrKind::Float}, {"seed", AttrKind::Int}, {"training", AttrKind::Int}};

Result<Types> infer_dropout(InTypes in, const Attrs& a) {
  if (auto r = check_attr_kinds(a, kDropoutAttrs); !r) return r.error();
  if (auto r = check_f32(in[0], "x"); !r) return r.error();
  if (in[1].dtype != DType::I64 || numel(in[1].shape) != 1)
    return make_error("expects the step seed as an i64 [1] tensor, got " + type_str(in[1]));
  double p = a.get_float("p");
  if (!(p >= 0 && p < 1)) return make_error("p must be in [0, 1), got " + std::to_string(p));
  return Types{in[0]};
}

std::vector<RefArray> dropout_ref(std::span<const RefArray> in, const Attrs& a) {
  RefArray y = in[0];
  if (a.get_int("training") == 0) return {y};
  const double p = a.get_float("p");
  const uint64_t seed = dropout_seed(a.get_int("seed"), static_cast<int64_t>(in[1].v[0]));
  for (size_t i = 0; i < y.v.size(); ++i)
    y.v[i] = dropout_keep(seed, i, p) ? y.v[i] / (1 - p) : 0.0;
  return {y};
}

// [SECTION] embedding, embedding_backward

Result<Types> infer_embedding(InTypes in, const Attrs&) {
  if (auto r = check_f32(in[0], "weight"); !r) return r.error();
  if (in[0].shape.size() != 2)
    return make_error("expects weight [V, D], got " + shape_str(in[0].shape));
  if (in[1].dtype != DType::I64) return make_error("expects i64 indices, got " + type_str(in[1]));
  Shape s = in[1].shape;
  s.push_back(in[0].shape[1]);
  return Types{{in[0].dtype, s}};
}

const std::vector<AttrSpec> kEmbeddingBackwardAttrs{{"num_embeddings", AttrKind::Int}};

Result<Types> infer_embedding_backward(InTypes in, const Attrs& a) {
  if (auto r = check_attr_kinds(a, kEmbeddingBackwardAttrs); !r) return r.error();
  if (auto r = check_f32(in[0], "g"); !r) return r.error();
  if (in[1].dtype != DType::I64) return make_error("expects i64 indices, got " + type_str(in[1]));
  const Shape &g = in[0].shape, &idx = in[1].shape;
  if (g.size() != idx.size() + 1 || !std::equal(idx.begin(), idx.end(), g.begin()))
    return make_error("g " + shape_str(g) + " must be indices' shape " + shape_str(idx) + " + [D]");
  int64_t v = a.get_int("num_embeddings");
  if (v < 1) return make_error("num_embeddings must be >= 1, got " + std::to_string(v));
  return Types{{in[0].dtype, {v, g.back()}}};
}

Ref embedding_backward(Emitter& e, Ref g, Ref indices, int64_t num_embeddings) {
  return e.emit1("embedding_backward", {g, indices}, {{"num_embeddings", num_embeddings}});
}

std::vector<RefArray> embedding_ref(std::span<const RefArray> in, const Attrs&) {
  const RefArray &w = in[0], &idx = in[1];
  const int64_t v = w.shape[0], d = w.shape[1];
  Shape s = idx.shape;
  s.push_back(d);
  RefArray y{s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
  for (size_t i = 0; i < idx.v.size(); ++i) {
    auto k = static_cast<int64_t>(idx.v[i]);
    if (k < 0 || k >= v) continue;
    for (int64_t j = 0; j < d; ++j)
      y.v[i * static_cast<size_t>(d) + static_cast<size_t>(j)] =
          w.v[static_cast<size_t>(k * d + j)];
  }
  return {y};
}

std::vector<RefArray> embedding_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &g = in[0], &idx = in[1];
  const int64_t v = a.get_int("num_embeddings"), d = g.shape.back();
  RefArray w{{v, d}, std::vector<double>(static_cast<size_t>(v * d), 0.0)};
  for (size_t i = 0; i < idx.v.size(); ++i) {
    auto k = static_cast<int64_t>(idx.v[i]);
    if (k < 0 || k >= v) continue;
    for (int64_t j = 0; j < d; ++j)
      w.v[static_cast<size_t>(k * d + j)] +=
          g.v[i * static_cast<size_t>(d) + static_cast<size_t>(j)];
  }
  return {w};
}

// [SECTION] sigmoid_cross_entropy

Result<Types> infer_sigmoid_ce(InTypes in, const Attrs&) {
  if (auto r = check_f32(in[0], "logits"); !r) return r.error();
  if (!(in[0] == in[1]))
    return make_error("logits " + type_str(in[0]) + " and targets " + type_str(in[1]) +
                      " must have one type");
  return Types{in[0]};
}

double sigmoid_ce(double x, double t) {
  return std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::abs(x)));
}

}  // namespace

// [SECTION] registration

void register_norm_ops(OpRegistry& reg) {
  reg.define({.name = "softmax",
              .attrs = kSoftmaxAttrs,
              .infer = infer_softmax,
              .vjp =
                  [](const GradContext& c) {
                    return Refs{softmax_jac(c.e, c.out(0), c.gout(0), c.attrs.get_int("axis"))};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{softmax_jac(c.e, c.out(0), c.tan(0), c.attrs.get_int("axis"))};
                  },
              .reference = softmax_ref,
              .samples =
                  [] {
                    std::vector<OpSample> v{
                        sample({f32({4, 7})}, {{"axis", int64_t{-1}}}, "last axis"),
                        sample({f32({3, 4, 2})}, {{"axis", int64_t{1}}}, "middle axis")};
                    for (auto& s : v) {
                      s.lo = -3;
                      s.hi = 3;
                    }
                    return v;
                  },
              .doc = "exp(x) / sum(exp(x)) along an axis, computed stably"});

  register_batch_norm_ops(reg);

  reg.define({.name = "layer_norm",
              .num_inputs = 3,
              .attrs = kLayerNormAttrs,
              .infer = infer_layer_norm,
              .vjp = layer_norm_vjp,
              .jvp = layer_norm_jvp,
              .reference = layer_norm_ref,
              .samples =
                  [] {
                    return std::vector<OpSample>{
                        sample({f32({3, 4, 5}), f32({5}), f32({5})}, {{"eps", 1e-5}}, "last axis"),
                        sample({f32({2, 3, 4}), f32({3, 4}), f32({3, 4})},
                               {{"eps", 1e-5}, {"axes_count", int64_t{2}}}, "last two axes")};
                  },
              .doc = "gamma (x - mean) / sqrt(var + eps) + beta over the last gamma.rank() axes "
                     "(axes_count, if given, must equal it); var biased"});

  reg.define({.name = "dropout",
              .num_inputs = 2,
              .attrs = kDropoutAttrs,
              .infer = infer_dropout,
              .vjp =
                  [](const GradContext& c) {
                    return Refs{c.e.emit1("dropout", {c.gout(0), c.in(1)}, c.attrs), Ref{}};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{c.e.emit1("dropout", {c.tan(0), c.in(1)}, c.attrs)};
                  },
              .reference = dropout_ref,
              .samples =
                  [] {
                    auto a = [](int64_t training) {
                      return Attrs{{"p", 0.3}, {"seed", int64_t{20240611}}, {"training", training}};
                    };
                    const ValueType seed{DType::I64, {1}};
                    OpSample train = sample({f32({6, 9}), seed}, a(1), "training");
                    train.int_high = 1000;
                    return std::vector<OpSample>{
                        train, sample({f32({2, 3, 4}), seed}, a(0), "eval: identity")};
                  },
              .doc = "x * mask / (1 - p) when training (else x); mask[i] = "
                     "dropout_keep(dropout_seed(seed, step seed), i, p) "
                     "(engine/ops/nn.h), the same on every backend"});

  reg.define(
      {.name = "embedding",
       .num_inputs = 2,
       .infer = infer_embedding,
       .vjp =
           [](const GradContext& c) {
             int64_t v = c.e.shape_of(c.in(0))[0];
             return Refs{c.needs(0) ? embedding_backward(c.e, c.gout(0), c.in(1), v) : Ref{},
                         Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             return Refs{c.tan(0).valid() ? c.e.emit1("embedding", {c.tan(0), c.in(1)}) : Ref{}};
           },
       .reference = embedding_ref,
       .samples =
           [] {
             OpSample a = sample({f32({6, 4}), i64({5})}, {}, "indices [N]");
             OpSample b = sample({f32({3, 5}), i64({2, 4})}, {}, "indices [B, T]");
             a.int_high = 6;
             b.int_high = 3;
             return std::vector<OpSample>{a, b};
           },
       .doc = "rows of weight [V, D] at i64 indices [...] -> [..., D]; an index outside "
              "[0, V) gives a zero row"});

  reg.define(
      {.name = "embedding_backward",
       .num_inputs = 2,
       .attrs = kEmbeddingBackwardAttrs,
       .infer = infer_embedding_backward,
       .vjp =
           [](const GradContext& c) {
             return Refs{c.e.emit1("embedding", {c.gout(0), c.in(1)}), Ref{}};
           },
       .jvp =
           [](const JvpContext& c) {
             return Refs{c.tan(0).valid() ? embedding_backward(c.e, c.tan(0), c.in(1),
                                                               c.attrs.get_int("num_embeddings"))
                                          : Ref{}};
           },
       .reference = embedding_backward_ref,
       .samples =
           [] {
             OpSample a = sample({f32({5, 4}), i64({5})}, {{"num_embeddings", int64_t{6}}}, "[N]");
             OpSample b = sample({f32({2, 3, 2}), i64({2, 3})}, {{"num_embeddings", int64_t{4}}},
                                 "repeated indices, one row unused");
             a.int_high = 6;
             b.int_high = 3;
             return std::vector<OpSample>{a, b};
           },
       .doc = "the gradient of embedding: g [..., D] scatter-added into [num_embeddings, D] "
              "rows at indices (out-of-range indices are dropped)"});

  reg.define(
      {.name = "sigmoid_cross_entropy",
       .num_inputs = 2,
       .infer = infer_sigmoid_ce,
       .vjp =
           [](const GradContext& c) {  // d/dx = sigmoid(x) - t, d/dt = -x
             Refs r(2);
             if (c.needs(0))
               r[0] = mul(c.e, c.gout(0), sub(c.e, c.e.emit1("sigmoid", {c.in(0)}), c.in(1)));
             if (c.needs(1)) r[1] = neg(c.e, mul(c.e, c.gout(0), c.in(0)));
             return r;
           },
       .jvp =
           [](const JvpContext& c) {
             Ref a = c.tan(0).valid()
                         ? mul(c.e, c.tan(0), sub(c.e, c.e.emit1("sigmoid", {c.in(0)}), c.in(1)))
                         : Ref{};
             Ref b = c.tan(1).valid() ? neg(c.e, mul(c.e, c.tan(1), c.in(0))) : Ref{};
             return Refs{accumulate(c.e, a, b)};
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs&) {
             return std::vector<RefArray>{ref_binary(in[0], in[1], sigmoid_ce)};
           },
       .samples =
           [] {
             OpSample s = sample({f32({3, 5}), f32({3, 5})});
             s.lo = -4;
             s.hi = 4;
             return std::vector<OpSample>{s};
           },
       .doc = "elementwise binary cross-entropy of logits x against targets t, "
              "max(x, 0) - x t + log(1 + exp(-|x|)) (no reduction; bce_with_logits means it)"});
}

}  // namespace mls::ops
