// Pooling over NCHW planes (gpu/vulkan/shaders/pool.comp): the forward modes run one thread
// per output, the backward modes one per input element, summing over the windows that
// contain it (no atomics).
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

// The flat index (within the plane) of a window's argmax, or -1 for an empty window: the
// taps in row-major order, the first maximum kept.
__device__ int64_t argmax_of(const PoolArgs& p, const float* plane, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float bv = 0.f;
  for (int64_t kh = 0; kh < p.KH; ++kh) {
    const int64_t h = oh * p.sh + kh - p.ph;
    if (h < 0 || h >= p.H) continue;
    for (int64_t kw = 0; kw < p.KW; ++kw) {
      const int64_t w = ow * p.sw + kw - p.pw;
      if (w < 0 || w >= p.W) continue;
      const int64_t at = h * p.W + w;
      const float v = plane[at];
      if (best < 0 || v > bv) {
        best = at;
        bv = v;
      }
    }
  }
  return best;
}

__device__ float divisor(const PoolArgs& p, int64_t oh, int64_t ow) {
  if (p.include_pad) return static_cast<float>(p.KH * p.KW);
  int64_t n = 0;
  for (int64_t kh = 0; kh < p.KH; ++kh) {
    const int64_t h = oh * p.sh + kh - p.ph;
    if (h < 0 || h >= p.H) continue;
    for (int64_t kw = 0; kw < p.KW; ++kw) {
      const int64_t w = ow * p.sw + kw - p.pw;
      if (w >= 0 && w < p.W) ++n;
    }
  }
  return static_cast<float>(n);
}

__global__ void __launch_bounds__(kThreads) pool_forward(const __grid_constant__ PoolArgs p) {
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
  MLS_GRID_LOOP(i, p.NC * OHW) {
    const int64_t plane = i / OHW, oh = (i % OHW) / p.OW, ow = i % p.OW;
    float v = 0.f;
    if (p.mode == kAvgPool) {
      const float* a = p.a + plane * HW;
      for (int64_t kh = 0; kh < p.KH; ++kh) {
        const int64_t h = oh * p.sh + kh - p.ph;
        if (h < 0 || h >= p.H) continue;
        for (int64_t kw = 0; kw < p.KW; ++kw) {
          const int64_t w = ow * p.sw + kw - p.pw;
          if (w >= 0 && w < p.W) v += a[h * p.W + w];
        }
      }
      v /= divisor(p, oh, ow);
    } else {
      // max_pool2d reads x; the gather reads a (x's shape) at x's argmax.
      const int64_t at = argmax_of(p, p.x + plane * HW, oh, ow);
      if (at >= 0) v = (p.mode == kMaxPool ? p.x : p.a)[plane * HW + at];
    }
    p.y[i] = v;
  }
}

__global__ void __launch_bounds__(kThreads) pool_backward(const __grid_constant__ PoolArgs p) {
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
  MLS_GRID_LOOP(i, p.NC * HW) {
    const int64_t plane = i / HW, h = (i % HW) / p.W, w = i % p.W;
    const int64_t hp = h + p.ph, wp = w + p.pw;
    // The windows whose taps include (h, w): oh * sh <= hp < oh * sh + KH.
    const int64_t oh_lo = max(int64_t{0}, (hp - p.KH + p.sh) / p.sh);
    const int64_t ow_lo = max(int64_t{0}, (wp - p.KW + p.sw) / p.sw);
    const int64_t oh_hi = min(p.OH - 1, hp / p.sh);
    const int64_t ow_hi = min(p.OW - 1, wp / p.sw);
    float acc = 0.f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      if (hp - oh * p.sh >= p.KH) continue;
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        if (wp - ow * p.sw >= p.KW) continue;
        const float gv = p.a[plane * OHW + oh * p.OW + ow];
        if (p.mode == kMaxPoolBackward) {
          if (argmax_of(p, p.x + plane * HW, oh, ow) == h * p.W + w) acc += gv;
        } else {
          acc += gv / divisor(p, oh, ow);
        }
      }
    }
    p.y[i] = acc;
  }
}

}  // namespace

void pool(const PoolArgs& a, cudaStream_t stream) {
  if (a.mode == kMaxPoolBackward || a.mode == kAvgPoolBackward) {
    const int64_t n = a.NC * a.H * a.W;
    if (n <= 0) return;
    pool_backward<<<blocks_for(n), kThreads, 0, stream>>>(a);
  } else {
    const int64_t n = a.NC * a.OH * a.OW;
    if (n <= 0) return;
    pool_forward<<<blocks_for(n), kThreads, 0, stream>>>(a);
  }
  check(cudaGetLastError(), "pool kernel");
}

}  // namespace mls::cuda::dev
