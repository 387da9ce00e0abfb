// Train / validation / test index lists, held out reproducibly from a seed.
//
//   SplitPlan p;  p.test_fraction = 0.2;  p.validation = 0.1;  p.seed = 7;
//   Splits s = split_indices(1000, p);  // test: 200, validation: 80, train: 720
//   s.train, s.validation, s.test       // ascending (file order) within each split
//
// Sources with their own test split (IDX t10k, an image folder's test/) pass
// test_fraction = 0 and build the test list themselves.
#pragma once

#include <cstdint>
#include <vector>

namespace mls::data {

struct SplitPlan {
  double test_fraction = 0.0;  // of every sample, held out as the test split
  double validation = 0.0;     // of the training pool, held out for validation
  int64_t limit = 0;           // first N of the training pool (train + validation); 0 = all
  int64_t test_limit = 0;      // first N of the test split; 0 = all
  uint64_t seed = 0;
};

struct Splits {
  std::vector<int64_t> train, validation, test;
};

// round(n * fraction), but at least 1 when the fraction is positive and n >= 2, and never
// all of n: a hold-out that rounds to nothing or to everything is not what was asked for.
int64_t holdout_count(int64_t n, double fraction);

// The test split is drawn from all n samples, the training pool is the rest in file order,
// `limit` keeps its first N, and validation is drawn from that pool. Each list is sorted.
Splits split_indices(int64_t n, const SplitPlan& plan);

// Keeps the first `limit` entries (0 = all).
void apply_limit(std::vector<int64_t>& indices, int64_t limit);

}  // namespace mls::data
