#include "engine/ops/attention.h"

#include <cmath>

#include "engine/core/check.h"
#include "engine/ops/layout.h"
#include "engine/ops/nn.h"

namespace mls {

namespace {

// [N,T,E] -> [N*heads, T, d]
Ref split_heads(Emitter& e, Ref x, int64_t heads) {
  const Shape s = e.shape_of(x);
  const int64_t n = s[0], t = s[1], d = s[2] / heads;
  Ref y = transpose(e, reshape(e, x, {n, t, heads, d}), {0, 2, 1, 3});
  return reshape(e, y, {n * heads, t, d});
}

// [N*heads, T, d] -> [N,T,E]
Ref join_heads(Emitter& e, Ref x, int64_t n, int64_t heads) {
  const Shape s = e.shape_of(x);
  const int64_t t = s[1], d = s[2];
  Ref y = transpose(e, reshape(e, x, {n, heads, t, d}), {0, 2, 1, 3});
  return reshape(e, y, {n, t, heads * d});
}

}  // namespace

Ref causal_mask(Emitter& e, int64_t tq, int64_t tk) {
  MLS_CHECK(tq >= 1 && tk >= 1, "causal_mask: empty sequence");
  if (tk == 1) return fill(e, {DType::F32, {tq, tk}}, 0.0);
  // u = [0, 1 x (tk-1), 0 x tq] has period p = tq + tk. Laid out in rows of l = p - 1,
  // element (i, j) reads u[(i l + j) mod p] = u[(j - i) mod p], which is 1 exactly for
  // 1 <= j - i <= tk - 1 (j - i <= 0 lands on u[0] or on u[tk+1 ..]).
  const int64_t p = tq + tk, l = p - 1;
  Ref u = pad(e, fill(e, {DType::F32, {tk - 1}}, 1.0), {1, tq});
  Ref rows = reshape(e, expand(e, reshape(e, u, {1, p}), {tq, p}), {tq * p});
  Ref m = reshape(e, slice(e, rows, 0, 0, tq * l), {tq, l});
  return slice(e, m, 1, 0, tk);
}

Ref attention_scores(Emitter& e, Ref q, Ref k, bool causal, double alpha) {
  const Shape qs = e.shape_of(q), ks = e.shape_of(k);
  MLS_CHECK(qs.size() >= 2 && ks.size() >= 2, "attention expects [..., T, d] operands");
  const int64_t tq = qs[qs.size() - 2], tk = ks[ks.size() - 2];
  Ref scores = scale(e, matmul(e, q, k, false, true), alpha);
  if (causal && tk > 1) {
    // exp(-1e9 - max) is exactly 0 in f32, as -inf would be, without any inf - inf.
    scores = add(e, scores, scale(e, causal_mask(e, tq, tk), -1e9));
  }
  return scores;
}

Ref scaled_dot_product_attention(Emitter& e, Ref q, Ref k, Ref v, bool causal) {
  const double d = static_cast<double>(e.shape_of(q).back());
  return matmul(e, softmax(e, attention_scores(e, q, k, causal, 1.0 / std::sqrt(d)), -1), v);
}

AttentionOut fused_attention(Emitter& e, Ref q, Ref k, Ref v, bool causal, double alpha) {
  Refs r = e.emit("attention", std::vector<Ref>{q, k, v},
                  {{"causal", int64_t{causal}}, {"scale", alpha}});
  return {r[0], r[1]};
}

AttentionOut attention_composite(Emitter& e, Ref q, Ref k, Ref v, bool causal, double alpha) {
  Ref s = attention_scores(e, q, k, causal, alpha);
  Ref logp = log_softmax(e, s, -1);
  // lse = s - log p in every column; column 0 is never masked.
  const Shape ss = e.shape_of(s);
  const auto last = static_cast<int64_t>(ss.size()) - 1;
  Ref lse = squeeze(e, slice(e, sub(e, s, logp), last, 0, 1), {last});
  return {matmul(e, exp(e, logp), v), lse};
}

Ref multi_head_attention(Emitter& e, Ref x, Ref wq, Ref wk, Ref wv, Ref wo,
                         const AttentionBiases& biases, int64_t num_heads, bool causal) {
  const Shape s = e.shape_of(x);
  MLS_CHECK(s.size() == 3, "multi_head_attention expects x [N, T, E]");
  MLS_CHECK(num_heads >= 1 && s[2] % num_heads == 0, "num_heads must divide E");
  Ref q = split_heads(e, linear(e, x, wq, biases.q), num_heads);
  Ref k = split_heads(e, linear(e, x, wk, biases.k), num_heads);
  Ref v = split_heads(e, linear(e, x, wv, biases.v), num_heads);
  Ref o = join_heads(e, scaled_dot_product_attention(e, q, k, v, causal), s[0], num_heads);
  return linear(e, o, wo, biases.o);
}

}  // namespace mls
