// A sweep trial trained on another rank of an MPI job, carried into the one run database
// rank 0 holds (`mpirun -np N mlstudio sweep ...`: nothing writes SQLite over a network file
// system). The rank trains the trial as an ordinary run in a database of its own (a temporary
// file beside it); what that run recorded travels to rank 0 as JSON, epoch by epoch, and
// rank 0 records the same run under the sweep: its params, snapshot, system info, every
// metric point, its tags, note, checkpoints and status, as a local sweep's worker records it.
//
//   // on the rank that trains, after each epoch and at the end:
//   runner::SentPoints sent;
//   auto msg = runner::run_message(local_store, local_run, sent);   // JSON: what is new
//   // on rank 0:
//   auto rec = runner::TrialRecorder::begin(db, sweep, trial, *msg, {{"sweep_rank", "1"}});
//   rec->add(*next_msg);                             // later points, tags, note
//   rec->add_file("last.ckpt", "checkpoint", step, bytes);   // beside rank 0's database
//   rec->end("finished");
//
// Metric values cross as JSON numbers (the shortest text that reads back exactly); NaN and
// the infinities as the strings "nan", "inf", "-inf". A point's wall time is when rank 0
// records it (the epoch's message), not when the rank logged it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "store/run_store.h"

namespace mls::runner {

// What of a run has been sent already: how many points of each metric key, and whether its
// params, snapshot and system info went (they are sent once).
struct SentPoints {
  std::map<std::string, size_t> count;
  bool described = false;
};

// Run `run_id` of `from` as a message: {"run": {name, project_path, project_hash, device,
// seed, experiment, world_size, status, note}, "params": [[k, v]...], "snapshot": {kind,
// text} | null, "system_info": [[k, v]...], "tags": [[k, v]...], "artifacts": [{path, kind,
// step}...], "points": {key: [[step, value]...]}}: the points `sent` does not hold yet, and
// params, snapshot and system info only the first time (`sent` then holds them). Errors are
// the store's.
Result<nlohmann::json> run_message(store::RunStore& from, int64_t run_id, SentPoints& sent);

// The JSON text of a message (invalid UTF-8 in a name or note replaced, never thrown).
std::string message_text(const nlohmann::json& msg);

// Rank 0's record of one trial trained elsewhere: its own connection to the database (the
// store's current run is the trial's, so several trials may be recorded at once).
class TrialRecorder {
 public:
  // Opens `db`, begins the trial's run from the message's "run" and records its params (the
  // checkpoint_dir param names rank 0's folder for the run), snapshot and system info, plus
  // `extra_info` (which rank trained it), then adds the message's points.
  static Result<std::unique_ptr<TrialRecorder>> begin(
      const std::string& db, int64_t sweep, int64_t trial, const nlohmann::json& msg,
      const std::vector<std::pair<std::string, std::string>>& extra_info = {});
  // A trial whose run never began on its rank (a setting the project refuses, a missing
  // file): a failed run of the trial with its params and `why` as its note, as a local
  // sweep's coordinator records one. Returns the run id.
  static Result<int64_t> record_refused(
      const std::string& db, int64_t sweep, int64_t trial, const std::string& name,
      const std::string& project, const std::string& experiment,
      const std::vector<std::pair<std::string, std::string>>& params, const std::string& why);

  int64_t run_id() const { return run_id_; }
  store::RunStore& store() { return *store_; }
  // The message's points (and, when present, its tags and note).
  Result<void> add(const nlohmann::json& msg);
  // Writes `bytes` as `rel` in rank 0's checkpoint folder of the run (runner/checkpoints.h)
  // and lists it as the run's artifact; `rel` must be a plain file name.
  Result<std::string> add_file(const std::string& rel, const std::string& kind, int64_t step,
                               const std::string& bytes);
  // finished | failed | interrupted | pruned.
  Result<void> end(const std::string& status);

 private:
  TrialRecorder() = default;
  std::unique_ptr<store::RunStore> store_;
  int64_t run_id_ = 0;
  std::string db_;
};

}  // namespace mls::runner
