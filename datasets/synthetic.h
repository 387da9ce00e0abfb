// Small generated datasets for teaching, reproducible from a seed: two spirals, circles,
// XOR, Gaussian blobs (2-D, classification) and a noisy sine (1-D regression).
//
//   SyntheticOptions o;  o.kind = "spirals";  o.samples = 1000;  o.noise = 0.1;  o.seed = 3;
//   Result<Dataset> d = make_synthetic(o);   // 2 features, 2 balanced classes
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/core/result.h"

namespace mls::data {

struct SyntheticOptions {
  std::string kind = "spirals";  // see synthetic_kinds()
  int64_t samples = 1000;
  double noise = 0.1;   // standard deviation of the Gaussian noise added to each coordinate
  int64_t classes = 3;  // blobs only
  uint64_t seed = 0;
};

// "spirals", "circles", "xor", "blobs", "sine".
const std::vector<std::string>& synthetic_kinds();

// Classes are balanced (sample i has class i % classes) and the points are in [-1, 1]-ish.
Result<Dataset> make_synthetic(const SyntheticOptions& options);

}  // namespace mls::data
