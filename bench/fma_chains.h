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

// FMA chains on 16 accumulators; returns a value that depends on all of them.
inline float fma_chains(int64_t iters) {
#ifdef __AVX512F__
  constexpr int kAcc = 16, kLanes = 16;
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
#else  // whatever the compiler makes of 16 x 8 independent chains
  constexpr int kAcc = 128;
  float acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = static_cast<float>(i) * 1e-3f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = std::fma(acc[i], 0.999999f, 1e-7f);
  float s = 0;
  for (float v : acc) s += v;
  return s;
#endif
}

constexpr double kFlopPerIter = 16.0 * 16.0 * 2.0;  // accumulators x lanes x (mul + add)

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
