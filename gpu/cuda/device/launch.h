// The device code's entry points (device/*.cu, compiled by nvcc as C++17): each enqueues
// its kernel on `stream` and returns. Arguments are plain structs passed as kernel
// parameters (__grid_constant__), so a CUDA graph captures them by value and no table has
// to be copied to the device. Pointers are device addresses of the first element; strides
// are in elements. The host side (kernels_*.cpp) fills them from its tensors.
//
//   dev::fill(dptr<float>(y), y.numel(), 4, bits, be.stream());
//
// [SECTION] Limits and numbering
// [SECTION] Elementwise programs and the GEMM epilogue
// [SECTION] Reductions, softmax, argmax
// [SECTION] Layout: strided copy, fill, one_hot
// [SECTION] Optimizer updates
// [SECTION] Convolution, pooling, batch norm
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/ops/elementwise_list.h"

namespace mls::cuda {
// After the device opened (cuda_backend.cpp): an error aborts with "mlstudio: cuda: <what>
// failed: <reason>"; out of memory throws std::bad_alloc.
void check(cudaError_t r, const char* what);
}  // namespace mls::cuda

namespace mls::cuda::dev {

// [SECTION] Limits and numbering

inline constexpr int kMaxRank = 8;    // dims of a strided operand (after collapsing)
inline constexpr int kMaxInputs = 8;  // inputs of an elementwise program
inline constexpr int kMaxInstr = 96;  // instructions of an elementwise program
inline constexpr int kThreads = 256;  // threads per block of every kernel

// FusedCode's numbering (engine/ops/fused.h), from the same list (elementwise_list.h, plain
// preprocessor lines that nvcc reads as well); kernels_elementwise.cpp asserts they agree.
enum Code : uint8_t {
  kInput,
  kConst,
#define MLS_DEV_CODE(Name, text, op, operands, params) k##Name,
  MLS_ELEMENTWISE(MLS_DEV_CODE)
#undef MLS_DEV_CODE
};

// EpilogueAct's numbering (engine/ops/fused.h), from the same list (MLS_EPILOGUE_ACTS in
// elementwise_list.h); kernels_linalg.cpp asserts they agree.
enum Act : int32_t {
  kActNone,
#define MLS_DEV_ACT(Name, text) kAct##Name,
  MLS_EPILOGUE_ACTS(MLS_DEV_ACT)
#undef MLS_DEV_ACT
};

// [SECTION] Elementwise programs and the GEMM epilogue

// One instruction: operands a and b are earlier instructions; p0, p1 its attributes (Input:
// p0 is the input's index; Const: p0 is the value).
struct Instr {
  uint8_t code = kInput, a = 0, b = 0;
  float p0 = 0, p1 = 0;
};

enum Access : uint8_t {
  kInPlace,  // the output's index (same element count, contiguous)
  kScalar,   // element 0 everywhere
  kGather,   // through `strides` over `dims`
};

// y[i] = the program's last value at output element i, for i < n; y is contiguous.
struct ElementwiseArgs {
  float* y = nullptr;
  int64_t n = 0;
  int32_t rank = 0, ninstr = 0;
  int64_t dims[kMaxRank] = {};
  const float* x[kMaxInputs] = {};
  uint8_t access[kMaxInputs] = {};
  int64_t strides[kMaxInputs][kMaxRank] = {};
  Instr code[kMaxInstr] = {};
};
// Kernel parameters stay within the 4 KiB every CUDA version and GPU accepts.
static_assert(sizeof(ElementwiseArgs) <= 4096, "ElementwiseArgs outgrew a kernel's parameters");
void elementwise(const ElementwiseArgs& a, cudaStream_t stream);

// y[r, j] = act(y[r, j] + bias[j]) in place over rows x n (bias may be null): the epilogue
// of a GEMM that cuBLAS computed.
void bias_act(float* y, const float* bias, int64_t rows, int64_t n, int32_t act,
              cudaStream_t stream);

// [SECTION] Reductions, softmax, argmax

enum ReduceOp : int32_t { kSum, kMean, kMax, kMin };

// y[o] = op over the reduced index r of x[kept offset(o) + reduced offset(r)]; max and min
// propagate NaN; mean multiplies the sum by `scale`.
struct ReduceArgs {
  float* y = nullptr;
  const float* x = nullptr;
  int64_t nout = 0, nred = 0;
  int32_t op = kSum, kept_rank = 0, red_rank = 0;
  float scale = 1;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int64_t red_dims[kMaxRank] = {}, red_strides[kMaxRank] = {};
};
void reduce(const ReduceArgs& a, cudaStream_t stream);

// The lines along an axis of a contiguous tensor: lines = outer x inner of them, each len
// elements spaced inner apart.
struct Lines {
  int64_t lines = 0, len = 0, inner = 1;
};
void softmax(float* y, const float* x, Lines l, bool log_form, cudaStream_t stream);
// The index of each line's largest element (the first on ties).
void argmax(int64_t* y, const float* x, Lines l, cudaStream_t stream);

// [SECTION] Layout: strided copy, fill, one_hot

// y[sum(i_d * y_strides[d])] = x[sum(i_d * x_strides[d])] over dims, elements of elem_size
// bytes (1, 2, 4 or 8).
struct CopyArgs {
  void* y = nullptr;
  const void* x = nullptr;
  int64_t n = 0;
  int32_t rank = 0, elem_size = 4;
  int64_t dims[kMaxRank] = {}, x_strides[kMaxRank] = {}, y_strides[kMaxRank] = {};
};
void copy(const CopyArgs& a, cudaStream_t stream);
// n contiguous elements of elem_size bytes (4 or 8) set to the low bytes of `bits`.
void fill(void* y, int64_t n, int32_t elem_size, uint64_t bits, cudaStream_t stream);

// y = cast(x) for n contiguous elements; `from` and `to` are DType's numbers. False for a
// pair it does not convert (to u8 or i8).
bool cast(void* y, int32_t to, const void* x, int32_t from, int64_t n, cudaStream_t stream);
// i64 labels [n] -> f32 [n, classes]; a label outside [0, classes) gives a row of zeros.
void one_hot(float* y, const int64_t* labels, int64_t n, int64_t classes, cudaStream_t stream);

// [SECTION] Optimizer updates

// In-place updates of (p, g, s1, s2), the float expressions of engine/cpu/optimizer_kernels.cpp:
//   sgd:     a = momentum, b = weight decay, flag = nesterov
//   adam:    a = beta1, b = beta2, c = eps, d = weight decay, e = lr / bc1 (the step),
//            f = 1 / sqrt(bc2), lr = 1 - lr wd (the decoupled decay), flag = decoupled
//   rmsprop: a = alpha, b = eps, c = weight decay
//   adagrad: lr = the decayed rate, a = eps, b = weight decay
//   ema:     (p, g) = (state, value), a = momentum
enum UpdateMode : int32_t { kSgd, kAdam, kRmsprop, kAdagrad, kEma };
struct UpdateArgs {
  float* p = nullptr;
  const float* g = nullptr;
  float* s1 = nullptr;
  float* s2 = nullptr;
  int64_t n = 0;
  int32_t mode = kSgd, flag = 0;
  float lr = 0, a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
};
void optimizer_update(const UpdateArgs& a, cudaStream_t stream);

// [SECTION] Convolution, pooling, batch norm

// x [N, C, H, W], w [O, C/groups, KH, KW], y [N, O, OH, OW]: PyTorch's cross-correlation
// with stride, padding, dilation and groups; act and bias (conv2d_act) applied to y.
struct ConvGeom {
  int64_t N = 0, C = 0, H = 0, W = 0, O = 0, OH = 0, OW = 0, KH = 0, KW = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int32_t act = kActNone;
};
void conv2d(float* y, const float* x, const float* w, const float* bias, const ConvGeom& g,
            cudaStream_t stream);
void conv2d_backward_input(float* dx, const float* gy, const float* w, const ConvGeom& g,
                           cudaStream_t stream);
void conv2d_backward_weight(float* dw, const float* x, const float* gy, const ConvGeom& g,
                            cudaStream_t stream);

// Pools over x [N, C, H, W] (NC planes) in windows KH x KW moved by (sh, sw), padded by
// (ph, pw); the padding never wins a max and counts in an average only with include_pad.
//   kMaxPool:         y = max of each window (the first on ties)
//   kMaxPoolGather:   y = a at each window's argmax of x (a has x's shape)
//   kMaxPoolBackward: y (x's shape) = sum of a (y's grad) over the windows whose argmax is here
//   kAvgPool:         y = mean of each window of a
//   kAvgPoolBackward: y (x's shape) = sum of a / divisor over the windows that read here
enum PoolMode : int32_t { kMaxPool, kMaxPoolGather, kMaxPoolBackward, kAvgPool, kAvgPoolBackward };
struct PoolArgs {
  float* y = nullptr;
  const float* a = nullptr;
  const float* x = nullptr;
  int64_t NC = 0, H = 0, W = 0, OH = 0, OW = 0, KH = 1, KW = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int32_t mode = kMaxPool, include_pad = 1;
};
void pool(const PoolArgs& a, cudaStream_t stream);

// batch_norm_train over x [N, C, S]: per channel the batch mean and biased variance
// (accumulated in double, as the CPU kernel does), y = (x - mean) * gamma / sqrt(var + eps) + beta.
struct BatchNormArgs {
  float* y = nullptr;
  float* mean = nullptr;
  float* var = nullptr;
  const float* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  int64_t N = 0, C = 0, S = 0;
  double eps = 1e-5;
};
void batch_norm_train(const BatchNormArgs& a, cudaStream_t stream);

// The fp32 FMA peak: blocks x kThreads threads, each 8 chains of `iters` FMAs, into y
// (blocks x kThreads floats).
void fma_peak(float* y, int32_t blocks, int32_t iters, cudaStream_t stream);

}  // namespace mls::cuda::dev
