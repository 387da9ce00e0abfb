// The optimizers' in-place updates (gpu/vulkan/shaders/optimizer.comp): the float
// expressions of engine/cpu/optimizer_kernels.cpp, one thread per element. The step's
// scalars (Adam's bias corrections, Adagrad's decayed rate) come computed in double.
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

__global__ void __launch_bounds__(kThreads) update_kernel(const __grid_constant__ UpdateArgs u) {
  MLS_GRID_LOOP(i, u.n) {
    float p = u.p[i];
    float g = u.g[i];
    switch (u.mode) {
      case kSgd: {
        g = g + u.b * p;
        const float v = u.a * u.s1[i] + g;
        u.s1[i] = v;
        u.p[i] = p - u.lr * (u.flag ? g + u.a * v : v);
        break;
      }
      case kAdam: {
        if (u.flag)
          p *= u.lr;
        else
          g += u.d * p;
        const float m = u.a * u.s1[i] + (1 - u.a) * g;
        const float v = u.b * u.s2[i] + (1 - u.b) * g * g;
        u.s1[i] = m;
        u.s2[i] = v;
        u.p[i] = p - u.e * m / (sqrtf(v) * u.f + u.c);
        break;
      }
      case kRmsprop: {
        g += u.c * p;
        const float s = u.a * u.s1[i] + (1 - u.a) * g * g;
        u.s1[i] = s;
        u.p[i] = p - u.lr * g / (sqrtf(s) + u.b);
        break;
      }
      case kAdagrad: {
        g += u.b * p;
        const float s = u.s1[i] + g * g;
        u.s1[i] = s;
        u.p[i] = p - u.lr * g / (sqrtf(s) + u.a);
        break;
      }
      default:  // kEma: p is the state, g the value
        u.p[i] = p + u.a * (g - p);
        break;
    }
  }
}

}  // namespace

void optimizer_update(const UpdateArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  update_kernel<<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  check(cudaGetLastError(), "optimizer update kernel");
}

}  // namespace mls::cuda::dev
