// Attention as composites of existing ops (batched matmul, softmax, transpose, reshape), so
// every backend and every derivative comes for free; and the fused attention op
// (attention_ops.cpp), one kernel for scores, mask, softmax and weighted sum, which the
// attention fusion pass (engine/passes) puts in the composite's place on a backend that has
// its kernels.
//
//   // self-attention over x [N,T,E] with 4 heads; weights [E,E] as Linear's ([in, out])
//   Ref y = multi_head_attention(e, x, wq, wk, wv, wo, {bq, bk, bv, bo}, 4, /*causal=*/true);
//   // or the core on its own: q [B,Tq,d], k [B,Tk,d], v [B,Tk,dv] -> [B,Tq,dv]
//   Ref o = scaled_dot_product_attention(e, q, k, v, false);
#pragma once

#include <cstdint>

#include "engine/ir/emitter.h"

namespace mls {

// f32 [tq, tk] with 1 where key j comes after query i (j > i: what a causal query may not
// see) and 0 elsewhere. Built from fill, pad, expand, reshape and slice (no constants, so
// any Emitter can build it; constant folding turns it into one constant in a graph).
Ref causal_mask(Emitter& e, int64_t tq, int64_t tk);

// softmax(q k^T / sqrt(d)) v over the last two axes, the leading ones batched. With
// `causal`, key j > query i is left out (PyTorch's is_causal: the top-left aligned
// lower triangle).
Ref scaled_dot_product_attention(Emitter& e, Ref q, Ref k, Ref v, bool causal);

// The fused op's outputs: o [B,Tq,dv] and the log-sum-exp of each query's scaled scores over
// the keys it sees, lse [B,Tq] (what its backward recomputes the probabilities from).
struct AttentionOut {
  Ref o, lse;
};

// The op "attention": q [B,Tq,d], k [B,Tk,d], v [B,Tk,dv], softmax(scale q k^T) v with the
// causal mask when `causal`. Its gradient is the op "attention_backward".
AttentionOut fused_attention(Emitter& e, Ref q, Ref k, Ref v, bool causal, double scale);

// The same two values as a composite (scores, mask, log_softmax, matmul): what the fused op's
// forward-mode rule differentiates. scaled_dot_product_attention is its `o` with scale
// 1/sqrt(d).
AttentionOut attention_composite(Emitter& e, Ref q, Ref k, Ref v, bool causal, double scale);

// scale q k^T, plus -1e9 where the causal mask hides a key: the scores a softmax reads.
Ref attention_scores(Emitter& e, Ref q, Ref k, bool causal, double scale);

// Optional biases of the four projections (invalid: none), each [E].
struct AttentionBiases {
  Ref q, k, v, o;
};

// Self-attention as PyTorch's nn.MultiheadAttention(E, num_heads, batch_first=True) with
// query = key = value = x [N,T,E]: q = x Wq + bq (k, v alike), split into num_heads heads
// of d = E / num_heads features, attention per head as one batched product over
// [N*heads, T, d], heads joined back and projected by Wo + bo. Weights [E,E] ([in, out]).
Ref multi_head_attention(Emitter& e, Ref x, Ref wq, Ref wk, Ref wv, Ref wo,
                         const AttentionBiases& biases, int64_t num_heads, bool causal);

}  // namespace mls
