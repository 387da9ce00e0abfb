// Early stopping of sweep trials: the median rule and ASHA on hand-made numbers, and the
// reader that takes the values from a run database (runner/pruner.h).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "runner/pruner.h"
#include "store/sqlite.h"

using namespace mls::runner;

namespace {

PruneRule rule(const std::string& method, bool maximize = false) {
  PruneRule r;
  r.method = method;
  r.objective = maximize ? "val/accuracy" : "val/loss";
  r.maximize = maximize;
  return r;
}

}  // namespace

TEST_CASE("sweep pruner: the median rule stops a trial worse than the others' median", "[sweep]") {
  PruneRule r = rule("median");
  r.warmup = 2;
  r.min_trials = 3;
  // Others at epoch 3: median of {0.38, 0.41, 0.60} is 0.41.
  auto why = median_prune(r, 3, 0.52, {0.41, 0.38, 0.60});
  REQUIRE(why);
  CHECK(*why == "val/loss 0.52 at epoch 3 is worse than the median 0.41 of 3 other trials");
  CHECK_FALSE(median_prune(r, 3, 0.40, {0.41, 0.38, 0.60}));
  CHECK_FALSE(median_prune(r, 3, 0.41, {0.41, 0.38, 0.60}));  // equal to the median: goes on
  // An even count: the mean of the middle two (0.45).
  CHECK(median_prune(r, 3, 0.46, {0.40, 0.50, 0.30, 0.60}));
  CHECK_FALSE(median_prune(r, 3, 0.44, {0.40, 0.50, 0.30, 0.60}));
  // Before the warm-up epoch, or with too few others: never.
  CHECK_FALSE(median_prune(r, 1, 9.0, {0.41, 0.38, 0.60}));
  CHECK_FALSE(median_prune(r, 3, 9.0, {0.41, 0.38}));
  // A diverged trial (NaN) is worse than any number; diverged others count as the worst.
  CHECK(median_prune(r, 3, std::nan(""), {0.41, 0.38, 0.60}));
  CHECK_FALSE(median_prune(r, 3, 0.5, {std::nan(""), std::nan(""), 0.60}));
  // Maximised: lower accuracy is worse.
  PruneRule m = rule("median", true);
  m.min_trials = 1;
  auto acc = median_prune(m, 1, 0.70, {0.80, 0.90, 0.60});
  REQUIRE(acc);
  CHECK(*acc == "val/accuracy 0.7 at epoch 1 is worse than the median 0.8 of 3 other trials");
  CHECK_FALSE(median_prune(m, 1, 0.85, {0.80, 0.90, 0.60}));
  CHECK(prune_decision(m, 1, 0.70, {0.80, 0.90, 0.60}) == acc);
  CHECK_FALSE(prune_decision(rule("none"), 5, 99.0, {0.1, 0.1, 0.1}));
}

TEST_CASE("sweep pruner: ASHA keeps the top 1/eta at each rung", "[sweep]") {
  PruneRule r = rule("asha");
  r.r_min = 1;
  r.eta = 3;
  // Rungs at 1, 3, 9, 27 epochs.
  CHECK(asha_rung(r, 1));
  CHECK_FALSE(asha_rung(r, 2));
  CHECK(asha_rung(r, 3));
  CHECK(asha_rung(r, 9));
  CHECK_FALSE(asha_rung(r, 10));
  CHECK(asha_rung(r, 27));
  PruneRule r2 = r;
  r2.r_min = 2;
  r2.eta = 2;
  CHECK(asha_rung(r2, 2));
  CHECK(asha_rung(r2, 4));
  CHECK(asha_rung(r2, 8));
  CHECK_FALSE(asha_rung(r2, 1));
  CHECK_FALSE(asha_rung(r2, 6));

  // Fewer than eta values at the rung (its own included): it goes on.
  CHECK_FALSE(asha_prune(r, 3, 9.0, {0.1}));
  // Six values: the top 2 go on (the cut is the 2nd best, 0.2).
  const std::vector<double> others = {0.1, 0.2, 0.3, 0.4, 0.5};
  CHECK_FALSE(asha_prune(r, 3, 0.15, others));
  CHECK_FALSE(asha_prune(r, 3, 0.2, others));
  auto why = asha_prune(r, 3, 0.25, others);
  REQUIRE(why);
  CHECK(*why == "val/loss 0.25 at epoch 3 is not in the top 2 of 6 at this rung (the cut is 0.2)");
  // Between rungs: never.
  CHECK_FALSE(asha_prune(r, 2, 9.0, others));
  // Three values: only the best goes on.
  CHECK(asha_prune(r, 1, 0.3, {0.1, 0.5}));
  CHECK_FALSE(asha_prune(r, 1, 0.05, {0.1, 0.5}));
  // Maximised.
  PruneRule m = rule("asha", true);
  CHECK(asha_prune(m, 1, 0.7, {0.9, 0.5}));
  CHECK_FALSE(asha_prune(m, 1, 0.95, {0.9, 0.5}));
}

