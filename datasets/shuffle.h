// Reproducible orders and random streams for the data pipeline: the epoch shuffle, the
// split hold-outs and the per-sample augmentations all draw from splitmix64 (engine/train/
// rng.h) seeded from (seed, epoch[, sample]), so a run replays exactly on every platform.
//
//   std::vector<int64_t> order;
//   shuffled_order(60000, /*seed=*/42, /*epoch=*/3, order);  // a permutation of 0..59999
//   Rng r = sample_rng(42, 3, /*sample=*/17);                  // one sample's augmentation
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/train/rng.h"

namespace mls::data {

// The splitmix64 output function (Steele, Lea, Flood 2014).
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The generator state for (seed, epoch). Mixing twice makes neighbouring seeds or epochs
// start unrelated streams, and keeps (seed, epoch) from colliding with (seed + 1, epoch - 1).
// This is the seeding the Fashion-MNIST source has used since the first release: changing
// it changes every saved run's replay.
constexpr uint64_t epoch_stream(uint64_t seed, int64_t epoch) {
  return mix64(mix64(seed) + static_cast<uint64_t>(epoch));
}

// Fills `order` with 0..n-1, permuted by Fisher-Yates (from the end) when shuffling.
// Reuses the vector's capacity, so a warm epoch loop allocates nothing.
inline void shuffled_order(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& order,
                           bool shuffle = true) {
  order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle) return;
  Rng rng(epoch_stream(seed, epoch));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(order[i - 1], order[j]);
  }
}

// One sample's random stream in one epoch: independent of batch size, order and prefetching,
// so an augmented sample is the same however the epoch is cut into batches.
inline Rng sample_rng(uint64_t seed, int64_t epoch, int64_t sample) {
  return Rng(mix64(epoch_stream(seed, epoch) ^ mix64(static_cast<uint64_t>(sample) + 1)));
}

}  // namespace mls::data
