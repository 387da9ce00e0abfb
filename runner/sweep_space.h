// A sweep's search space and the three ways of picking its trials' parameters: grid (the
// product), random (seeded) and TPE (Tree-structured Parzen Estimator, per parameter, as
// Optuna's default sampler). A parameter is a setting path (nodes/setting_path.h) and a spec:
//
//   lr=1e-3:1e-1:log      log-uniform real          dropout=0:0.5       uniform real
//   units=32:256:int      uniform integer           units=16:1024:log:int  log-uniform integer
//   batch_size=64,128     a choice (numbers, or words: optimizer=sgd,adam)
//
//   auto space = parse_sweep_space({"lr=1e-3:1e-1:log", "batch_size=64,128"});
//   auto grid = grid_trials(*space, 3);                 // 6 objects {"batch_size":64,"lr":0.001}
//   json p = random_trial(*space, seed, trial);          // the same for the same seed and trial
//   json q = tpe_trial(*space, finished, seed, trial);   // finished: {params, value} so far
//
// A trial's params are a JSON object, key -> value (a double, an integer, or the choice's
// JSON value), as `--set KEY=VALUE` takes them (sweep_setting).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace mls::runner {

struct SweepParam {
  std::string name;  // the setting path: "lr", "fc1.out_features"
  std::string spec;  // as given after '=' (kept in the sweep's spec)
  // A choice, or a range [lo, hi] (log: sampled uniformly in log space; integer: whole numbers).
  std::vector<nlohmann::json> choices;
  double lo = 0, hi = 0;
  bool log = false, integer = false;
  bool is_choice() const { return !choices.empty(); }
};

// "NAME=SPEC". Errors name the param and the bad part: "--param 'lr=1e-3:x:log': 'x' is not a
// number".
Result<SweepParam> parse_sweep_param(std::string_view text);
// Every --param; a name given twice is an error.
Result<std::vector<SweepParam>> parse_sweep_space(const std::vector<std::string>& texts);

// "KEY=VALUE" for `--set`: numbers as JSON prints them (the shortest form that reads back
// exactly), words as themselves.
std::string sweep_setting(const std::string& key, const nlohmann::json& value);
// "lr=0.0123 batch_size=64", in the space's order (values short: 4 significant digits).
std::string params_text(const std::vector<SweepParam>& space, const nlohmann::json& params);

// Every combination: a range gives `points` values (evenly spaced, in log space for log;
// integers rounded, repeats dropped), a choice all its values. The first param varies
// slowest. Error when the product passes `max_trials`.
Result<std::vector<nlohmann::json>> grid_trials(const std::vector<SweepParam>& space, int points,
                                                int64_t max_trials = 100000);

// Trial `trial`'s params, drawn uniformly (in log space for log); the same seed and trial
// give the same params, whatever order trials are asked in.
nlohmann::json random_trial(const std::vector<SweepParam>& space, uint64_t seed, int64_t trial);

// A trial that ended, as TPE learns from it: lower value is better (negate to maximize). A
// pruned trial ranks after every finished one.
struct Observation {
  nlohmann::json params;
  double value = 0;
  bool pruned = false;
};

struct TpeOptions {
  int64_t n_startup = 10;     // random until this many trials ended
  int64_t n_candidates = 24;  // drawn from the good density; the best ratio wins
  double prior_weight = 1.0;  // the prior's share among the kernels (and per choice)
};

// Optuna's TPESampler with its defaults, one parameter at a time: the ended trials split at
// the gamma quantile (min(ceil(0.1 n), 25) good), a Parzen estimator of truncated Gaussians
// (bandwidth: the distance to the farther neighbour, clipped) for the good and for the bad,
// each with a prior kernel over the whole range; choices get counts plus the prior weight.
// Of n_candidates drawn from the good density, the one with the highest good/bad ratio.
nlohmann::json tpe_trial(const std::vector<SweepParam>& space,
                         const std::vector<Observation>& ended, uint64_t seed, int64_t trial,
                         const TpeOptions& options = {});

}  // namespace mls::runner
