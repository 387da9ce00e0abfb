// RunStore's inside, shared by its .cpp files (run_store.cpp: open, runs, metrics, reads;
// run_records.cpp: tags, notes, artifacts, system info, copies, deletion; run_sweeps.cpp).
// Not for other code: read the tables with SQL, write through RunStore.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/run_store.h"
#include "store/sqlite.h"

namespace mls::store {

struct RunStore::Impl {
  struct Pending {
    int64_t run_id;
    const std::string* key;  // interned in `keys`: no allocation per point
    int64_t step;
    double value;
    double wall_time;
  };

  // Declared first so it is destroyed last, after the statements that use it.
  Db db;
  Stmt insert_run, insert_param, insert_metric, upsert_summary, end_run, resume_run,
      drop_metrics_after, select_runs, select_run, select_params, select_metrics,
      select_metric_keys;

  std::string owner;           // this process (process_owner.h)
  bool read_only = false;      // open_read_only: only the select statements exist
  std::vector<int64_t> stale;  // runs closed at open because their process was gone
  Result<void> close_stale_runs();
  Result<void> close_stale_sweeps();
  struct Sql {
    Stmt* stmt;
    const char* text;
  };
  Result<void> prepare(std::span<const Sql> statements);
  Result<void> prepare_readers();

  // Two locks, always taken in this order: `mu` guards the connection and its statements
  // (every method; the writer thread while it writes a batch), `qmu` the queue of logged
  // points and what log_metric reads. log_metric takes only qmu, so the training thread
  // never waits for a write (only for a full queue).
  std::mutex mu;
  std::mutex qmu;
  std::condition_variable work;   // the writer: a batch is due, or stop
  std::condition_variable space;  // log_metric: the queue went below kMaxQueued
  std::vector<Pending> queue;     // qmu
  std::chrono::steady_clock::time_point queued_since;  // qmu: when queue's oldest point came
  std::set<std::string, std::less<>> keys;  // qmu; nodes never move, so Pending::key holds
  std::optional<int64_t> current_run;       // qmu
  // The first unreported write failure, and how many points were lost since then (qmu).
  std::optional<std::string> write_error;
  int64_t lost_points = 0;
  int64_t batches = 0;         // qmu: batches taken from the queue by the writer thread
  bool stop = false;           // qmu: the destructor's signal to the writer
  std::vector<Pending> batch;  // mu: the batch being written (its capacity is reused)
  std::thread writer;          // absent on read-only stores

  void start_writer();
  void writer_loop();
  void stop_writer();
  ~Impl() { stop_writer(); }  // ~RunStore stopped it already; this covers a failed open
  // With mu held: writes every queued point (one transaction), on the calling thread.
  void flush_locked();
  void set_current_run(std::optional<int64_t> run) {
    std::lock_guard q(qmu);
    current_run = run;
  }
  void forget_current_run(int64_t run) {
    std::lock_guard q(qmu);
    if (current_run == run) current_run.reset();
  }
  Result<void> take_write_error();
  Error no_run(int64_t id) const {
    return make_error("no run " + std::to_string(id) + " in " + db.path());
  }
  Error read_only_error() const {
    return make_error(db.path() + ": opened read-only (by a command that only reads runs)");
  }
  // Get-or-create, inside the caller's transaction; "" is Default (id 1).
  Result<int64_t> experiment_id(const std::string& name);
  // An error for a write that failed on a foreign key naming run_id, else `e` as it is.
  Error run_write_error(const std::string& what, int64_t run_id, const Error& e) const;
  // Runs a write that names a run; with must_change, "no run N" when it changed no row.
  Result<void> run_write(Stmt& st, const std::string& what, int64_t run_id, bool must_change);
};

// Millisecond ISO-8601 UTC, computed by SQLite so every writer formats it the same way.
#define MLS_NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

// Runs a statement of key/value pairs: rows of (text, text).
Result<std::vector<std::pair<std::string, std::string>>> read_pairs(Stmt& st);

}  // namespace mls::store
