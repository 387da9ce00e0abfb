// Internal to engine/cpu/gemm*.cpp: the AVX-512 GEMM behind cpu::gemm (engine/cpu/gemm.h).
//
//   if (gemm_avx512_compiled()) gemm_avx512(pool, args);   // else cblas_sgemm + the epilogue
//
// Only gemm.cpp calls this; it exists so the dispatcher (shape checks, the CBLAS fallback)
// and the kernels (register tiles, packing, threading) are read apart.
#pragma once

#include "engine/cpu/gemm.h"

namespace mls::cpu {

// True where this file was compiled with AVX-512F (-march=native on such a CPU).
bool gemm_avx512_compiled();

// C = op(A) op(B) (+ beta C) (+ bias), then the activation. Must not be called where
// gemm_avx512_compiled() is false.
void gemm_avx512(ThreadPool& pool, const GemmArgs& g);
// gemm_workspace_floats() for these kernels (0 where they were not compiled).
int64_t gemm_avx512_workspace_floats(const GemmArgs& g, int threads);

}  // namespace mls::cpu
