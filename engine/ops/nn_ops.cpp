// Neural-network ops: matmul, log_softmax, one_hot, argmax.
#include <limits>

#include "engine/ops/op_helpers.h"

namespace mls::ops {

namespace {

// op(A) op(B) on the last two dims; the leading (batch) dims broadcast as numpy does.
Result<Types> infer_matmul(InTypes in, const Attrs& a) {
  const Shape& x = in[0].shape;
  const Shape& y = in[1].shape;
  if (x.size() < 2 || y.size() < 2)
    return make_error("expects matrices or batches of matrices (rank >= 2), got " + shape_str(x) +
                      " and " + shape_str(y));
  if (in[0].dtype != in[1].dtype) return make_error("operands have different dtypes");
  bool ta = a.get_int("transpose_a") != 0, tb = a.get_int("transpose_b") != 0;
  size_t rx = x.size(), ry = y.size();
  int64_t m = ta ? x[rx - 1] : x[rx - 2], k = ta ? x[rx - 2] : x[rx - 1];
  int64_t k2 = tb ? y[ry - 1] : y[ry - 2], n = tb ? y[ry - 2] : y[ry - 1];
  if (k != k2)
    return make_error("inner dimensions differ: " + shape_str(x) + (ta ? "^T" : "") + " x " +
                      shape_str(y) + (tb ? "^T" : "") + " (" + std::to_string(k) + " vs " +
                      std::to_string(k2) + ")");
  auto batch = broadcast_shapes(Shape(x.begin(), x.end() - 2), Shape(y.begin(), y.end() - 2));
  if (!batch)
    return make_error("batch dimensions of " + shape_str(x) + " and " + shape_str(y) +
                      " do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  return Types{{in[0].dtype, *batch}};
}

// C = op(A) op(B). Each case of the transpose flags has its own pair of products,
// so no explicit transpose is ever materialised. Batched products give gradients over
// the full batch, summed back over broadcast batch dims (unbroadcast).
Refs matmul_vjp(const GradContext& c) {
  bool ta = c.attrs.get_int("transpose_a") != 0, tb = c.attrs.get_int("transpose_b") != 0;
  Ref a = c.in(0), b = c.in(1), g = c.gout(0);
  Emitter& e = c.e;
  const Shape as = e.shape_of(a), bs = e.shape_of(b), gs = e.shape_of(g);
  Refs r(2);
  // A batch of A times one matrix B ([.., M, K] x [K, N]): B's gradient is one product
  // over all the batch's rows, with no batched temporary to sum.
  bool fold_b = bs.size() == 2 && as.size() > 2 && !ta;
  if (fold_b && c.needs(1)) {
    int64_t rows = numel(as) / as.back();
    Ref a2 = reshape(e, a, {rows, as.back()});
    Ref g2 = reshape(e, g, {rows, gs.back()});
    r[1] = tb ? matmul(e, g2, a2, true, false) : matmul(e, a2, g2, true, false);
  }
  if (!ta && !tb) {
    if (c.needs(0)) r[0] = matmul(e, g, b, false, true);
    if (c.needs(1) && !fold_b) r[1] = matmul(e, a, g, true, false);
  } else if (!ta && tb) {
    if (c.needs(0)) r[0] = matmul(e, g, b, false, false);
    if (c.needs(1) && !fold_b) r[1] = matmul(e, g, a, true, false);
  } else if (ta && !tb) {
    if (c.needs(0)) r[0] = matmul(e, b, g, false, true);
    if (c.needs(1)) r[1] = matmul(e, a, g, false, false);
  } else {
    if (c.needs(0)) r[0] = matmul(e, b, g, true, true);
    if (c.needs(1)) r[1] = matmul(e, g, a, true, true);
  }
  if (r[0].valid()) r[0] = unbroadcast(e, r[0], as);
  if (r[1].valid()) r[1] = unbroadcast(e, r[1], bs);
  return r;
}

Refs matmul_jvp(const JvpContext& c) {
  bool ta = c.attrs.get_int("transpose_a") != 0, tb = c.attrs.get_int("transpose_b") != 0;
  Ref l = c.tan(0).valid() ? matmul(c.e, c.tan(0), c.in(1), ta, tb) : Ref{};
  Ref r = c.tan(1).valid() ? matmul(c.e, c.in(0), c.tan(1), ta, tb) : Ref{};
  return {accumulate(c.e, l, r)};
}

std::vector<RefArray> matmul_ref(std::span<const RefArray> in, const Attrs& at) {
  bool ta = at.get_int("transpose_a") != 0, tb = at.get_int("transpose_b") != 0;
  const RefArray &a = in[0], &b = in[1];
  const Shape &as = a.shape, &bs = b.shape;
  int64_t ar = as[as.size() - 2], ac = as.back(), br = bs[bs.size() - 2], bc = bs.back();
  int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = *broadcast_shapes(a_batch, b_batch);
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  RefArray c{out, std::vector<double>(static_cast<size_t>(numel(out)), 0.0)};
  for (int64_t t = 0; t < numel(batch); ++t) {
    const double* pa = a.v.data() + broadcast_index(a_batch, batch, t) * ar * ac;
    const double* pb = b.v.data() + broadcast_index(b_batch, batch, t) * br * bc;
    auto A = [&](int64_t i, int64_t p) { return ta ? pa[p * ac + i] : pa[i * ac + p]; };
    auto B = [&](int64_t p, int64_t j) { return tb ? pb[j * bc + p] : pb[p * bc + j]; };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += A(i, p) * B(p, j);
        c.v[static_cast<size_t>((t * m + i) * n + j)] = s;
      }
  }
  return {c};
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

}  // namespace

void register_nn_ops(OpRegistry& reg) {
  auto mm_attrs = [](int64_t ta, int64_t tb) { return Attrs{{"transpose_a", ta}, {"transpose_b", tb}}; };
  reg.define(
      {.name = "matmul",
       .num_inputs = 2,
       .attrs = {{"transpose_a", AttrKind::Int}, {"transpose_b", AttrKind::Int}},
       .infer = infer_matmul,
       .vjp = matmul_vjp,
       .jvp = matmul_jvp,
       .reference = matmul_ref,
       .samples =
           [mm_attrs] {
             return std::vector<OpSample>{
                 sample({f32({3, 4}), f32({4, 5})}, mm_attrs(0, 0), "NN"),
                 sample({f32({3, 4}), f32({5, 4})}, mm_attrs(0, 1), "NT"),
                 sample({f32({4, 3}), f32({4, 5})}, mm_attrs(1, 0), "TN"),
                 sample({f32({4, 3}), f32({5, 4})}, mm_attrs(1, 1), "TT"),
                 sample({f32({2, 3, 4}), f32({4, 5})}, mm_attrs(0, 0), "batch x matrix"),
                 sample({f32({2, 3, 4}), f32({5, 4})}, mm_attrs(0, 1), "batch x matrix^T"),
                 sample({f32({2, 3, 4}), f32({2, 4, 5})}, mm_attrs(0, 0), "batched NN"),
                 sample({f32({2, 4, 3}), f32({2, 5, 4})}, mm_attrs(1, 1), "batched TT"),
                 sample({f32({2, 4, 3}), f32({4, 5})}, mm_attrs(1, 0), "batch^T x matrix"),
                 sample({f32({4, 3}), f32({2, 4, 5})}, mm_attrs(1, 0), "matrix^T x batch"),
                 sample({f32({2, 1, 3, 4}), f32({3, 4, 5})}, mm_attrs(0, 0),
                        "broadcast batch dims")};
           },
       .doc = "matrix product op(A) op(B) over the last two dims, op = transpose when the flag is "
              "set; leading batch dims broadcast",
              .flops = matmul_flops});

  reg.define({.name = "log_softmax",
              .attrs = {{"axis", AttrKind::Int}},
              .infer =
                  [](InTypes in, const Attrs& a) -> Result<Types> {
                if (!normalize_axis(a.get_int("axis"), static_cast<int64_t>(in[0].shape.size())))
                  return make_error("axis out of range for " + shape_str(in[0].shape));
                return Types{in[0]};
              },
              .vjp = [](const GradContext& c) {  // g - softmax * sum(g)
                int64_t ax = c.attrs.get_int("axis");
                Ref s = sum(c.e, c.gout(0), {ax}, true);
                return Refs{sub(c.e, c.gout(0), mul(c.e, exp(c.e, c.out(0)), s))};
              },
              .jvp = [](const JvpContext& c) {  // t - sum(softmax * t)
                int64_t ax = c.attrs.get_int("axis");
                Ref s = sum(c.e, mul(c.e, exp(c.e, c.out(0)), c.tan(0)), {ax}, true);
                return Refs{sub(c.e, c.tan(0), s)};
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                RefArray r = in[0];
                int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(r.shape.size()));
                for_each_line(r.shape, ax, [&](int64_t off, int64_t stride, int64_t len) {
                  double mx = -std::numeric_limits<double>::infinity();
                  for (int64_t i = 0; i < len; ++i) mx = std::max(mx, r.v[off + i * stride]);
                  double s = 0;
                  for (int64_t i = 0; i < len; ++i) s += std::exp(r.v[off + i * stride] - mx);
                  for (int64_t i = 0; i < len; ++i) r.v[off + i * stride] -= mx + std::log(s);
                });
                return std::vector<RefArray>{r};
              },
              .samples = [] {
                std::vector<OpSample> v{sample({f32({4, 7})}, {{"axis", int64_t{-1}}}, "last axis"),
                                        sample({f32({3, 4, 2})}, {{"axis", int64_t{1}}}, "middle axis")};
                for (auto& s : v) {
                  s.lo = -3;
                  s.hi = 3;
                }
                return v;
              },
              .doc = "x - log(sum(exp(x))) along an axis, computed stably"});