TEST_CASE("sweep pruner: the rule's JSON round trip and its errors", "[sweep]") {
  PruneRule r = rule("asha", true);
  r.eta = 4;
  r.r_min = 2;
  r.warmup = 3;
  r.min_trials = 5;
  auto back = PruneRule::from_json(r.to_json());
  REQUIRE(back);
  CHECK(back->method == "asha");
  CHECK(back->objective == "val/accuracy");
  CHECK(back->maximize);
  CHECK(back->eta == 4);
  CHECK(back->r_min == 2);
  CHECK(back->warmup == 3);
  CHECK(back->min_trials == 5);
  auto bad = PruneRule::from_json({{"method", "hyperband"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "early_stop.method: 'hyperband' is not none, median or asha");
  auto eta = PruneRule::from_json({{"method", "asha"}, {"eta", 1}});
  REQUIRE_FALSE(eta);
  CHECK(eta.error().message == "early_stop.eta: expected a whole number >= 2, got 1");
  CHECK(default_objective(true) == "val/loss");
  CHECK(default_objective(false) == "epoch/train_loss");
}

TEST_CASE("sweep pruner: the values come from the sweep's other trials' latest attempts",
          "[sweep]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mls-pruner-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "runs.db").string();
  {
    auto db = mls::store::Db::open(path);
    REQUIRE(db);
    // The tables the reader reads, as schema 4 has them (the columns it uses).
    REQUIRE(db->exec(R"(
      CREATE TABLE sweeps(id INTEGER PRIMARY KEY, spec TEXT NOT NULL);
      CREATE TABLE sweep_trials(sweep_id INTEGER NOT NULL, trial INTEGER NOT NULL,
                                params TEXT NOT NULL, run_id INTEGER, attempts INTEGER NOT NULL,
                                PRIMARY KEY(sweep_id, trial));
      CREATE TABLE metrics(run_id INTEGER NOT NULL, key TEXT NOT NULL, step INTEGER NOT NULL,
                           value REAL, wall_time REAL NOT NULL);
      INSERT INTO sweeps VALUES (1, '{"early_stop": {"method": "median", "objective": "val/loss",
                                                       "warmup": 2, "min_trials": 2}}');
      INSERT INTO sweeps VALUES (2, '{"method": "grid"}');
      -- sweep 1: trials 0..3 on runs 10, 12 (trial 1's retry; run 11 failed), 13, and 14 (this one)
      INSERT INTO sweep_trials VALUES (1, 0, '{}', 10, 1), (1, 1, '{}', 12, 2), (1, 2, '{}', 13, 1),
                                      (1, 3, '{}', 14, 1), (1, 4, '{}', NULL, 0);
      -- sweep 2 has a trial of its own on run 20
      INSERT INTO sweep_trials VALUES (2, 0, '{}', 20, 1);
      INSERT INTO metrics VALUES (10, 'val/loss', 1, 0.9, 0), (10, 'val/loss', 2, 0.5, 0),
                                 (11, 'val/loss', 2, 0.1, 0),
                                 (12, 'val/loss', 2, 0.4, 0), (12, 'epoch/train_loss', 2, 7, 0),
                                 (13, 'val/loss', 2, NULL, 0),
                                 (14, 'val/loss', 2, 0.45, 0),
                                 (20, 'val/loss', 2, 0.01, 0);
    )"));
  }
  auto v = sweep_values_at(path, 1, 14, "val/loss", 2);
  REQUIRE(v);
  REQUIRE(v->size() == 3);  // runs 10, 12 and 13: not the failed attempt 11, not sweep 2's run
  CHECK((*v)[0] == 0.5);
  CHECK((*v)[1] == 0.4);
  CHECK(std::isnan((*v)[2]));
  auto own = run_value_at(path, 14, "val/loss", 2);
  REQUIRE(own);
  REQUIRE(*own);
  CHECK(**own == 0.45);
  auto none = run_value_at(path, 14, "val/loss", 3);
  REQUIRE(none);
  CHECK_FALSE(*none);

  auto r = sweep_rule(path, 1);
  REQUIRE(r);
  CHECK(r->method == "median");
  CHECK(r->warmup == 2);
  // Median of {0.5, 0.4, NaN(worst)} is 0.5: 0.45 goes on, 0.55 stops.
  auto go = sweep_prune(path, 1, 14, *r, 2, 0.45);
  REQUIRE(go);
  CHECK_FALSE(*go);
  auto stop = sweep_prune(path, 1, 14, *r, 2, 0.55);
  REQUIRE(stop);
  REQUIRE(*stop);
  CHECK(**stop == "val/loss 0.55 at epoch 2 is worse than the median 0.5 of 3 other trials");
  // As a --sweep-trial run gets it: the trial's value from the epoch's report.
  auto prune = sweep_pruner(path, 1);
  REQUIRE(prune);
  REQUIRE(*prune);
  mls::EpochReport rep;
  rep.epoch = 2;
  rep.has_validation = true;
  rep.validation.loss = 0.55;
  auto said = (*prune)(14, rep);
  REQUIRE(said);
  CHECK(*said == "val/loss 0.55 at epoch 2 is worse than the median 0.5 of 3 other trials");
  rep.validation.loss = 0.45;
  CHECK_FALSE((*prune)(14, rep));
  rep.epoch = 1;  // before the warm-up
  rep.validation.loss = 9.0;
  CHECK_FALSE((*prune)(14, rep));
  auto no_prune = sweep_pruner(path, 2);
  REQUIRE(no_prune);
  CHECK_FALSE(*no_prune);  // a sweep without early stopping: no callback
  auto none_rule = sweep_rule(path, 2);
  REQUIRE(none_rule);
  CHECK(none_rule->method == "none");
  auto missing = sweep_rule(path, 9);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "no sweep 9 in " + path);
  fs::remove_all(dir);
}
