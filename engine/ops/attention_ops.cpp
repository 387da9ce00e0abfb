// The fused attention ops: "attention" (q, k, v -> o and the log-sum-exp of each query's
// scores) and its gradient "attention_backward" (flash attention 2's backward: the
// probabilities recomputed from lse, never stored). The CPU kernels are in
// engine/cpu/attention_kernels.cpp; the attention fusion pass (engine/passes) puts the op
// in the place of scaled_dot_product_attention's composite on backends that have both.
//
// [SECTION] helpers: shapes, the tape of a composite
// [SECTION] attention
// [SECTION] attention_backward
// [SECTION] registration
//
// attention's reverse rule is one attention_backward op. The rules a second derivative needs
// (attention_backward's, and attention's forward mode) differentiate the same computation
// written as a composite of matmuls, exp and softmax: rare, so the simple form serves.
#include <algorithm>
#include <cmath>
#include <variant>

#include "engine/autodiff/autodiff.h"
#include "engine/ir/graph.h"
#include "engine/ops/attention.h"
#include "engine/ops/layout.h"
#include "engine/ops/op_helpers.h"
#include "engine/ops/tape_emitter.h"

namespace mls::ops {

namespace {

// [SECTION] helpers: shapes, the tape of a composite

const std::vector<AttrSpec> kAttentionAttrs{{"causal", AttrKind::Int}, {"scale", AttrKind::Float}};

bool causal_of(const Attrs& a) {
  return a.get_int("causal") != 0;
}
double scale_of(const Attrs& a) {
  return a.get_float("scale");
}

Result<void> check_attention_attrs(const Attrs& a) {
  const AttrValue* c = a.find("causal");
  const AttrValue* s = a.find("scale");
  if (!c || !std::holds_alternative<int64_t>(*c))
    return make_error("expects an int attribute causal (0 or 1)");
  if (!s || !std::holds_alternative<double>(*s))
    return make_error("expects a float attribute scale");
  return {};
}

// q [B,Tq,d], k [B,Tk,d], v [B,Tk,dv]: an error naming the first operand that breaks it.
Result<void> check_qkv(InTypes in) {
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < 3; ++i) {
    if (in[i].dtype != DType::F32)
      return make_error(std::string(names[i]) + " must be f32, got " + type_str(in[i]));
    if (in[i].shape.size() != 3)
      return make_error(std::string(names[i]) + " must be [B, T, d], got " + type_str(in[i]));
  }
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  if (k[0] != q[0] || v[0] != q[0]) return make_error("q, k and v must have one batch size");
  if (k[2] != q[2])
    return make_error("q " + shape_str(q) + " and k " + shape_str(k) +
                      " must have one feature size");
  if (v[1] != k[1])
    return make_error("k " + shape_str(k) + " and v " + shape_str(v) + " must have one key count");
  return {};
}

// Visible (query, key) pairs of one batch entry: all, or key j <= query i.
double visible_pairs(int64_t tq, int64_t tk, bool causal) {
  if (!causal) return static_cast<double>(tq) * static_cast<double>(tk);
  double n = 0;
  for (int64_t i = 0; i < tq; ++i) n += static_cast<double>(std::min(i + 1, tk));
  return n;
}

// [SECTION] attention

Result<Types> infer_attention(InTypes in, const Attrs& a) {
  if (auto r = check_attention_attrs(a); !r) return r.error();
  if (auto r = check_qkv(in); !r) return r.error();
  const Shape &q = in[0].shape, &v = in[2].shape;
  return Types{f32({q[0], q[1], v[2]}), f32({q[0], q[1]})};
}

std::vector<RefArray> attention_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &q = in[0], &k = in[1], &v = in[2];
  const int64_t b = q.shape[0], tq = q.shape[1], d = q.shape[2], tk = k.shape[1], dv = v.shape[2];
  const bool causal = causal_of(a);
  const double alpha = scale_of(a);
  RefArray o{{b, tq, dv}, std::vector<double>(static_cast<size_t>(b * tq * dv), 0.0)};
  RefArray lse{{b, tq}, std::vector<double>(static_cast<size_t>(b * tq), 0.0)};
  std::vector<double> s(static_cast<size_t>(tk));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t seen = causal ? std::min(i + 1, tk) : tk;
      const double* qi = q.v.data() + (n * tq + i) * d;
      double m = -INFINITY;
      for (int64_t j = 0; j < seen; ++j) {
        const double* kj = k.v.data() + (n * tk + j) * d;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
        s[static_cast<size_t>(j)] = alpha * dot;
        m = std::max(m, alpha * dot);
      }
      double l = 0;
      for (int64_t j = 0; j < seen; ++j) l += std::exp(s[static_cast<size_t>(j)] - m);
      double* oi = o.v.data() + (n * tq + i) * dv;
      for (int64_t j = 0; j < seen; ++j) {
        const double p = std::exp(s[static_cast<size_t>(j)] - m) / l;
        const double* vj = v.v.data() + (n * tk + j) * dv;
        for (int64_t c = 0; c < dv; ++c) oi[c] += p * vj[c];
      }
      lse.v[static_cast<size_t>(n * tq + i)] = m + std::log(l);
    }
  return {o, lse};
}