  reg.define({.name = "one_hot",
              .attrs = {{"num_classes", AttrKind::Int}},
              .infer =
                  [](InTypes in, const Attrs& a) -> Result<Types> {
                if (in[0].dtype != DType::I64 || in[0].shape.size() != 1)
                  return make_error("expects i64 labels [N], got " + type_str(in[0]));
                if (a.get_int("num_classes") < 1) return make_error("num_classes must be >= 1");
                return Types{{DType::F32, {in[0].shape[0], a.get_int("num_classes")}}};
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                int64_t c = a.get_int("num_classes"), n = in[0].shape[0];
                RefArray r{{n, c}, std::vector<double>(static_cast<size_t>(n * c), 0.0)};
                for (int64_t i = 0; i < n; ++i) {
                  auto l = static_cast<int64_t>(in[0].v[static_cast<size_t>(i)]);
                  if (l >= 0 && l < c) r.v[static_cast<size_t>(i * c + l)] = 1.0;
                }
                return std::vector<RefArray>{r};
              },
              .samples = [] {
                OpSample s = sample({i64({6})}, {{"num_classes", int64_t{4}}});
                s.int_high = 4;
                return std::vector<OpSample>{s};
              },
              .kind = OpKind::NonDiff,
              .doc = "integer labels [N] -> f32 [N, C] with a 1 at each label (0 row if out of range)"});

