// Convolution and pooling over NCHW tensors: builders, and the geometry that their ops
// (engine/ops/conv_ops.cpp) and CPU kernels (engine/cpu/conv_*.cpp) share.
//
//   Ref y = conv2d(e, x, w, {.padding = {2, 2}});           // x [N,C,H,W], w [O,C/groups,kh,kw]
//   y = relu(e, add(e, y, b));                              // bias b [O,1,1] broadcasts
//   Ref p = max_pool2d(e, y, {.kernel = {2, 2}});           // stride defaults to the kernel
//   Ref f = global_avg_pool(e, p);                          // [N,C]
//
// The ops: conv2d, conv2d_backward_input, conv2d_backward_weight, conv_transpose2d,
// max_pool2d, max_pool2d_backward, max_pool2d_gather, avg_pool2d, avg_pool2d_backward.
#pragma once

#include <array>

#include "engine/core/attrs.h"
#include "engine/core/result.h"
#include "engine/ir/emitter.h"

namespace mls {

using Pair2 = std::array<int64_t, 2>;  // (height, width)

// Attributes "stride", "padding", "dilation" ([h, w], or [v] for both), "groups" and, for
// conv_transpose2d, "output_padding". Omitted attributes take PyTorch's defaults.
struct Conv2dParams {
  Pair2 stride{1, 1};
  Pair2 padding{0, 0};
  Pair2 dilation{1, 1};
  int64_t groups = 1;
  Pair2 output_padding{0, 0};  // conv_transpose2d only
};

// Attributes "kernel", "stride" (default: the kernel), "padding" and, for avg_pool2d,
// "count_include_pad" (default 1: padded cells count in the divisor, as in PyTorch).
struct Pool2dParams {
  Pair2 kernel{2, 2};
  Pair2 stride{0, 0};  // 0: the kernel
  Pair2 padding{0, 0};
  bool count_include_pad = true;
};

// Reads and checks the attributes; the error names the bad one. A pool's stride comes back
// resolved (never 0).
Result<Conv2dParams> conv2d_params(const Attrs& a);
Result<Pool2dParams> pool2d_params(const Attrs& a);
Attrs conv2d_attrs(const Conv2dParams& p, bool transpose = false);  // with output_padding
Attrs pool2d_attrs(const Pool2dParams& p, bool avg = false);        // with count_include_pad

// Output extent along one axis of a window of k taps spaced d apart, moved by s over an
// input of `in` padded by p on both sides; 0 when the input is smaller than the window.
inline int64_t window_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d = 1) {
  int64_t room = in + 2 * p - d * (k - 1) - 1;
  return room < 0 ? 0 : room / s + 1;
}

// y = x (*) w, a cross-correlation as in PyTorch; no bias (add one shaped [O,1,1]).
Ref conv2d(Emitter& e, Ref x, Ref w, const Conv2dParams& p = {});
// The adjoint of conv2d in x: x [N,Cin,H,W], w [Cin,Cout/groups,kh,kw] -> [N,Cout,H',W'] with
// H' = (H-1)*stride - 2*padding + dilation*(kh-1) + output_padding + 1.
Ref conv_transpose2d(Emitter& e, Ref x, Ref w, const Conv2dParams& p = {});
Ref max_pool2d(Emitter& e, Ref x, const Pool2dParams& p);
Ref avg_pool2d(Emitter& e, Ref x, const Pool2dParams& p);
// Mean over H and W: [N,C,H,W] -> [N,C] (or [N,C,1,1] with keepdims). A composite.
Ref global_avg_pool(Emitter& e, Ref x, bool keepdims = false);

}  // namespace mls
