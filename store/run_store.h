// RunStore: the record of training runs (what ran, with which parameters, and every metric
// point) in one SQLite file. It is the trainer's MetricSink, and the GUI's run browser
// reads the same file, possibly from another process while training writes.
//
//   auto store = RunStore::open(project_dir + "/runs.db");
//   if (!store) return store.error();
//   Result<int64_t> run = (*store)->begin_run({.name = "mnist-mlp", .device = "cpu", .seed = 7});
//   (*store)->log_param(*run, "lr", "0.01");
//   trainer.set_sink(store->get());            // log_metric() goes to the current run
//   ...
//   if (auto r = (*store)->end_run(*run, "finished"); !r) report(r.error().message);
//   auto best = (*store)->metric_summaries(*run);  // latest, min, max, best per key
//
// log_metric only queues a point (a short lock; keys are interned): a writer thread the
// store owns commits the queue in one transaction per ~256 points or 250 ms (the whole
// queue when it falls behind; log_metric waits once about a million points are queued).
// Each batch also updates its keys' rows of metric_summary in that transaction, so a kill
// loses at most the points not yet committed. A failed write is remembered, not thrown, and
// reported (with the points lost) by the next flush() or end_run(). Every other method takes
// one mutex, so a training thread and a GUI thread may share a store.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/result.h"
#include "engine/train/data_source.h"

