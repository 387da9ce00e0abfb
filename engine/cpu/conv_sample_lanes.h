// Internal to engine/cpu: convolutions with 16 samples across the vector lanes, for small
// planes (conv_sample_lanes.cpp), where the usual layout leaves lanes empty: the input
// gradient (in place of the fold) and the forward with few output channels (in place of the
// flat tiles). conv_kernels.cpp asks each *_pays before the paths it replaces.
//
//   if (conv::lanes_input_pays(s)) {
//     Workspace ws(c, conv::lanes_input_floats(s, threads));
//     conv::lanes_backward_input(c, s, g, w, dx, ws.base);
//   }
#pragma once

#include "engine/cpu/conv_common.h"

namespace mls::cpu::conv {

// Stride 1, no dilation, one group, kernels 3 or 5 wide, g's rows + kw - 1 <= 14 columns,
// and a batch that fills 3/4 of its blocks of 16 (AVX-512 builds only).
bool lanes_input_pays(const ConvShape& s);
size_t lanes_input_floats(const ConvShape& s, int64_t threads);
// dx [n, c, h, w] from g [n, o, oh, ow] and w [o, c, kh, kw]; ws: lanes_input_floats floats.
void lanes_backward_input(const KernelCall& call, const ConvShape& s, const float* g,
                          const float* w, float* dx, float* ws);

// The forward: one group, stride 1, no dilation, kernels 3 or 5 wide, at most 6 output
// channels, a padded input of 16 samples within 256 KiB, and a batch as above.
bool lanes_forward_pays(const ConvShape& s);
size_t lanes_forward_floats(const ConvShape& s, int64_t threads);
// y [n, o, oh, ow] = act(conv2d(x, w) + bias[o]) (bias may be null).
void lanes_forward(const KernelCall& call, const ConvShape& s, const float* x, const float* w,
                   float* y, float* ws, const float* bias, Activation act);

// conv2d_backward_weight: (x, g) -> dw [o, c, kh, kw] (one group, stride 1, no dilation,
// kernels 5 wide, an even output width, a task's buffers for 16 samples within 768 KiB,
// a batch as above).
bool lanes_weight_pays(const ConvShape& s);
size_t lanes_weight_floats(const ConvShape& s, int64_t threads);
void lanes_backward_weight(const KernelCall& call, const ConvShape& s, const float* x,
                           const float* g, float* dw, float* ws);
// conv2d_pool_backward_weight: (x, gp, y) -> (dw [o, c, kh, kw], db [o]) with the output
// gradient gp routed through the 2x2 max pool of y (one group, stride 1, no dilation, kernels
// 3 or 5 wide, a task's buffers for 16 samples within 768 KiB, a batch as above).
bool lanes_pool_weight_pays(const ConvShape& s);
size_t lanes_pool_weight_floats(const ConvShape& s, int64_t threads);
void lanes_pool_backward_weight(const KernelCall& call, const ConvShape& s, const float* x,
                                const float* gp, const float* y, float* dw, float* db, float* ws);

}  // namespace mls::cpu::conv
