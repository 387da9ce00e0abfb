// Every f32 elementwise op and fused_elementwise: a program of instructions (FusedCode
// numbering) interpreted per output element, as gpu/vulkan/shaders/elementwise.comp does.
// Each input is read in place, as a scalar, or gathered through broadcast strides; the
// program sits in the kernel's parameters, which every thread reads alike (uniform loads).
// Each case is the float expression of the op's CPU kernel (engine/cpu/fused_kernels.cpp).
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

__device__ inline float load_input(const ElementwiseArgs& a, int k, int64_t i) {
  const float* x = a.x[k];
  switch (a.access[k]) {
    case kInPlace:
      return x[i];
    case kScalar:
      return x[0];
    default: {
      int64_t off = 0, rest = i;
      for (int d = a.rank - 1; d >= 0; --d) {
        const int64_t dim = a.dims[d];
        off += (rest % dim) * a.strides[k][d];
        rest /= dim;
      }
      return x[off];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    elementwise_kernel(const __grid_constant__ ElementwiseArgs a) {
  float r[kMaxInstr];
  MLS_GRID_LOOP(i, a.n) {
    for (int k = 0; k < a.ninstr; ++k) {
      const Instr& in = a.code[k];
      const float p0 = in.p0, p1 = in.p1;
      const float x = in.code >= kNeg ? r[in.a] : 0.f;
      const float y = in.code >= kAdd ? r[in.b] : 0.f;
      float v;
      // clang-format off
      switch (in.code) {
        case kInput: v = load_input(a, static_cast<int>(p0), i); break;
        case kConst: v = p0; break;
        case kNeg: v = -x; break;
        case kAbs: v = fabsf(x); break;
        case kExp: v = expf(x); break;
        case kLog: v = logf(x); break;
        case kSqrt: v = sqrtf(x); break;
        case kRsqrt: v = 1.f / sqrtf(x); break;
        case kTanh: v = tanhf(x); break;
        case kSigmoid: v = sigmoid_f(x); break;
        case kRelu: v = x > 0.f ? x : 0.f; break;
        case kSilu: v = silu_f(x); break;
        case kGelu: v = gelu_f(x); break;
        case kGeluTanh: v = gelu_tanh_f(x); break;
        case kLeakyRelu: v = x > 0.f ? x : p0 * x; break;
        case kSoftplus: v = softplus_f(x, p0, p1); break;
        case kClamp: v = clamp_f(x, p0, p1); break;
        case kScale: v = p0 * x; break;
        case kAddScalar: v = x + p0; break;
        case kAdd: v = x + y; break;
        case kSub: v = x - y; break;
        case kMul: v = x * y; break;
        case kDiv: v = x / y; break;
        case kMaximum: v = max_nan(x, y); break;
        case kMinimum: v = min_nan(x, y); break;
        case kPow: v = powf(x, y); break;
        case kReluBackward: v = y > 0.f ? x : 0.f; break;
        case kGeluBackward: v = gelu_backward_f(x, y); break;
        case kGeluTanhBackward: v = gelu_tanh_backward_f(x, y); break;
        default: v = (y > p0 && y < p1) ? x : 0.f; break;  // kClampBackward
      }
      // clang-format on
      r[k] = v;
    }
    a.y[i] = r[a.ninstr - 1];
  }
}

}  // namespace

void elementwise(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  elementwise_kernel<<<blocks_for(a.n), kThreads, 0, stream>>>(a);
  check(cudaGetLastError(), "elementwise kernel");
}

}  // namespace mls::cuda::dev
