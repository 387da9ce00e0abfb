// batch_norm_train over x [N, C, S] (gpu/vulkan/shaders/batch_norm.comp): one block per
// channel computes the batch mean and the biased variance in two passes, each a tree in
// shared memory. The sums are in double, as the CPU kernel's (engine/cpu/norm_kernels.cpp):
// a channel of a large batch sums many floats.
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

__device__ double block_sum(double* part, double v) {
  const int lid = static_cast<int>(threadIdx.x);
  part[lid] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (lid < s) part[lid] += part[lid + s];
    __syncthreads();
  }
  const double r = part[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads)
    batch_norm_kernel(const __grid_constant__ BatchNormArgs a) {
  __shared__ double part[kThreads];
  const int64_t m = a.N * a.S;
  for (int64_t k = blockIdx.x; k < a.C; k += gridDim.x) {
    // Element j of the channel: sample j / S, position j % S.
    double s = 0;
    for (int64_t j = threadIdx.x; j < m; j += kThreads)
      s += a.x[((j / a.S) * a.C + k) * a.S + j % a.S];
    const double mu = block_sum(part, s) / static_cast<double>(m);
    double q = 0;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
      const double d = a.x[((j / a.S) * a.C + k) * a.S + j % a.S] - mu;
      q += d * d;
    }
    const double v = block_sum(part, q) / static_cast<double>(m);
    if (threadIdx.x == 0) {
      a.mean[k] = static_cast<float>(mu);
      a.var[k] = static_cast<float>(v);
    }
    const auto muf = static_cast<float>(mu);
    const auto scale = static_cast<float>(a.gamma[k] / sqrt(v + a.eps));
    const float shift = a.beta[k];
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
      const int64_t at = ((j / a.S) * a.C + k) * a.S + j % a.S;
      a.y[at] = (a.x[at] - muf) * scale + shift;
    }
  }
}

}  // namespace

void batch_norm_train(const BatchNormArgs& a, cudaStream_t stream) {
  if (a.C <= 0) return;
  batch_norm_kernel<<<blocks_per_item(a.C), kThreads, 0, stream>>>(a);
  check(cudaGetLastError(), "batch_norm_train kernel");
}

}  // namespace mls::cuda::dev
