// Internal to engine/cpu: kernel helpers and the per-family registration functions.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/op.h"
#include "engine/core/tensor.h"
#include "engine/cpu/cpu_backend.h"

namespace mls::cpu {

void register_elementwise_kernels(OpRegistry& reg);
void register_reduce_kernels(OpRegistry& reg);
void register_shape_kernels(OpRegistry& reg);
void register_nn_kernels(OpRegistry& reg);
void register_optimizer_kernels(OpRegistry& reg);
void register_math_kernels(OpRegistry& reg);
void register_layout_kernels(OpRegistry& reg);
void register_conv_kernels(OpRegistry& reg);
void register_norm_kernels(OpRegistry& reg);
void register_lowp_kernels(OpRegistry& reg);  // lowp_kernels.cpp: matmul_lowp (bf16, f16)
void register_fused_kernels(OpRegistry& reg);
void register_attention_kernels(OpRegistry& reg);  // attention_kernels.cpp

inline ThreadPool& pool_of(const KernelCall& c) { return static_cast<CpuBackend&>(c.backend).pool(); }

// Kernels take contiguous tensors: the executors only make contiguous values.
template <typename T>
T* in_ptr(const KernelCall& c, size_t i) {
  MLS_CHECK(c.inputs[i]->is_contiguous(), "CPU kernel given a strided input");
  return c.inputs[i]->data<T>();
}
template <typename T>
T* out_ptr(const KernelCall& c, size_t i) {
  return c.outputs[i]->data<T>();
}

// The workspace the caller placed for this call (OpRegistry::register_workspace), as
// floats; {nullptr, 0} where it gave none.
struct FloatSpan {
  float* p = nullptr;
  int64_t n = 0;
};
inline FloatSpan workspace_of(const KernelCall& c) {
  if (!c.workspace || !c.workspace->host_ptr()) return {};
  return {reinterpret_cast<float*>(static_cast<char*>(c.workspace->host_ptr()) + c.workspace_offset),
          static_cast<int64_t>(c.workspace_bytes / sizeof(float))};
}

// A kernel's scratch of `floats`: the workspace its caller placed (a compiled plan's arena,
// the eager session's buffer) where it is large enough, else a vector of its own for this
// call (a kernel called directly). The kernel carves it as its workspace function sizes it.
struct Workspace {
  float* base = nullptr;
  std::vector<float> own;
  Workspace(const KernelCall& c, size_t floats) {
    const FloatSpan given = workspace_of(c);
    if (given.p && static_cast<size_t>(given.n) >= floats) {
      base = given.p;
    } else if (floats > 0) {
      own.resize(floats);
      base = own.data();
    }
  }
};

// Elements below which a loop is not worth splitting across threads.
inline constexpr int64_t kParallelGrain = 1 << 15;

// Walks `out_shape` with two broadcast inputs: fn(a_offset, a_inner_stride, b_offset,
// b_inner_stride, out_offset, inner_length) once per innermost row, rows [lo, hi).
struct BroadcastPlan {
  Shape out;
  Strides sa, sb;  // element strides of a and b over out's axes (0 where broadcast)
  int64_t inner = 1, rows = 1;
};
BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out);
template <typename Fn>
void for_broadcast_rows(const BroadcastPlan& p, int64_t lo, int64_t hi, Fn fn) {
  size_t r = p.out.size();
  if (r == 0) {
    fn(0, 0, 0, 0, 0, 1);
    return;
  }
  // Decompose row lo into a multi-index over the outer axes.
  std::vector<int64_t> idx(r - 1, 0);
  int64_t rem = lo, oa = 0, ob = 0;
  for (size_t d = r - 1; d-- > 0;) {
    idx[d] = rem % p.out[d];
    rem /= p.out[d];
    oa += idx[d] * p.sa[d];
    ob += idx[d] * p.sb[d];
  }
  for (int64_t row = lo; row < hi; ++row) {
    fn(oa, p.sa[r - 1], ob, p.sb[r - 1], row * p.inner, p.inner);
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < p.out[d]) {
        oa += p.sa[d];
        ob += p.sb[d];
        break;
      }
      oa -= p.sa[d] * (p.out[d] - 1);
      ob -= p.sb[d] * (p.out[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace mls::cpu
