// Internal to engine/cpu/gemm*.cpp: the engine's own SGEMM behind cpu::gemm
// (engine/cpu/gemm.h), written once over the vector width (engine/cpu/simd.h): AVX-512 or
// AVX2 with FMA, whichever the build has.
//
//   if (gemm_simd_compiled()) gemm_simd(pool, args);   // else cblas_sgemm + the epilogue
//
// Only gemm.cpp calls this; it exists so the dispatcher (shape checks, the CBLAS fallback)
// and the kernels (register tiles, packing, threading) are read apart.
#pragma once

#include "engine/cpu/gemm.h"

namespace mls::cpu {

// True where this file was compiled with AVX-512F or AVX2 + FMA (-march=native on such a CPU).
bool gemm_simd_compiled();
// "AVX-512", "AVX2", or "CBLAS" where neither was compiled (benchmarks print it).
const char* gemm_simd_name();

// C = op(A) op(B) (+ beta C) (+ bias), then the activation. Must not be called where
// gemm_simd_compiled() is false.
void gemm_simd(ThreadPool& pool, const GemmArgs& g);
// gemm_workspace_floats() for these kernels (0 where they were not compiled).
int64_t gemm_simd_workspace_floats(const GemmArgs& g, int threads);

}  // namespace mls::cpu
