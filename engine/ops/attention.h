// Attention as composites of existing ops (batched matmul, softmax, transpose, reshape), so
// every backend and every derivative comes for free.
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
