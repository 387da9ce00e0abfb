// Internal to engine/cpu: the vector operations a kernel written once over the lane count
// needs (gemm_simd.cpp), for the widest set the build has: AVX-512F (16 floats a vector) or
// AVX2 with FMA (8). MLS_SIMD is 512 or 256 where one of them is, undefined elsewhere.
//
//   #include "engine/cpu/simd.h"
//   #ifdef MLS_SIMD
//   Simd::V acc = Simd::fmadd(Simd::set1(a), Simd::load(b), Simd::zero());
//   Simd::store(out, Simd::first(n), acc);     // the first n lanes only
//   #endif
//
// Masked loads read nothing past the lanes they keep (AVX2's vmaskmovps faults on none of
// the others either), so a row's tail may end at the edge of a page.
#pragma once

#include "engine/cpu/avx512.h"

#if defined(__AVX512F__)
#define MLS_SIMD 512
#elif defined(__AVX2__) && defined(__FMA__)
#define MLS_SIMD 256
#include <immintrin.h>
#endif

#ifdef MLS_SIMD
#include <cstdint>

namespace mls::cpu {

#if MLS_SIMD == 512

struct Simd {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr const char* kName = "AVX-512";

  // The first n lanes (all when n >= 16, none when n <= 0).
  static Mask first(int64_t n) { return first_lanes(n); }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }  // others 0
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static void store_aligned(float* p, V v) { _mm512_store_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }

  // Row q of r becomes column q (a 16 x 16 block).
  static void transpose(V (&r)[kLanes]) {
    V t[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // Within each 128-bit lane L, r[4i + q] then holds column 4L + q of rows 4i .. 4i+3.
    for (int i = 0; i < 4; ++i) {
      auto d = [&](int j) { return _mm512_castps_pd(t[4 * i + j]); };
      r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(0), d(2)));
      r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(0), d(2)));
      r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(1), d(3)));
      r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(1), d(3)));
    }
    for (int q = 0; q < 4; ++q) {
      t[q] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);      // lanes 0, 2 of each
      t[q + 4] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xdd);  // lanes 1, 3
      t[q + 8] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
      t[q + 12] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xdd);
    }
    for (int q = 0; q < 4; ++q) {
      r[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
      r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xdd);
      r[q + 4] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88);
      r[q + 12] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xdd);
    }
  }
};

#else  // AVX2 + FMA

struct Simd {
  using V = __m256;
  using Mask = __m256i;  // lanes of all ones are kept
  static constexpr int kLanes = 8;
  static constexpr const char* kName = "AVX2";

  static Mask first(int64_t n) {
    alignas(64) static constexpr int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t k = n >= 8 ? 8 : n <= 0 ? 0 : n;
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - k));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }  // others 0
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  static void store_aligned(float* p, V v) { _mm256_store_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  // Row q of r becomes column q (an 8 x 8 block).
  static void transpose(V (&r)[kLanes]) {
    V t[8], s[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // r0 r1 interleaved, low halves
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // and high halves
    }
    for (int i = 0; i < 2; ++i) {
      // Per 128-bit lane: columns 0..3 (4..7) of rows 4i .. 4i+3.
      s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int q = 0; q < 4; ++q) {
      r[q] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x20);
      r[q + 4] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x31);
    }
  }
};

#endif

}  // namespace mls::cpu
#endif  // MLS_SIMD
