// Internal to engine/cpu: conv2d's forward, exposed for the fused conv2d_act kernel
// (engine/cpu/fused_kernels.cpp), which is conv2d with a bias and activation epilogue; and
// the 2x2 max pool's gradient routing, for batch_norm_pool_backward (batch_norm_kernels.cpp)
// and conv2d_pool_backward_weight (conv_weight_kernels.cpp).
//
//   conv2d_forward(call, bias, Activation::Relu);   // call: conv2d's (x, w) and attributes
#pragma once

#include <span>

#include "engine/core/backend.h"
#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/ir/value.h"

namespace mls::cpu {

// y = act(conv2d(x, w) + bias[o]) for inputs 0 and 1 of `c` into output 0; bias [O] may be
// null. Each (sample, group) block gets its bias and activation right after it is computed,
// while it is still in cache.
void conv2d_forward(const KernelCall& c, const float* bias, Activation act);

// The workspace conv2d_forward carves (the padded input and output tiles, or im2col's
// columns, per task), declared for conv2d and conv2d_act (OpRegistry::register_workspace).
size_t conv2d_forward_workspace(std::span<const ValueType> inputs,
                                std::span<const ValueType> outputs, const Attrs& attrs,
                                const Backend& backend);

// One row of 2x2, stride-2 windows (conv_pool_kernels.cpp): r0 and r0 + w are the two input
// rows, g the row's n pooled gradients, d0 and d0 + w the two rows of the input gradient; each
// gradient goes to its window's first largest cell, the other three cells get 0.
void max_pool_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0, int64_t n);
// The same for the pool of a relu's output (max_pool2d_relu_backward: a window whose largest
// cell is not > 0 sends nothing), writing the gradient's second row at d0 + ld.
void max_pool_relu_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0,
                                    int64_t ld, int64_t n);

#ifdef __AVX512F__
// Which cell of each lane's 2x2 window (a b / c d) takes the window's gradient: the first
// largest (a later cell wins only when strictly larger, as the scalar rule and PyTorch), as
// one mask per cell; `send`, with relu, the lanes whose largest is > 0. Every AVX-512 pool
// backward (the row function, the row-pair groups, conv_sample_lanes' route_lanes) asks here.
struct Winner2x2 {
  __mmask16 cell[4];
  __mmask16 positive;  // the largest > 0 (max_pool2d_relu_backward sends only then)
};
inline Winner2x2 winner_2x2(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __mmask16 gb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ);
  const __m512 best1 = _mm512_mask_blend_ps(gb, a, b);
  const __mmask16 gc = _mm512_cmp_ps_mask(c, best1, _CMP_GT_OQ);
  const __m512 best2 = _mm512_mask_blend_ps(gc, best1, c);
  const __mmask16 gd = _mm512_cmp_ps_mask(d, best2, _CMP_GT_OQ);
  const __m512 largest = _mm512_mask_blend_ps(gd, best2, d);
  return {.cell = {static_cast<__mmask16>(~gb & ~gc & ~gd), static_cast<__mmask16>(gb & ~gc & ~gd),
                   static_cast<__mmask16>(gc & ~gd), gd},
          .positive = _mm512_cmp_ps_mask(largest, _mm512_setzero_ps(), _CMP_GT_OQ)};
}
#endif

}  // namespace mls::cpu