// Forward (4 products' worth per visible pair: q.k and p v).
double attention_flops(std::span<const ValueType> in, std::span<const ValueType>, const Attrs& a) {
  const Shape &q = in[0].shape, &v = in[2].shape;
  return static_cast<double>(q[0]) * visible_pairs(q[1], in[1].shape[1], causal_of(a)) *
         (2.0 * static_cast<double>(q[2]) + 2.0 * static_cast<double>(v[2]));
}

// delta_i = sum_c dO_ic o_ic - d(lse_i): the gradient of lse enters as softmax's own
// backward would take it, since d lse_i / d s_ij = p_ij.
Refs attention_vjp(const GradContext& c) {
  Emitter& e = c.e;
  if (!c.gout(0).valid() && !c.gout(1).valid()) return Refs(3);
  Ref dout = c.gout(0).valid() ? c.gout(0) : fill(e, e.type_of(c.out(0)), 0.0);
  Ref delta = sum(e, mul(e, dout, c.out(0)), {2}, false);
  if (c.gout(1).valid()) delta = sub(e, delta, c.gout(1));
  const Ref ins[] = {c.in(0), c.in(1), c.in(2), dout, c.out(1), delta};
  Refs g = e.emit("attention_backward", ins, c.attrs);
  Refs r(3);
  for (size_t i = 0; i < 3; ++i)
    if (c.needs(i)) r[i] = g[i];
  return r;
}

Refs attention_jvp(const JvpContext& c) {
  TapeEmitter t(c.e, "attention");
  AttentionOut f =
      attention_composite(t, c.in(0), c.in(1), c.in(2), causal_of(c.attrs), scale_of(c.attrs));
  const Ref outs[] = {f.o, f.lse};
  return t.jvp(c, outs);
}

// [SECTION] attention_backward

Result<Types> infer_attention_backward(InTypes in, const Attrs& a) {
  if (auto r = check_attention_attrs(a); !r) return r.error();
  if (auto r = check_qkv(in); !r) return r.error();
  const Shape &q = in[0].shape, &v = in[2].shape;
  const ValueType dout = f32({q[0], q[1], v[2]}), row = f32({q[0], q[1]});
  if (!(in[3] == dout))
    return make_error("dO must be " + type_str(dout) + ", got " + type_str(in[3]));
  if (!(in[4] == row))
    return make_error("lse must be " + type_str(row) + ", got " + type_str(in[4]));
  if (!(in[5] == row))
    return make_error("delta must be " + type_str(row) + ", got " + type_str(in[5]));
  return Types{in[0], in[1], in[2]};
}

// p_ij = exp(s_ij - lse_i), dv_j = sum_i p_ij dO_i, ds_ij = p_ij (dO_i . v_j - delta_i),
// dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i (masked pairs: p = 0).
std::vector<RefArray> attention_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray &q = in[0], &k = in[1], &v = in[2], &dout = in[3], &lse = in[4], &delta = in[5];
  const int64_t b = q.shape[0], tq = q.shape[1], d = q.shape[2], tk = k.shape[1], dv = v.shape[2];
  const bool causal = causal_of(a);
  const double alpha = scale_of(a);
  RefArray dq{q.shape, std::vector<double>(q.v.size(), 0.0)};
  RefArray dk{k.shape, std::vector<double>(k.v.size(), 0.0)};
  RefArray dvv{v.shape, std::vector<double>(v.v.size(), 0.0)};
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t seen = causal ? std::min(i + 1, tk) : tk;
      const size_t row = static_cast<size_t>(n * tq + i);
      const double* qi = q.v.data() + row * static_cast<size_t>(d);
      const double* doi = dout.v.data() + row * static_cast<size_t>(dv);
      for (int64_t j = 0; j < seen; ++j) {
        const size_t kr = static_cast<size_t>(n * tk + j);
        const double* kj = k.v.data() + kr * static_cast<size_t>(d);
        const double* vj = v.v.data() + kr * static_cast<size_t>(dv);
        double dot = 0, dp = 0;
        for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
        for (int64_t c = 0; c < dv; ++c) dp += doi[c] * vj[c];
        const double p = std::exp(alpha * dot - lse.v[row]);
        const double ds = p * (dp - delta.v[row]);
        for (int64_t c = 0; c < dv; ++c)
          dvv.v[kr * static_cast<size_t>(dv) + static_cast<size_t>(c)] += p * doi[c];
        for (int64_t c = 0; c < d; ++c) {
          dq.v[row * static_cast<size_t>(d) + static_cast<size_t>(c)] += alpha * ds * kj[c];
          dk.v[kr * static_cast<size_t>(d) + static_cast<size_t>(c)] += alpha * ds * qi[c];
        }
      }
    }
  return {dq, dk, dvv};
}

