#include "datasets/splits.h"

#include <algorithm>
#include <cmath>

#include "datasets/shuffle.h"
#include "engine/core/check.h"

namespace mls::data {
namespace {

// Distinct streams for the two hold-outs, so changing the validation fraction does not
// reshuffle which samples are in the test split.
constexpr int64_t kTestStream = 0x7e57;
constexpr int64_t kValidationStream = 0x7a11d;

// Moves a random `count` of `pool` (chosen from `seed`, `stream`) into `out`; both stay sorted.
void hold_out(std::vector<int64_t>& pool, int64_t count, uint64_t seed, int64_t stream,
              std::vector<int64_t>& out) {
  if (count <= 0) return;
  std::vector<int64_t> order;
  shuffled_order(static_cast<int64_t>(pool.size()), seed, stream, order);
  std::vector<char> taken(pool.size(), 0);
  for (int64_t k = 0; k < count; ++k) taken[static_cast<size_t>(order[static_cast<size_t>(k)])] = 1;
  std::vector<int64_t> rest;
  rest.reserve(pool.size() - static_cast<size_t>(count));
  for (size_t i = 0; i < pool.size(); ++i) (taken[i] ? out : rest).push_back(pool[i]);
  pool = std::move(rest);
}

}  // namespace

int64_t holdout_count(int64_t n, double fraction) {
  if (fraction <= 0 || n < 2) return 0;
  const auto k = static_cast<int64_t>(std::llround(static_cast<double>(n) * fraction));
  return std::clamp<int64_t>(k, 1, n - 1);
}

void apply_limit(std::vector<int64_t>& indices, int64_t limit) {
  if (limit > 0 && static_cast<size_t>(limit) < indices.size())
    indices.resize(static_cast<size_t>(limit));
}

Splits split_indices(int64_t n, const SplitPlan& plan) {
  MLS_CHECK(n >= 0, "split_indices needs n >= 0");
  MLS_CHECK(plan.test_fraction >= 0 && plan.test_fraction < 1, "test_fraction must be in [0, 1)");
  MLS_CHECK(plan.validation >= 0 && plan.validation < 1, "validation must be in [0, 1)");
  Splits s;
  s.train.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s.train[static_cast<size_t>(i)] = i;
  hold_out(s.train, holdout_count(n, plan.test_fraction), plan.seed, kTestStream, s.test);
  apply_limit(s.test, plan.test_limit);
  apply_limit(s.train, plan.limit);
  hold_out(s.train, holdout_count(static_cast<int64_t>(s.train.size()), plan.validation), plan.seed,
           kValidationStream, s.validation);
  return s;
}

}  // namespace mls::data
