// The layout kernels' device side (gpu/vulkan/shaders/copy.comp, fill.comp, one_hot.comp):
// a strided copy between views of one shape, a fill with an element's bit pattern, and
// one_hot. Elements move as unsigned integers of their size, so any dtype copies exactly.
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads) copy_kernel(const __grid_constant__ CopyArgs a) {
  T* y = static_cast<T*>(a.y);
  const T* x = static_cast<const T*>(a.x);
  MLS_GRID_LOOP(i, a.n) {
    int64_t rest = i, xo = 0, yo = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t k = rest % a.dims[d];
      rest /= a.dims[d];
      xo += k * a.x_strides[d];
      yo += k * a.y_strides[d];
    }
    y[yo] = x[xo];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) fill_kernel(T* y, int64_t n, T v) {
  MLS_GRID_LOOP(i, n) y[i] = v;
}

__global__ void __launch_bounds__(kThreads)
    one_hot_kernel(float* y, const int64_t* labels, int64_t n, int64_t classes) {
  MLS_GRID_LOOP(i, n * classes) y[i] = labels[i / classes] == i % classes ? 1.f : 0.f;
}

}  // namespace

void copy(const CopyArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  const unsigned blocks = blocks_for(a.n);
  switch (a.elem_size) {
    case 1:
      copy_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(a);
      break;
    case 2:
      copy_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(a);
      break;
    case 4:
      copy_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(a);
      break;
    default:
      copy_kernel<uint64_t><<<blocks, kThreads, 0, stream>>>(a);
      break;
  }
  check(cudaGetLastError(), "copy kernel");
}

void fill(void* y, int64_t n, int32_t elem_size, uint64_t bits, cudaStream_t stream) {
  if (n <= 0) return;
  if (elem_size == 8)
    fill_kernel<uint64_t>
        <<<blocks_for(n), kThreads, 0, stream>>>(static_cast<uint64_t*>(y), n, bits);
  else
    fill_kernel<uint32_t><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<uint32_t*>(y), n,
                                                                  static_cast<uint32_t>(bits));
  check(cudaGetLastError(), "fill kernel");
}

void one_hot(float* y, const int64_t* labels, int64_t n, int64_t classes, cudaStream_t stream) {
  if (n * classes <= 0) return;
  one_hot_kernel<<<blocks_for(n * classes), kThreads, 0, stream>>>(y, labels, n, classes);
  check(cudaGetLastError(), "one_hot kernel");
}

}  // namespace mls::cuda::dev
