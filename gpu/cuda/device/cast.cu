// cast's device side (gpu/vulkan/shaders/cast.comp does the same): every pair of the
// engine's element types, converted as the CPU's cast kernels do (engine/cpu/math_kernels.cpp)
// bit for bit: floats round to nearest even through f32 (the 16-bit conversions work on the
// bits, as engine/core/dtype.cpp does, so a NaN comes out quiet, as there),
// float to integer truncates toward zero and saturates (NaN -> 0), integer to float rounds
// once, narrowing integers wrap, to bool is x != 0.
#include <cstdint>

#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

// DType's numbering (engine/core/dtype.h); kernels_precision.cpp asserts it.
enum Type : int32_t { kF32, kF16, kBF16, kI64, kI32, kU8, kI8, kBool };

template <int T> struct Storage;
template <> struct Storage<kF32> { using type = float; };
template <> struct Storage<kF16> { using type = uint16_t; };
template <> struct Storage<kBF16> { using type = uint16_t; };
template <> struct Storage<kI64> { using type = int64_t; };
template <> struct Storage<kI32> { using type = int32_t; };
template <> struct Storage<kU8> { using type = uint8_t; };
template <> struct Storage<kI8> { using type = int8_t; };
template <> struct Storage<kBool> { using type = uint8_t; };

__device__ float bits_float(uint32_t u) { return __uint_as_float(u); }
__device__ uint32_t float_bits(float f) { return __float_as_uint(f); }

__device__ float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));  // NaN: quiet
  return bits_float(sign | ((e - 15 + 127) << 23) | (m << 13));
}

__device__ float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  return bits_float((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);  // NaN: quiet
}

__device__ uint16_t f32_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int32_t e = static_cast<int32_t>((u >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = u & 0x7fffffu;
  if (((u >> 23) & 0xffu) == 0xffu)  // infinity; a NaN comes out quiet with its payload's top
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(h);
}

__device__ uint16_t f32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if (isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <int From>
__device__ float widen(typename Storage<From>::type x) {
  if constexpr (From == kF32)
    return x;
  else if constexpr (From == kF16)
    return f16_to_f32(x);
  else
    return bf16_to_f32(x);
}

// The integer range (std::numeric_limits is host code to nvcc without relaxed constexpr).
template <typename I> struct Range;
template <> struct Range<int64_t> { static constexpr int64_t lo = INT64_MIN, hi = INT64_MAX; };
template <> struct Range<int32_t> { static constexpr int32_t lo = INT32_MIN, hi = INT32_MAX; };

template <typename I>
__device__ I saturate(float f) {
  if (isnan(f)) return 0;
  const double d = f;
  if (d <= static_cast<double>(Range<I>::lo)) return Range<I>::lo;
  if (d >= static_cast<double>(Range<I>::hi)) return Range<I>::hi;
  return static_cast<I>(d);
}

template <int From, int To>
__device__ typename Storage<To>::type convert(typename Storage<From>::type x) {
  using T = typename Storage<To>::type;
  constexpr bool from_float = From == kF32 || From == kF16 || From == kBF16;
  if constexpr (From == To) {
    return x;
  } else if constexpr (from_float) {
    const float f = widen<From>(x);
    if constexpr (To == kF32) return f;
    else if constexpr (To == kF16) return f32_to_f16(f);
    else if constexpr (To == kBF16) return f32_to_bf16(f);
    else if constexpr (To == kBool) return static_cast<T>(f != 0.f ? 1 : 0);
    else return saturate<T>(f);
  } else {
    const float f = static_cast<float>(x);  // one rounding to nearest even
    if constexpr (To == kF32) return f;
    else if constexpr (To == kF16) return f32_to_f16(f);
    else if constexpr (To == kBF16) return f32_to_bf16(f);
    else if constexpr (To == kBool) return static_cast<T>(x != 0 ? 1 : 0);
    else return static_cast<T>(x);  // narrowing wraps
  }
}

template <int From, int To>
__global__ void __launch_bounds__(kThreads) cast_kernel(void* y, const void* x, int64_t n) {
  auto* out = static_cast<typename Storage<To>::type*>(y);
  const auto* in = static_cast<const typename Storage<From>::type*>(x);
  MLS_GRID_LOOP(i, n) out[i] = convert<From, To>(in[i]);
}

template <int From>
bool launch_from(void* y, const void* x, int64_t n, int32_t to, cudaStream_t stream) {
  const unsigned blocks = blocks_for(n);
  switch (to) {
    case kF32: cast_kernel<From, kF32><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    case kF16: cast_kernel<From, kF16><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    case kBF16: cast_kernel<From, kBF16><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    case kI64: cast_kernel<From, kI64><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    case kI32: cast_kernel<From, kI32><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    case kBool: cast_kernel<From, kBool><<<blocks, kThreads, 0, stream>>>(y, x, n); return true;
    default: return false;
  }
}

}  // namespace

bool cast(void* y, int32_t to, const void* x, int32_t from, int64_t n, cudaStream_t stream) {
  if (n <= 0) return true;
  switch (from) {
    case kF32: return launch_from<kF32>(y, x, n, to, stream);
    case kF16: return launch_from<kF16>(y, x, n, to, stream);
    case kBF16: return launch_from<kBF16>(y, x, n, to, stream);
    case kI64: return launch_from<kI64>(y, x, n, to, stream);
    case kI32: return launch_from<kI32>(y, x, n, to, stream);
    case kU8: return launch_from<kU8>(y, x, n, to, stream);
    case kI8: return launch_from<kI8>(y, x, n, to, stream);
    case kBool: return launch_from<kBool>(y, x, n, to, stream);
    default: return false;
  }
}

}  // namespace mls::cuda::dev
