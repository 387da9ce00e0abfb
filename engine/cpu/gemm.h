// Internal to engine/cpu: the one GEMM entry point every CPU kernel calls (matmul, the
// convolutions, the fused matmul/conv + bias + activation kernels).
//
//   GemmArgs g{.m = 128, .n = 256, .k = 784, .a = x, .lda = 784, .b = w, .ldb = 256,
//              .c = y, .ldc = 256, .bias = b, .bias_axis = BiasAxis::Col,
//              .act = Activation::Relu};
//   gemm(pool_of(call), g);    // y = relu(x @ w + b), row-major
//
// Row-major, C = op(A) op(B) (+ beta * C) (+ bias) then the activation, all applied while
// each block of C is still in cache. Keeping one entry point lets the engine choose its
// own kernels (and threading) instead of whatever OPENBLAS_CORETYPE selects.
#pragma once

#include <cstdint>

#include "engine/cpu/thread_pool.h"
#include "engine/ops/fused.h"

namespace mls::cpu {

using Activation = EpilogueAct;  // the epilogue list (engine/ops/fused.h)
enum class BiasAxis : uint8_t {
  None,
  Col,  // bias[n]: one value per column, added to every row (dense layers)
  Row,  // bias[m]: one value per row (convolutions: rows are output channels)
};

struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  float beta = 0.0f;  // 0: C is overwritten (its old contents may be NaN)
  const float* bias = nullptr;
  BiasAxis bias_axis = BiasAxis::None;
  Activation act = Activation::None;
  // gemm_workspace_floats(*this, pool size) floats at a 64-byte aligned address, for the
  // packed panels and partial sums: a kernel's declared workspace (the memory plan holds it).
  // Null: per-thread buffers that only grow (engine/cpu/scratch.h), which no plan sees.
  float* workspace = nullptr;
  int64_t workspace_floats = 0;  // its size: a smaller one (another pool) is not used
};

// Products of fewer than this many multiply-adds (m n k) run on the calling thread: on the
// 2-core VM measured, a second thread did not pay below ~4M (~40 us on one core): a worker
// that has gone to sleep takes 5-30 us to wake, and two cores reading the same A share its
// cache traffic. Callers with many small products (batched matmul, convolutions) split
// those over the pool themselves.
inline constexpr int64_t kGemmParallelMacs = int64_t{1} << 22;

// `floats` rounded up to a multiple of 16 (64 bytes): regions of a workspace laid end to end
// at such sizes all start 64-byte aligned, as the packed panels need.
constexpr int64_t round_to_line(int64_t floats) { return (floats + 15) / 16 * 16; }

// The scratch one gemm() of this shape takes on a pool of `threads` (a multiple of 16
// floats): packed k x 64 panels of B (one per part that runs at once), split-K's second half
// of C, a GEMV's gathered x and sums. 0 where CBLAS runs the product. Kernels that call
// gemm() declare it as workspace.
int64_t gemm_workspace_floats(const GemmArgs& g, int threads);

// Runs on the calling thread and the pool's workers. The engine's kernels where the build
// has AVX-512F or AVX2 + FMA (gemm_simd.cpp), else gemm_cblas.
void gemm(ThreadPool& pool, const GemmArgs& g);
// Whose kernels gemm() runs: "AVX-512", "AVX2" or "CBLAS" (benchmarks print it).
const char* gemm_kernels();

// The same product through cblas_sgemm (threaded by OpenBLAS) and an epilogue pass over C:
// the fallback, and what tests and benchmarks compare the engine's kernels with.
void gemm_cblas(ThreadPool& pool, const GemmArgs& g);

// The activation applied to n floats in place (also used by fused elementwise kernels).
void apply_activation(Activation act, float* x, int64_t n);

}  // namespace mls::cpu
