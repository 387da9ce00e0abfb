// Every f32 elementwise op and fused_elementwise: a program of instructions (FusedCode
// numbering) interpreted per output element, as gpu/vulkan/shaders/elementwise.comp does.
// Each input is read in place, as a scalar, or gathered through broadcast strides; the
// program sits in the kernel's parameters, which every thread reads alike (uniform loads).
// Each formula (common.cuh) is the float expression of the op's CPU kernel
// (engine/cpu/scalar_math.h).
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
      float v;
      // One case per entry of the list, calling its formula (common.cuh); an entry without
      // one fails nvcc here (identifier "frobnicate_f" is undefined).
      switch (in.code) {
        case kInput:
          v = load_input(a, static_cast<int>(p0), i);
          break;
        case kConst:
          v = p0;
          break;
#define MLS_DEV_CASE(Name, text, op, operands, params)                     \
  case k##Name:                                                            \
    v = MLS_EW_CALL(operands, params, text##_f, r[in.a], r[in.b], p0, p1); \
    break;
          MLS_ELEMENTWISE(MLS_DEV_CASE)
#undef MLS_DEV_CASE
        default:
          v = __int_as_float(0x7fc00000);  // not an op: NaN
          break;
      }
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
