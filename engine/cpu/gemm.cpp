// GEMM through CBLAS (OpenBLAS), then the bias and activation epilogue over C.
#include "engine/cpu/gemm.h"

#include <cblas.h>

#include <cmath>

namespace mls::cpu {

void apply_activation(Activation act, float* x, int64_t n) {
  switch (act) {
    case Activation::None: return;
    case Activation::Relu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      return;
    case Activation::Sigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case Activation::Tanh:
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      return;
    case Activation::Gelu:  // the exact (erf) form, as the gelu op
      for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      return;
    case Activation::Silu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
  }
}

void gemm(ThreadPool& pool, const GemmArgs& g) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), 1.0f, g.a,
              static_cast<blasint>(g.lda), g.b, static_cast<blasint>(g.ldb), g.beta, g.c,
              static_cast<blasint>(g.ldc));
  if (g.bias_axis == BiasAxis::None && g.act == Activation::None) return;
  pool.parallel_for(0, g.m, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float* row = g.c + i * g.ldc;
      if (g.bias_axis == BiasAxis::Col)
        for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[j];
      else if (g.bias_axis == BiasAxis::Row)
        for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[i];
      apply_activation(g.act, row, g.n);
    }
  });
}

}  // namespace mls::cpu
