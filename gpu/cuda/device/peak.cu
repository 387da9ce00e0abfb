// The device's fp32 FMA peak (bench/matmul_backends): each thread runs 8 independent chains
// of FMAs and stores their sum, so nothing is optimised away.
#include "gpu/cuda/device/launch.h"

namespace mls::cuda::dev {

namespace {

__global__ void fma_chains(float* y, int32_t iters) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float a0 = static_cast<float>(i) * 1e-6f, a1 = a0 + 1e-3f, a2 = a0 + 2e-3f, a3 = a0 + 3e-3f;
  float a4 = a0 + 4e-3f, a5 = a0 + 5e-3f, a6 = a0 + 6e-3f, a7 = a0 + 7e-3f;
  const float m = 0.999999f, c = 1e-7f;
  for (int32_t k = 0; k < iters; ++k) {
    a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
    a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
  }
  y[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

}  // namespace

void fma_peak(float* y, int32_t blocks, int32_t iters, cudaStream_t stream) {
  fma_chains<<<blocks, kThreads, 0, stream>>>(y, iters);
  check(cudaGetLastError(), "fma_chains launch");
}

}  // namespace mls::cuda::dev
