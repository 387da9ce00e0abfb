// A small, portable, seedable generator (splitmix64): the same seed gives the same numbers
// on every platform and standard library, which std:: distributions do not promise.
//
//   Rng r(42);  double u = r.uniform();  uint64_t k = r.below(10);
#pragma once

#include <cstdint>

namespace mls {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) {  // unbiased, by rejection
    uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }

 private:
  uint64_t state_;
};

// Mixes two values into one seed (for per-epoch or per-parameter streams).
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  Rng r(a ^ (b * 0xD1B54A32D192ED03ull));
  return r.next();
}

// The value a training step's dropout masks are drawn from (ModelGraph::step_seed): one per
// optimizer step of a run, so that a resumed run, the step-through view, the debugger's re-run
// and compare-devices draw the masks the run drew.
inline int64_t training_step_seed(uint64_t seed, int64_t step) {
  return static_cast<int64_t>(mix_seed(seed ^ 0x5eedull, static_cast<uint64_t>(step)) >> 1);
}

}  // namespace mls
