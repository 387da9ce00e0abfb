// A sweep over the ranks of an MPI job: `mpirun -np N mlstudio sweep P.mls --param ...`.
//
// Rank 0 alone opens the run database (nothing writes SQLite over a network file system). It
// coordinates, and trains one trial at a time itself in a worker process beside it, as a local
// sweep's worker (`--run ... --sweep-trial S:T` on rank 0's database, the launcher's
// environment removed so that the process is not taken for a rank). Every other rank asks rank
// 0 for a trial (Collective::send_text), trains it in this process as an ordinary run in a
// temporary database of its own ($TMPDIR/mlstudio-sweep-rank-R-PID/, removed at the end), and
// sends back what that run recorded (runner/sweep_transfer.h): after each epoch the new metric
// points, to which rank 0 answers go or stop (the sweep's early-stopping rule, read from the
// database rank 0 holds, so pruning works as in a local sweep), and at the end the run's
// status, note, tags and its checkpoint files. A rank trains on its own GPU where its host has
// several (rank r: GPU r mod count, runner::rank_device), and on cores/ranks-on-its-host threads.
// Rank 0 records each trial as a run of the sweep, its checkpoints in rank 0's checkpoint folder
// beside the database, so eval, fork and `sweep --resume` find them as after a local sweep.
//
// Why rank 0 trains through a worker process rather than in a thread of its own: the thread
// that calls MPI must answer the other ranks within the collective's timeout while a trial
// trains (an MPI may allow one thread only: MPI_THREAD_FUNNELED), and a process of its own keeps
// a crash of the trial from taking the database's owner down.
//
// While a rank trains it sends an empty text at least every second (after a step), so rank 0
// never waits longer than that for the next message. A rank that dies:
//   - plain mpirun: mpirun stops the whole job (SIGTERM to the others a second later, SIGKILL a
//     second after, OpenMPI 4.1). The signal cuts rank 0's wait short: it records the ranks'
//     trials as interrupted, its note naming the rank that did not answer, stops its worker
//     (its trial interrupted, with its checkpoint) and the sweep as interrupted; `mpirun ...
//     sweep --resume ID` then finishes it (the ranks' trials afresh).
//   - `mpirun --mca orte_abort_on_non_zero_status 0`: the others live on; a rank silent for the
//     collective's timeout (--dist-timeout) is taken as dead, its trial recorded as failed with a
//     note naming the rank and its host, and the sweep goes on without it, ending the job with
//     MPI_Abort once the table is printed (MPI_Finalize would wait for the dead rank).
// A step longer than the timeout looks like a dead rank: raise --dist-timeout for such models.
// A resumed sweep's interrupted trials continue from their checkpoints on rank 0's worker; the
// other ranks take fresh trials.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "engine/train/collective.h"
#include "runner/pruner.h"

namespace mls::app {

// Rank r > 0: asks rank 0 for trials and trains them until told to stop. The exit code: 0, or
// 1 when rank 0 stopped answering.
int serve_sweep_trials(Collective& job);

// How many of the job's ranks run on this rank's host (what shares its cores).
int ranks_on_my_host(const Collective& job);

// The environment of a process that must not take itself for a rank of the job (rank 0's trial
// worker): this one's without the launcher's variables (OMPI_*, PMIX_*, PMI_*, SLURM's step).
std::vector<std::string> environment_without_launcher();

// A trial rank 0 hands a rank.
struct RankTask {
  int64_t trial = 0;
  std::string project;            // absolute: the same path on every host (a shared folder)
  std::vector<std::string> sets;  // the fixed settings, then the trial's params, as --set
  std::string experiment;
  std::string name;  // the run's name when the rank refuses the trial before it begins
  std::vector<std::pair<std::string, std::string>> params;  // the trial's, for that record
};

// A trial that ended on a rank, as rank 0 recorded it.
struct RankEnded {
  int64_t trial = 0;
  int rank = 0;
  std::optional<int64_t> run_id;
  std::string status;  // finished | failed | interrupted | pruned
  std::string why;     // a failure's message
  std::string pruned_because;
};

// Rank 0's view of the other ranks: which asked for a trial, which train one, which died.
class RankTrials {
 public:
  // `stopped`: set by a signal; a wait it cuts short records the ranks' trials as
  // interrupted, not failed (mpirun stops every rank at once).
  RankTrials(Collective& job, std::string db, int64_t sweep, runner::PruneRule rule,
             const std::atomic<bool>* stopped = nullptr);
  ~RankTrials();

  // A rank waiting for an answer to its request for a trial.
  std::optional<int> idle_rank() const;
  Result<void> assign(int rank, const RankTask& task);
  // No more trials for it: it ends.
  void release(int rank);
  // Ranks that owe rank 0 a message (starting, or training a trial).
  int busy() const;
  // From now on, a rank's next epoch report is answered "stop" (the sweep was interrupted):
  // its run ends after the epoch, recorded as interrupted with its checkpoint.
  void interrupt() { interrupting_ = true; }
  // Waits for the next message (a busy rank sends one at least every second) and handles it;
  // the trials that ended meanwhile (a rank's result, or a rank found dead).
  Result<std::vector<RankEnded>> wait();
  // Ranks found dead (their trials failed); the job cannot end cleanly with them.
  const std::vector<int>& dead() const { return dead_; }

 private:
  struct Rank;
  Result<void> on_message(int from, const std::string& text, std::vector<RankEnded>& ended);
  void bury(int rank, const std::string& why, std::vector<RankEnded>& ended,
            const std::string& status = "failed");
  std::string name(int rank) const;

  Collective& job_;
  std::string db_;
  int64_t sweep_;
  runner::PruneRule rule_;
  const std::atomic<bool>* stopped_ = nullptr;
  bool interrupting_ = false;
  std::vector<Rank> ranks_;
  std::vector<int> dead_;
  std::vector<RankEnded> pending_;  // ended outside wait() (a failed hand-out)
};

}  // namespace mls::app
