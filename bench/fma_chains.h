// The fp32 FMA peak of the host: chains of FMAs on 16 independent accumulators per thread
// (enough to cover the FMA latency of both pipes). Shared by bench/fma_peak and
// bench/matmul_backends.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace mls::bench {

// The floats the chains update per iteration: 16 accumulators of 16 lanes with AVX-512,
// 96 floats elsewhere (12 ymm registers of 8 under AVX2: enough chains for two pipes of
// 4-cycle FMAs, and room for the two constants, so nothing spills).
#ifdef __AVX512F__
inline constexpr int kChainFloats = 16 * 16;
#else
inline constexpr int kChainFloats = 96;
#endif
// One FMA (a multiply and an add) per float per iteration. Until 2026-11-28 this said 512
// on every machine, which doubled the AVX2 peak (and halved every "% of peak" there).
inline constexpr double kFlopPerIter = kChainFloats * 2.0;

// FMA chains on independent accumulators; returns a value that depends on all of them.
inline float fma_chains(int64_t iters) {
#ifdef __AVX512F__
  constexpr int kAcc = kChainFloats / 16, kLanes = 16;
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  float lanes[kLanes];
  _mm512_storeu_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
#else  // whatever the compiler makes of kChainFloats independent chains
  float acc[kChainFloats];
  for (int i = 0; i < kChainFloats; ++i) acc[i] = static_cast<float>(i) * 1e-3f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChainFloats; ++i) acc[i] = std::fma(acc[i], 0.999999f, 1e-7f);
  float s = 0;
  for (float v : acc) s += v;
  return s;
#endif
}

// GFLOP/s of `threads` threads each running the chains (best of a few tries).
inline double fma_peak(int threads) {
  const int64_t iters = 20'000'000;
  double best = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<float> sink(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[static_cast<size_t>(t)] = fma_chains(iters); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float total = 0;
    for (float v : sink) total += v;
    if (!std::isfinite(total)) std::printf("(non-finite checksum)\n");
    best = std::max(best, kFlopPerIter * static_cast<double>(iters) * threads / s / 1e9);
  }
  return best;
}

}  // namespace mls::bench
