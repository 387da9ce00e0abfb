// Early stopping of a sweep's trials: after each epoch a trial's objective is held against
// the values the sweep's other trials recorded at the same epoch.
//
//   median: from epoch `warmup` on, a trial worse than the median of the others' values at
//           that epoch (at least `min_trials` of them) stops (Optuna's MedianPruner).
//   asha:   rungs at r_min * eta^k epochs; at a rung a trial goes on only when it is in the top
//           1/eta of the values recorded there (its own included, at least eta of them:
//           fewer, and it goes on) (asynchronous successive halving, Li et al. 2018).
//
//   PruneRule rule = {.method = "median", .objective = "val/loss"};
//   std::optional<std::string> why = median_prune(rule, 3, 0.52, {0.41, 0.38, 0.60});
//   // "val/loss 0.52 at epoch 3 is worse than the median 0.41 of 3 other trials"
//   auto again = sweep_prune(db, sweep_id, run_id, rule, epoch, value);  // from the store
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "engine/train/trainer.h"

namespace mls::runner {

struct PruneRule {
  std::string method = "none";  // none | median | asha
  std::string objective;        // a per-epoch metric key ("val/loss", "epoch/train_loss")
  bool maximize = false;
  int64_t warmup = 1;      // median: the first epoch a trial may be pruned at
  int64_t min_trials = 2;  // median: the other trials' values needed at that epoch
  int64_t r_min = 1;       // asha: the first rung's epoch
  int64_t eta = 3;         // asha: the reduction factor
  nlohmann::json to_json() const;
  // Missing fields keep their defaults; a bad method or number is an error naming it.
  static Result<PruneRule> from_json(const nlohmann::json& j);
};

// The objective when none is asked: val/loss when the project has a validation split, else
// epoch/train_loss.
std::string default_objective(bool has_validation);

// The pure rules. `value`: this trial's objective at `epoch`; `others`: the other trials'
// values at that epoch (NaN: a diverged trial, worse than any number). nullopt: go on; else
// why the trial stops.
std::optional<std::string> median_prune(const PruneRule& rule, int64_t epoch, double value,
                                        const std::vector<double>& others);
bool asha_rung(const PruneRule& rule, int64_t epoch);
std::optional<std::string> asha_prune(const PruneRule& rule, int64_t epoch, double value,
                                      const std::vector<double>& others);
// The rule's method on these values (none: never).
std::optional<std::string> prune_decision(const PruneRule& rule, int64_t epoch, double value,
                                          const std::vector<double>& others);

// From the run database `db`: the objective's value at `epoch` recorded by every other trial
// of the sweep (each trial's latest attempt), as prune_decision takes them.
Result<std::vector<double>> sweep_values_at(const std::string& db, int64_t sweep_id,
                                            int64_t except_run, const std::string& key,
                                            int64_t epoch);
// A trial's own value at `epoch` as recorded (nullopt: not recorded).
Result<std::optional<double>> run_value_at(const std::string& db, int64_t run_id,
                                           const std::string& key, int64_t epoch);
// The sweep's rule (its spec's "early_stop") applied to run `run_id` at `epoch`, whose value
// is `value`.
Result<std::optional<std::string>> sweep_prune(const std::string& db, int64_t sweep_id,
                                               int64_t run_id, const PruneRule& rule, int64_t epoch,
                                               double value);
// For a sweep trial's run (`--run ... --sweep-trial S:T`): runner::RunOptions::prune under
// the sweep's rule, or an empty function when the sweep stops no trial early. The trial's own
// value comes from the epoch's report (val/..., epoch/train_loss) or, for other keys, the
// store; a read that fails lets the trial go on.
using PruneFn = std::function<std::optional<std::string>(int64_t run_id, const EpochReport&)>;
Result<PruneFn> sweep_pruner(const std::string& db, int64_t sweep_id);
// The rule a sweep's spec holds ({"early_stop": {...}}); method none when it has none.
Result<PruneRule> sweep_rule(const std::string& db, int64_t sweep_id);

}  // namespace mls::runner
