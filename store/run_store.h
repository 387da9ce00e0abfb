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
//
// Metric points are buffered and written in one transaction per ~256 points or 1 s, so
// thousands of points per second stay cheap. A failed write is remembered, not thrown, and
// reported by the next flush() or end_run(). All methods take one mutex, so a training
// thread and a GUI thread may share a store.
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
constexpr int64_t kSchemaVersion = 3;

// Every member has a default, so designated initializers may name only what they set.
struct NewRun {
  std::string name{};
  std::string project_path{};
  std::string project_hash{};  // file_hash_hex(project_path)
  std::string device{};        // "cpu", "cuda:0"
  uint64_t seed = 0;
  std::optional<int64_t> parent_run_id{};  // e.g. the run this one was resumed or forked from
};

struct RunInfo {
  int64_t id = 0;
  std::string name, project_path, project_hash;
  std::string started;  // ISO-8601 UTC, "2024-05-01T12:34:56.789Z"
  std::string ended;    // same format; "" while running (or after a crash)
  std::string status;   // running | finished | failed | interrupted
  std::string device;
  uint64_t seed = 0;
  std::optional<int64_t> parent_run_id;
  std::string owner;  // process_owner.h: who records it ("" in files from before schema 2)
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
  ~RunStore() override;  // flushes; a run still 'running' stays so (what a crash leaves)
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // Starts a run with status 'running' and started = now; it becomes the current run.
  Result<int64_t> begin_run(const NewRun& run);
  // Sets (or replaces) one parameter.
  Result<void> log_param(int64_t run_id, const std::string& key, const std::string& value);
  // Appends a point to the current run (MetricSink). Never fails here; see flush().
  void log_metric(std::string_view key, int64_t step, double value) override;
  // Writes buffered points and reports, once, any write failure since the last report.
  Result<void> flush();
  // Flushes, then sets ended = now and status: finished | failed | interrupted.
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
  // One snapshot per run: put_snapshot replaces it; snapshot() is nullopt when none was kept.
  Result<void> put_snapshot(int64_t run_id, const Snapshot& snap);
  Result<std::optional<Snapshot>> snapshot(int64_t run_id);

  const std::string& path() const;

 private:
  struct Impl;
  explicit RunStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mls::store
