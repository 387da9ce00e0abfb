#include "datasets/splits.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

using namespace mls::data;

TEST_CASE("splits are disjoint, cover the data, sorted and reproducible", "[splits]") {
  SplitPlan p;
  p.test_fraction = 0.2;
  p.validation = 0.1;
  p.seed = 7;
  const Splits s = split_indices(1000, p);
  CHECK(s.test.size() == 200);
  CHECK(s.validation.size() == 80);
  CHECK(s.train.size() == 720);
  std::set<int64_t> all;
  for (const auto* v : {&s.train, &s.validation, &s.test}) {
    CHECK(std::is_sorted(v->begin(), v->end()));
    all.insert(v->begin(), v->end());
  }
  CHECK(all.size() == 1000);
  CHECK(*all.rbegin() == 999);

  const Splits again = split_indices(1000, p);
  CHECK(again.test == s.test);
  CHECK(again.validation == s.validation);
  p.seed = 8;
  CHECK(split_indices(1000, p).test != s.test);
}

TEST_CASE("the test split does not move when the validation fraction changes", "[splits]") {
  SplitPlan p;
  p.test_fraction = 0.25;
  p.seed = 3;
  const Splits a = split_indices(400, p);
  p.validation = 0.3;
  const Splits b = split_indices(400, p);
  CHECK(a.test == b.test);
  CHECK(b.validation.size() == 90);
}

TEST_CASE("limits take the first samples of the training pool and of the test split", "[splits]") {
  SplitPlan p;
  p.limit = 50;
  const Splits none = split_indices(1000, p);
  CHECK(none.test.empty());
  CHECK(none.validation.empty());
  REQUIRE(none.train.size() == 50);
  CHECK(none.train.front() == 0);
  CHECK(none.train.back() == 49);  // exactly the first 50, as --limit always meant

  p.validation = 0.2;
  p.test_fraction = 0.1;
  p.test_limit = 30;
  const Splits s = split_indices(1000, p);
  CHECK(s.test.size() == 30);
  CHECK(s.validation.size() == 10);
  CHECK(s.train.size() == 40);
}

TEST_CASE("hold-out counts round, keep at least one and never take everything", "[splits]") {
  CHECK(holdout_count(10, 0.0) == 0);
  CHECK(holdout_count(10, 0.25) == 3);  // 2.5 rounds away from zero
  CHECK(holdout_count(10, 0.01) == 1);
  CHECK(holdout_count(10, 0.99) == 9);
  CHECK(holdout_count(1, 0.5) == 0);
}
