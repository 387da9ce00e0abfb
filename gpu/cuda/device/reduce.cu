// sum, mean, max and min over a set of axes; softmax, log_softmax and argmax along one axis
// (gpu/vulkan/shaders/reduce.comp, softmax.comp, argmax.comp). Large reductions: one block
// per output element, a tree in shared memory; small ones: one thread each.
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

// Below this many elements per output, one thread reduces a whole output.
constexpr int64_t kPerThreadBelow = 64;

__device__ inline int64_t offset_of(int64_t i, int32_t rank, const int64_t* dims,
                                    const int64_t* strides) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

__device__ inline float combine(int32_t op, float a, float b) {
  if (op == kMax) return maximum_f(a, b);
  if (op == kMin) return minimum_f(a, b);
  return a + b;
}

__device__ inline float identity(int32_t op) {
  return op == kMax ? -__int_as_float(0x7f800000) : op == kMin ? __int_as_float(0x7f800000) : 0.f;
}

__device__ inline float finish(const ReduceArgs& a, float v) {
  return a.op == kMean ? v * a.scale : v;
}

__global__ void __launch_bounds__(kThreads)
    reduce_per_thread(const __grid_constant__ ReduceArgs a) {
  MLS_GRID_LOOP(o, a.nout) {
    const float* x = a.x + offset_of(o, a.kept_rank, a.kept_dims, a.kept_strides);
    float acc = identity(a.op);
    for (int64_t r = 0; r < a.nred; ++r)
      acc = combine(a.op, acc, x[offset_of(r, a.red_rank, a.red_dims, a.red_strides)]);
    a.y[o] = finish(a, acc);
  }
}

__global__ void __launch_bounds__(kThreads) reduce_per_block(const __grid_constant__ ReduceArgs a) {
  __shared__ float part[kThreads];
  const int lid = static_cast<int>(threadIdx.x);
  for (int64_t o = blockIdx.x; o < a.nout; o += gridDim.x) {
    const float* x = a.x + offset_of(o, a.kept_rank, a.kept_dims, a.kept_strides);
    float acc = identity(a.op);
    for (int64_t r = lid; r < a.nred; r += kThreads)
      acc = combine(a.op, acc, x[offset_of(r, a.red_rank, a.red_dims, a.red_strides)]);
    part[lid] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (lid < s) part[lid] = combine(a.op, part[lid], part[lid + s]);
      __syncthreads();
    }
    if (lid == 0) a.y[o] = finish(a, part[0]);
    __syncthreads();
  }
}

// One thread per line: the maximum, the sum of exponentials, then the outputs.
__global__ void __launch_bounds__(kThreads)
    softmax_kernel(float* y, const float* x, Lines l, bool log_form) {
  MLS_GRID_LOOP(i, l.lines) {
    const int64_t base = (i / l.inner) * l.len * l.inner + i % l.inner;
    float mx = -__int_as_float(0x7f800000);
    for (int64_t k = 0; k < l.len; ++k) mx = fmaxf(mx, x[base + k * l.inner]);
    float s = 0.f;
    for (int64_t k = 0; k < l.len; ++k) s += expf(x[base + k * l.inner] - mx);
    const float ls = logf(s);
    for (int64_t k = 0; k < l.len; ++k) {
      const float v = x[base + k * l.inner] - mx;
      y[base + k * l.inner] = log_form ? v - ls : expf(v) / s;
    }
  }
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(int64_t* y, const float* x, Lines l) {
  MLS_GRID_LOOP(i, l.lines) {
    const float* xl = x + (i / l.inner) * l.len * l.inner + i % l.inner;
    int64_t best = 0;
    float bv = xl[0];
    for (int64_t k = 1; k < l.len; ++k) {
      const float v = xl[k * l.inner];
      if (v > bv) {
        bv = v;
        best = k;
      }
    }
    y[i] = best;
  }
}

}  // namespace

void reduce(const ReduceArgs& a, cudaStream_t stream) {
  if (a.nout <= 0) return;
  if (a.nred < kPerThreadBelow)
    reduce_per_thread<<<blocks_for(a.nout), kThreads, 0, stream>>>(a);
  else
    reduce_per_block<<<blocks_per_item(a.nout), kThreads, 0, stream>>>(a);
  check(cudaGetLastError(), "reduce kernel");
}

void softmax(float* y, const float* x, Lines l, bool log_form, cudaStream_t stream) {
  if (l.lines <= 0 || l.len <= 0) return;
  softmax_kernel<<<blocks_for(l.lines), kThreads, 0, stream>>>(y, x, l, log_form);
  check(cudaGetLastError(), "softmax kernel");
}

void argmax(int64_t* y, const float* x, Lines l, cudaStream_t stream) {
  if (l.lines <= 0 || l.len <= 0) return;
  argmax_kernel<<<blocks_for(l.lines), kThreads, 0, stream>>>(y, x, l);
  check(cudaGetLastError(), "argmax kernel");
}

}  // namespace mls::cuda::dev