  reg.define({.name = "argmax",
              .attrs = {{"axis", AttrKind::Int}},
              .infer =
                  [](InTypes in, const Attrs& a) -> Result<Types> {
                auto r = static_cast<int64_t>(in[0].shape.size());
                auto ax = normalize_axis(a.get_int("axis"), r);
                if (!ax) return make_error("axis out of range for " + shape_str(in[0].shape));
                Shape s = in[0].shape;
                s.erase(s.begin() + *ax);
                return Types{{DType::I64, s}};
              },
              .reference = [](std::span<const RefArray> in, const Attrs& a) {
                const RefArray& x = in[0];
                int64_t ax = *normalize_axis(a.get_int("axis"), static_cast<int64_t>(x.shape.size()));
                Shape s = x.shape;
                s.erase(s.begin() + ax);
                RefArray r{s, {}};
                for_each_line(x.shape, ax, [&](int64_t off, int64_t stride, int64_t len) {
                  int64_t best = 0;
                  for (int64_t i = 1; i < len; ++i)
                    if (x.v[off + i * stride] > x.v[off + best * stride]) best = i;
                  r.v.push_back(static_cast<double>(best));
                });
                // for_each_line visits (outer, inner) in row-major order of the result.
                return std::vector<RefArray>{r};
              },
              .samples = [] {
                return std::vector<OpSample>{sample({f32({5, 7})}, {{"axis", int64_t{1}}}),
                                             sample({f32({4, 3})}, {{"axis", int64_t{0}}})};
              },
              .kind = OpKind::NonDiff,
              .doc = "index of the largest element along an axis (first on ties)"});
}

}  // namespace mls::ops
