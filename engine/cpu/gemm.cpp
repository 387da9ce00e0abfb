// cpu::gemm: the engine's own kernels (gemm_simd.cpp: AVX-512 or AVX2 + FMA) where they
// were compiled, else CBLAS (OpenBLAS) followed by the bias and activation epilogue over C.
#include "engine/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

#include "engine/cpu/gemm_simd.h"
#include "engine/cpu/scalar_math.h"

namespace mls::cpu {

// One case per act of the epilogue list (engine/ops/elementwise_list.h), each applying its
// elementwise entry's formula from scalar_math.h: the bits of the plain op's kernel.
void apply_activation(Activation act, float* x, int64_t n) {
  switch (act) {
    case Activation::None:
      return;
#define MLS_CPU_EPILOGUE(Name, text)                           \
  case Activation::Name:                                       \
    for (int64_t i = 0; i < n; ++i) x[i] = scalar::text(x[i]); \
    return;
      MLS_EPILOGUE_ACTS(MLS_CPU_EPILOGUE)
#undef MLS_CPU_EPILOGUE
  }
}

int64_t gemm_workspace_floats(const GemmArgs& g, int threads) {
  return gemm_simd_compiled() ? gemm_simd_workspace_floats(g, threads) : 0;
}

void gemm(ThreadPool& pool, const GemmArgs& g) {
  if (gemm_simd_compiled()) return gemm_simd(pool, g);
  gemm_cblas(pool, g);
}

const char* gemm_kernels() { return gemm_simd_name(); }

void gemm_cblas(ThreadPool& pool, const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  // CBLAS rejects a leading dimension of 0, which an empty (k == 0) operand may have.
  auto ld = [](int64_t v) { return static_cast<blasint>(std::max<int64_t>(v, 1)); };
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), 1.0f, g.a,
              ld(g.lda), g.b, ld(g.ldb), g.beta, g.c, ld(g.ldc));
  if ((g.bias_axis == BiasAxis::None || !g.bias) && g.act == Activation::None) return;
  pool.parallel_for(0, g.m, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float* row = g.c + i * g.ldc;
      if (g.bias && g.bias_axis == BiasAxis::Col)
        for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[j];
      else if (g.bias && g.bias_axis == BiasAxis::Row)
        for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[i];
      apply_activation(g.act, row, g.n);
    }
  });
}

}  // namespace mls::cpu
