// Internal to engine/cpu: <immintrin.h> without GCC 12's false warnings, and the lane mask
// the AVX-512 kernels share. Everything here exists only where the build has AVX-512F.
//
//   #include "engine/cpu/avx512.h"
//   #ifdef __AVX512F__
//   _mm512_mask_storeu_ps(out, first_lanes(n), v);   // the first n of 16 floats
//   #endif
#pragma once

#ifdef __AVX512F__
// GCC 12 warns inside its own intrinsics that take _mm512_undefined_ps() (`__m512 __Y = __Y;`,
// GCC bug 105593, fixed in 13); the state at the header's lines is what counts.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>

namespace mls::cpu {

// The first `n` lanes (all 16 when n >= 16, none when n <= 0).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

}  // namespace mls::cpu
#endif