namespace mls::store {

// The layout inside the file. A file with a newer version is refused rather than written
// with assumptions that may no longer hold.
// 2: runs.owner (the process that records the run, so a dead one's run can be closed).
// 3: snapshots (the text each run trained: its project document, or its Lua script).
// 4: experiments, sweeps and their trials, metric_summary, tags, notes, artifacts,
//    system_info; runs gain experiment, world size, fork step, sweep and trial, and the
//    status 'pruned' (the full SQL: store/run_schema.cpp).
constexpr int64_t kSchemaVersion = 4;

// Every member has a default, so designated initializers may name only what they set.
struct NewRun {
  std::string name{};
  std::string project_path{};
  std::string project_hash{};  // file_hash_hex(project_path)
  std::string device{};        // "cpu", "cuda:0"
  uint64_t seed = 0;
  std::optional<int64_t> parent_run_id{};  // e.g. the run this one was resumed or forked from
  std::string experiment{};                // its name, created if new; "" = "Default"
  int64_t world_size = 1;                  // processes training it together (MPI ranks)
  std::optional<int64_t> fork_step{};      // the parent's step this run continued from
  // A sweep's trial: begin_run also makes the run the trial's latest attempt (attempts + 1),
  // in the same transaction. The trial must have been added (add_trial) first.
  std::optional<int64_t> sweep_id{};
  std::optional<int64_t> trial{};
};

struct RunInfo {
  int64_t id = 0;
  std::string name, project_path, project_hash;
  std::string started;  // ISO-8601 UTC, "2024-05-01T12:34:56.789Z"
  std::string ended;    // same format; "" while running (or after a crash)
  std::string status;   // running | finished | failed | interrupted | pruned
  std::string device;
  uint64_t seed = 0;
  std::optional<int64_t> parent_run_id;
  std::string owner;       // process_owner.h: who records it ("" in files from before schema 2)
  std::string experiment;  // its name ("Default" unless begin_run named another)
  int64_t world_size = 1;
  std::optional<int64_t> fork_step, sweep_id, trial;
  std::string note;
};

// A metric key's record, kept at every flush: the latest point (largest step; the last
// logged of equal steps), min and max over the points that are numbers, the best (min or
// max by metric_higher_is_better) and the first step that reached it, and how many points
// there are. NaN points count and may be latest; they are never min, max or best.
struct MetricSummary {
  std::string key;
  double latest = 0;  // NaN when the latest point was NaN
  int64_t latest_step = 0;
  std::optional<double> min, max, best;
  std::optional<int64_t> best_step;
  int64_t count = 0;
};

struct ExperimentInfo {
  int64_t id = 0;
  std::string name, created;
  int64_t runs = 0;
};

struct ArtifactInfo {
  int64_t id = 0, run_id = 0;
  std::string kind;  // checkpoint | onnx | trace | notebook | other
  std::string path;  // as given to add_artifact
  std::string hash;  // file_hash_hex of the bytes when recorded
  int64_t bytes = 0;
  std::optional<int64_t> step;
  std::string created;
};

struct NewSweep {
  std::string experiment{};  // "" = "Default"
  std::string name{};
  std::string project_path{};
  std::string spec_json{};  // everything `sweep --resume` needs
};

struct SweepInfo {
  int64_t id = 0;
  std::string experiment, name, project_path, spec_json;
  // running | finished | interrupted | failed; a sweep whose owner process is gone reads as
  // interrupted even before a writer's open() records that.
  std::string status;
  std::string created, ended;  // ended: "" while running
  std::string owner;
};

struct TrialInfo {
  int64_t trial = 0;
  std::string params_json;
  std::optional<int64_t> run_id;  // its latest attempt
  int64_t attempts = 0;
  std::string run_status;  // that run's status; "" when none
};

// What a run trained, as text: kind "mls" (the project document, as serialize_document
// writes it, with the run's overrides applied) or "lua" (the script).
struct Snapshot {
  std::string kind, text;
};

struct MetricPoint {
  int64_t step = 0;
  double value = 0;      // NaN survives the round trip (SQLite itself would store NULL)
  double wall_time = 0;  // unix seconds when log_metric was called
};

class RunStore : public MetricSink {
 public:
  // The parent directory must exist; the file and its schema are created if missing.
  // Errors name the path: a non-database file, a newer schema, a read-only location.
  // Opening also closes the runs that a process which is gone left 'running' (killed,
  // crashed): they become 'interrupted' (closed_stale_runs() lists them).
  static Result<std::unique_ptr<RunStore>> open(const std::string& path);
  // For commands that only read (runs, eval, predict): works on a read-only file or folder,
  // never creates a file, and writes nothing (a missing file is an error naming it).
  static Result<std::unique_ptr<RunStore>> open_read_only(const std::string& path);
  bool read_only() const;
  // The runs open() found 'running' with their process gone, and marked interrupted.
  const std::vector<int64_t>& closed_stale_runs() const;
  // Stops the writer thread and writes every queued point; a run still 'running' stays so
  // (what a crash leaves).
  ~RunStore() override;
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // Starts a run with status 'running' and started = now; it becomes the current run.
  Result<int64_t> begin_run(const NewRun& run);
  // Sets (or replaces) one parameter.
  Result<void> log_param(int64_t run_id, const std::string& key, const std::string& value);
  // Queues a point for the current run (MetricSink). Never fails here; see flush().
  void log_metric(std::string_view key, int64_t step, double value) override;
  // Returns once every point logged before it is committed (the writer thread's batch
  // included), and reports, once, any write failure since the last report.
  Result<void> flush();
  // Batches the writer thread has taken from the queue so far (tests, benchmarks).
  int64_t writer_batches();
  // Flushes, then sets ended = now and status: finished | failed | interrupted | pruned.
  Result<void> end_run(int64_t run_id, const std::string& status);
  // Marks an ended (or crashed) run as running again, training resuming from a checkpoint
  // taken after `from.step` steps and `from.epoch` epochs: the metrics a lost attempt logged
  // past that point (per step, or per epoch for metric_per_epoch keys) are dropped in the
  // same transaction, so nothing is recorded twice. Metrics logged from now on belong to it.
  struct ResumePoint {
    int64_t step = 0, epoch = 0;
  };
  Result<void> resume_run(int64_t run_id, ResumePoint from);

