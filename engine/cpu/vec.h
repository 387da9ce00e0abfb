// Internal to engine/cpu: one register of floats as a GCC/Clang vector extension, for kernels
// written with +, * and comparisons over vectors (the convolutions' micro-kernels, batch
// norm's sums) rather than intrinsics (gemm_simd.cpp uses simd.h).
//
//   vec::V acc = vec::V{};
//   for (int64_t i = 0; i + vec::kLanes <= n; i += vec::kLanes) acc += vec::load(x + i);
//
// kLanes floats: one zmm register where the build has AVX-512, else one AVX register (or two
// SSE/NEON ones). load(p) and store(p, v) move kLanes floats at any float address with
// unaligned vector moves: through memcpy under clang (which loads through a
// reduced-alignment vector typedef with an aligned move, and faults), through such a typedef
// under GCC, which keeps a tile's sums in registers better that way (the convolution's
// weight-gradient tile ran twice as fast as through memcpy). Always inlined: no vector
// crosses a call boundary by value, whose ABI would depend on -march.
#pragma once
#include <cstring>

namespace mls::cpu::vec {

#ifdef __AVX512F__
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float V __attribute__((vector_size(4 * kLanes)));

#if defined(__clang__)
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
#else
typedef float Vu __attribute__((vector_size(4 * kLanes), aligned(4), may_alias));
[[gnu::always_inline]] inline V load(const float* p) {
  return *reinterpret_cast<const Vu*>(p);
}
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  *reinterpret_cast<Vu*>(p) = v;
}
#endif

}  // namespace mls::cpu::vec
