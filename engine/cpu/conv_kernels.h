// Internal to engine/cpu: conv2d's forward, exposed for the fused conv2d_act kernel
// (engine/cpu/fused_kernels.cpp), which is conv2d with a bias and activation epilogue.
//
//   conv2d_forward(call, bias, Activation::Relu);   // call: conv2d's (x, w) and attributes
#pragma once

#include <span>

#include "engine/core/backend.h"
#include "engine/ir/value.h"
#include "engine/cpu/gemm.h"

namespace mls::cpu {

// y = act(conv2d(x, w) + bias[o]) for inputs 0 and 1 of `c` into output 0; bias [O] may be
// null. Each (sample, group) block gets its bias and activation right after it is computed,
// while it is still in cache.
void conv2d_forward(const KernelCall& c, const float* bias, Activation act);

// The workspace conv2d_forward carves (the padded input and output tiles, or im2col's
// columns, per task), declared for conv2d and conv2d_act (OpRegistry::register_workspace).
size_t conv2d_forward_workspace(std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                                const Attrs& attrs, const Backend& backend);

}  // namespace mls::cpu