  Result<std::vector<RunInfo>> list_runs();  // ordered by id
  Result<RunInfo> get_run(int64_t id);       // error "no run 7 in PATH"
  Result<std::vector<std::pair<std::string, std::string>>> params(int64_t run_id);  // by key
  // Reads include this store's buffered points (they are flushed first).
  Result<std::vector<MetricPoint>> metrics(int64_t run_id, const std::string& key);  // by step
  Result<std::vector<std::string>> metric_keys(int64_t run_id);                      // sorted
  // One per key, sorted by key; buffered points are flushed first.
  Result<std::vector<MetricSummary>> metric_summaries(int64_t run_id);
  // One snapshot per run: put_snapshot replaces it; snapshot() is nullopt when none was kept.
  Result<void> put_snapshot(int64_t run_id, const Snapshot& snap);
  Result<std::optional<Snapshot>> snapshot(int64_t run_id);

  // --- tags, notes, system info (store/run_records.cpp) ---
  Result<void> set_tag(int64_t run_id, const std::string& key, const std::string& value = "");
  Result<bool> remove_tag(int64_t run_id, const std::string& key);  // false: it had none
  Result<std::vector<std::pair<std::string, std::string>>> tags(int64_t run_id);  // by key
  Result<void> set_note(int64_t run_id, const std::string& text);
  // host, cpu, cores, os, version...: each pair set or replaced.
  Result<void> set_system_info(int64_t run_id,
                               const std::vector<std::pair<std::string, std::string>>& pairs);
  Result<std::vector<std::pair<std::string, std::string>>> system_info(int64_t run_id);
  Result<std::vector<ExperimentInfo>> list_experiments();  // by id; Default first

  // --- artifacts ---
  // Records a file the run produced: its FNV-1a hash and size are read now. `path` is kept
  // as given; a relative one is read relative to the database's folder. Recording the same
  // path again for the run updates it (a checkpoint rewritten each epoch).
  Result<int64_t> add_artifact(int64_t run_id, const std::string& kind, const std::string& path,
                               std::optional<int64_t> step = std::nullopt);
  Result<std::vector<ArtifactInfo>> artifacts(int64_t run_id);  // by id
  // Whether a run other than `except_run` lists this file (paths compared after resolving
  // relative ones against the database's folder).
  Result<bool> artifact_shared(const std::string& path, int64_t except_run);
  // `path` made absolute against the database's folder (lexically normal).
  std::string resolve_path(const std::string& path) const;

  // --- lineage and removal ---
  // Copies `from_run`'s metric points up to its step `up_to_step` (epoch `up_to_epoch` for
  // metric_per_epoch keys) into `to_run`, and recomputes to_run's summaries: a fork starts
  // with its parent's curve up to the fork point.
  Result<void> copy_metrics(int64_t from_run, int64_t to_run, int64_t up_to_step,
                            int64_t up_to_epoch);
  // Removes the run and everything recorded for it in one transaction (its children keep
  // their rows, parent_run_id cleared; a sweep trial forgets it). Returns the paths of its
  // artifacts, for the caller to remove the files no other run lists
  // (runner/run_files.h delete_run does). A run still training in a live process is refused.
  Result<std::vector<std::string>> delete_run(int64_t run_id);

  // --- sweeps (store/run_sweeps.cpp) ---
  // A sweep with status 'running' owned by this process.
  Result<int64_t> create_sweep(const NewSweep& sweep);
  Result<SweepInfo> get_sweep(int64_t id);       // error "no sweep 3 in PATH"
  Result<std::vector<SweepInfo>> list_sweeps();  // by id
  // status: finished | interrupted | failed.
  Result<void> end_sweep(int64_t id, const std::string& status);
  // Takes the sweep over for this process (`sweep --resume`): status 'running', ended
  // cleared, owner = this process.
  Result<void> reopen_sweep(int64_t id);
  // Only the owner (e.g. a coordinator handing over): status unchanged.
  Result<void> set_sweep_owner(int64_t id);
  Result<void> add_trial(int64_t sweep_id, int64_t trial, const std::string& params_json);
  Result<std::vector<TrialInfo>> trials(int64_t sweep_id);  // by trial

  // How long a write waits for another connection's lock before failing with a message
  // naming the file (default sqlite.h kBusyTimeoutMs).
  void set_busy_timeout_ms(int ms);

  const std::string& path() const;

 private:
  struct Impl;
  explicit RunStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mls::store
