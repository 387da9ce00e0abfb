// `mlstudio sweep P.mls --param ...`: a hyperparameter sweep. Each trial is a run of the
// project with the trial's settings (`--set KEY=VALUE`), recorded under one sweep in the run
// database; K worker processes (this executable's `--run ... --sweep-trial S:T`) share the
// machine, each with cores/K threads.
//
//   mlstudio sweep P.mls --param lr=1e-3:1e-1:log --param batch_size=64,128
//       --method tpe --trials 20 --workers 2 --early-stop median --epochs 10
//   mlstudio sweep --resume 3                 finished and pruned trials are kept, interrupted
//                                             ones continue from their checkpoints, pending
//                                             ones start
//   mlstudio sweep --resume 3 --retry-failed  and the failed ones run again, afresh
//
// A line per ended trial (its params, objective, status and the best so far), then a table
// of every trial ordered by the objective. Exit 0 when every trial ended (pruned and failed
// ones included, counted), 1 on bad input, 130 when interrupted (Ctrl-C or SIGTERM: the
// workers stop after their current step; `sweep --resume` continues).
//
// Wiring (app/main.cpp): `SweepOptions swo; CLI::App* sw = add_sweep_command(app, swo);` and
// `if (*sw) return sweep_command(swo, job);` (job: the MPI collective when launched by mpirun).
//
// Under `mpirun -np N` the sweep's trials go to the job's ranks (app/sweep_ranks.h): rank 0
// alone holds the database and records every trial, as a local sweep records them.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mls {
class Collective;
}

namespace mls::app {

struct SweepOptions {
  std::string project;
  std::vector<std::string> params;  // NAME=SPEC (runner/sweep_space.h)
  std::string method = "random";    // grid | random | tpe
  int64_t trials = 0;               // 0: the whole grid, or 10
  int64_t workers = 1;
  bool workers_given = false;  // --resume: the recorded count unless given
  int64_t grid_points = 3;
  std::string early_stop = "none";  // none | median | asha
  int64_t warmup = 1, min_trials = 2, eta = 3, r_min = 1;
  std::string objective;  // "": val/loss with a validation split, else epoch/train_loss
  bool maximize = false;
  uint64_t seed = 0;  // the sampler's (random, tpe)
  std::string db = "mlstudio-runs.db";
  std::string experiment;
  std::string name;
  // Held fixed for every trial (the usual overrides, as `--run` takes them).
  std::optional<int64_t> epochs, batch_size, limit, test_limit;
  std::optional<double> lr;
  std::optional<std::string> device, mode, precision;
  std::vector<std::string> sets;
  // sweep --resume ID [--retry-failed]
  int64_t resume = 0;
  bool retry_failed = false;
  bool quiet = false;  // no line per trial (the table still comes)
  bool json = false;   // one JSON line on stdout instead of the table
};

// `job`: the ranks of an MPI job (`mpirun -np N mlstudio sweep ...`, app/sweep_ranks.h): rank
// 0 coordinates and records, every rank trains trials; null or one rank: a local sweep.
int sweep_command(const SweepOptions& o, Collective* job = nullptr);

// Set by the sweep's SIGINT/SIGTERM handler: under mpirun, the collective's waits stop on it
// (MpiCollective::set_cancel_flag), so rank 0 records what it can in the second mpirun
// leaves between its SIGTERM and its SIGKILL.
const std::atomic<bool>& sweep_stop_flag();

// Adds the `sweep` subcommand, its options writing into `o`; returns it.
CLI::App* add_sweep_command(CLI::App& app, SweepOptions& o);

}  // namespace mls::app
