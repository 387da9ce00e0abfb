// Internal to engine/cpu: the 16-bit float formats in bulk (lowp_kernels.cpp). Bulk
// conversions between f32 and bf16/f16, and the bf16 GEMM behind matmul_lowp.
//
//   f32_to_bf16_n(x, bits, n);                    // round to nearest even, as f32_to_bf16
//   GemmBf16Args g{.m = 128, .n = 256, .k = 784, .a = xb, .lda = 784, .b = wb, .ldb = 256,
//                  .c = y, .ldc = 256};
//   gemm_bf16(pool_of(call), g);                  // y (f32) = xb (bf16) @ wb (bf16)
//
// Every conversion gives the same bits as the scalar ones in engine/core/dtype.h for every
// input but NaN payloads (a NaN stays a NaN, quiet). AVX-512 BF16's conversion flushes
// subnormal inputs to zero, so lanes holding one are redone the portable way.
#pragma once

#include <cstdint>

#include "engine/cpu/thread_pool.h"

namespace mls::cpu {

void f32_to_bf16_n(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32_n(const uint16_t* x, float* y, int64_t n);
void f32_to_f16_n(const float* x, uint16_t* y, int64_t n);
void f16_to_f32_n(const uint16_t* x, float* y, int64_t n);

// Row-major C [m, n] (f32) = op(A) [m, k] x op(B) [k, n] with A and B bf16 bits: every
// product is exact in f32 and the sums are f32, as cblas_sbgemm (which Debian's OpenBLAS
// 0.3.21 declares but does not export). C is overwritten.
struct GemmBf16Args {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const uint16_t* a = nullptr;
  int64_t lda = 0;
  const uint16_t* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  // gemm_bf16_workspace_floats(*this, pool size) floats (4-byte words) at a 64-byte aligned
  // address: packed operands (or their f32 copies) and GEMM panels, from a kernel's declared
  // workspace. Null: per-thread buffers (engine/cpu/scratch.h) or, widened, allocations.
  float* workspace = nullptr;
  int64_t workspace_floats = 0;
};
void gemm_bf16(ThreadPool& pool, const GemmBf16Args& g);
// The scratch gemm_bf16 of this shape takes on a pool of `threads`.
int64_t gemm_bf16_workspace_floats(const GemmBf16Args& g, int threads);

// Whether gemm_bf16 runs on AVX-512 BF16 dot products (else: widened to f32, then SGEMM).
bool gemm_bf16_native();

}  // namespace mls::cpu
