// The epilogue of matmul's and linear_act's GEMM (cuBLAS computes the product): the bias
// and activation applied in place, as gpu/vulkan/shaders/matmul.comp applies them to its
// tiles before storing.
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

__global__ void __launch_bounds__(kThreads)
    bias_act_kernel(float* y, const float* bias, int64_t rows, int64_t n, int32_t act) {
  MLS_GRID_LOOP(i, rows * n) {
    float v = y[i];
    if (bias) v += bias[i % n];
    y[i] = epilogue(v, act);
  }
}

}  // namespace

void bias_act(float* y, const float* bias, int64_t rows, int64_t n, int32_t act,
              cudaStream_t stream) {
  if (rows * n <= 0 || (!bias && act == kActNone)) return;
  bias_act_kernel<<<blocks_for(rows * n), kThreads, 0, stream>>>(y, bias, rows, n, act);
  check(cudaGetLastError(), "bias_act kernel");
}

}  // namespace mls::cuda::dev