// Recomputed scores, then dv, dP, dq and dk: five products' worth per visible pair.
double attention_backward_flops(std::span<const ValueType> in, std::span<const ValueType>,
                                const Attrs& a) {
  const Shape &q = in[0].shape, &v = in[2].shape;
  return static_cast<double>(q[0]) * visible_pairs(q[1], in[1].shape[1], causal_of(a)) *
         (6.0 * static_cast<double>(q[2]) + 4.0 * static_cast<double>(v[2]));
}

// attention_backward as a composite of matmuls, exp and elementwise ops (its rules
// differentiate this): {dq, dk, dv}.
Refs attention_backward_composite(Emitter& e, std::span<const Ref> in, const Attrs& a) {
  const double alpha = scale_of(a);
  Ref s = attention_scores(e, in[0], in[1], causal_of(a), alpha);
  Ref p = exp(e, sub(e, s, unsqueeze(e, in[4], 2)));
  Ref dv = matmul(e, p, in[3], true, false);
  Ref dp = matmul(e, in[3], in[2], false, true);
  Ref ds = mul(e, p, sub(e, dp, unsqueeze(e, in[5], 2)));
  Ref dq = scale(e, matmul(e, ds, in[1]), alpha);
  Ref dk = scale(e, matmul(e, ds, in[0], true, false), alpha);
  return {dq, dk, dv};
}

Refs attention_backward_vjp(const GradContext& c) {
  return composite_vjp(c, attention_backward_composite, "attention");
}
Refs attention_backward_jvp(const JvpContext& c) {
  return composite_jvp(c, attention_backward_composite, "attention");
}

Attrs attention_attrs(bool causal, double alpha) {
  return {{"causal", int64_t{causal}}, {"scale", alpha}};
}

}  // namespace

// [SECTION] registration

void register_attention_ops(OpRegistry& reg) {
  reg.define(
      {.name = "attention",
       .num_inputs = 3,
       .num_outputs = 2,
       .attrs = kAttentionAttrs,
       .infer = infer_attention,
       .vjp = attention_vjp,
       .jvp = attention_jvp,
       .reference = attention_ref,
       .samples =
           [] {
             return std::vector<OpSample>{sample({f32({2, 5, 3}), f32({2, 7, 3}), f32({2, 7, 4})},
                                                 attention_attrs(false, 0.6), "Tq < Tk, dv != d"),
                                          sample({f32({2, 6, 3}), f32({2, 4, 3}), f32({2, 4, 2})},
                                                 attention_attrs(true, 0.5), "causal, Tq > Tk"),
                                          sample({f32({1, 4, 2}), f32({1, 6, 2}), f32({1, 6, 3})},
                                                 attention_attrs(true, 1.0), "causal, Tq < Tk")};
           },
       .doc =
           "fused attention of q [B,Tq,d], k [B,Tk,d], v [B,Tk,dv]: (o = softmax(scale q k^T) v "
           "[B,Tq,dv], lse [B,Tq] the log-sum-exp of each query's scaled scores); causal: key j > "
           "query i left out (top-left aligned)",
       .flops = attention_flops});

  reg.define(
      {.name = "attention_backward",
       .num_inputs = 6,
       .num_outputs = 3,
       .attrs = kAttentionAttrs,
       .infer = infer_attention_backward,
       .vjp = attention_backward_vjp,
       .jvp = attention_backward_jvp,
       .reference = attention_backward_ref,
       .samples =
           [] {
             auto s = [](int64_t b, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal,
                         const char* note) {
               return sample({f32({b, tq, d}), f32({b, tk, d}), f32({b, tk, dv}), f32({b, tq, dv}),
                              f32({b, tq}), f32({b, tq})},
                             attention_attrs(causal, 0.7), note);
             };
             return std::vector<OpSample>{s(2, 4, 5, 3, 2, false, "Tq < Tk"),
                                          s(1, 5, 3, 2, 3, true, "causal, Tq > Tk")};
           },
       .doc =
           "the gradient of attention from (q, k, v, dO, lse, delta), delta_i = dO_i . o_i minus "
           "the gradient of lse_i: (dq, dk, dv), the probabilities recomputed from lse",
       .flops = attention_backward_flops});
}

}  // namespace mls::ops
