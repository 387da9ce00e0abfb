// [SECTION] index
//   impl        statement texts, row readers
//   open        validate, configure, create or upgrade (store/run_schema.cpp)
//   runs        begin_run / log_param / end_run / resume_run
//   metrics     log_metric / flush (points and their summaries in one transaction)
//   reads       list_runs / get_run / params / metrics / metric_keys / metric_summaries
// Tags, notes, artifacts, system info, copies and deletion: run_records.cpp; sweeps:
// run_sweeps.cpp.
#include "store/run_store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>

#include "store/process_owner.h"
#include "store/run_schema.h"
#include "store/run_store_impl.h"
#include "store/run_summary.h"
#include "store/sqlite.h"

namespace mls::store {

// [SECTION] impl -------------------------------------------------------------------------

namespace {

// The writer thread commits a batch at kFlushPoints queued points or when the oldest has
// waited kFlushInterval, whichever comes first; behind, it takes the whole queue at once.
constexpr size_t kFlushPoints = 256;
constexpr auto kFlushInterval = std::chrono::milliseconds(250);
// log_metric waits rather than queue more (about 40 MB of points).
constexpr size_t kMaxQueued = size_t{1} << 20;

}  // namespace

namespace {

RunInfo read_run(const Stmt& st) {
  RunInfo r;
  r.id = st.column_int(0);
  r.name = st.column_text(1);
  r.project_path = st.column_text(2);
  r.project_hash = st.column_text(3);
  r.started = st.column_text(4);
  r.ended = st.column_text(5);
  r.status = st.column_text(6);
  r.device = st.column_text(7);
  r.seed = static_cast<uint64_t>(st.column_int(8));  // stored as the same 64 bits
  if (!st.column_is_null(9)) r.parent_run_id = st.column_int(9);
  r.owner = st.column_text(10);
  r.experiment = st.column_text(11);
  r.world_size = st.column_int(12);
  if (!st.column_is_null(13)) r.fork_step = st.column_int(13);
  if (!st.column_is_null(14)) r.sweep_id = st.column_int(14);
  if (!st.column_is_null(15)) r.trial = st.column_int(15);
  r.note = st.column_text(16);
  return r;
}

#define MLS_RUN_SELECT                                                                            \
  "SELECT r.id, r.name, r.project_path, r.project_hash, r.started, r.ended, r.status, r.device, " \
  "r.seed, r.parent_run_id, r.owner, e.name, r.world_size, r.fork_step, r.sweep_id, r.trial, "    \
  "r.note FROM runs r LEFT JOIN experiments e ON e.id = r.experiment_id "

// Configures a connection that writes, and creates or upgrades the schema. Foreign keys are
// off while the schema changes (a rebuilt table must not cascade), on for everything after.
Result<void> prepare_for_writing(Db& db, int64_t version) {
  // WAL lets the GUI read while training writes; synchronous=NORMAL is durable across an
  // application crash (only power loss can drop the last commits) and makes each flush
  // cheap. A filesystem without WAL support keeps its journal mode: slower, still correct.
  // The switch to WAL needs the file to itself: two processes creating it at once collide
  // there, and SQLite reports that at once instead of waiting (see exec_retrying_busy).
  if (Result<void> w = db.exec_retrying_busy("PRAGMA journal_mode = WAL"); !w) return w.error();
  Result<void> r = db.exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;");
  if (!r) return r.error();
  // A file at the current version needs no write lock to open: a store opens while another
  // process holds a long write transaction.
  if (version != kSchemaVersion) {
    Result<Transaction> tx = Transaction::begin(db);
    if (!tx) return tx.error();
    if (Result<void> m = create_or_migrate(db); !m) return m.error();
    if (Result<void> c = tx->commit(); !c) return c.error();
  }
  return db.exec("PRAGMA foreign_keys = ON");
}

Error not_a_run_db_empty(const std::string& path) {
  return make_error(path + ": not an mlstudio run database (the file is empty)");
}

Result<void> upgrade_for_reading(const std::string& path, int64_t version) {
  Result<Db> w = Db::open(path);
  std::string why = "schema version " + std::to_string(version) + " must be upgraded to " +
                    std::to_string(kSchemaVersion) + " before it is read, which needs write access";
  if (!w || w->read_only()) {
    return make_error(path + ": " + why + " (" +
                      (w ? std::string("the file is read-only") : w.error().message) +
                      "); open it once with a command that records runs where it is writable");
  }
  if (Result<void> r = prepare_for_writing(*w, version); !r) {
    return make_error(path + ": " + why + ", and the upgrade failed: " + r.error().message);
  }
  return {};
}

}  // namespace

// [SECTION] open -------------------------------------------------------------------------

Result<std::unique_ptr<RunStore>> RunStore::open(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return make_error(path + ": cannot create run database: directory " + parent.string() +
                      " does not exist");
  }

  Result<Db> db = Db::open(path);
  if (!db) return db.error();
  if (db->read_only()) {
    return make_error(path + ": run database is read-only (recording runs needs write access)");
  }
  // Read-only checks first: a file we refuse is left byte for byte as it was.
  Result<int64_t> version = check_run_db(*db);
  if (!version) return version.error();
  if (Result<void> r = prepare_for_writing(*db, *version); !r) return r.error();

  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  const Impl::Sql writers[] = {
      {&impl->insert_run,
       "INSERT INTO runs(name, project_path, project_hash, started, status, device, seed, "
       "parent_run_id, owner, experiment_id, world_size, fork_step, sweep_id, trial) "
       "VALUES(?1, ?2, ?3, " MLS_NOW_SQL ", 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"},
      {&impl->insert_param,
       "INSERT INTO params(run_id, key, value) VALUES(?1, ?2, ?3) "
       "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value"},
      {&impl->insert_metric,
       "INSERT INTO metrics(run_id, key, step, value, wall_time) VALUES(?1, ?2, ?3, ?4, ?5)"},
      {&impl->upsert_summary, kSummaryUpsertSql},
      {&impl->end_run, "UPDATE runs SET ended = " MLS_NOW_SQL ", status = ?2 WHERE id = ?1"},
      {&impl->resume_run,
       "UPDATE runs SET ended = NULL, status = 'running', owner = ?2 WHERE id = ?1"},
      {&impl->drop_metrics_after,
       "DELETE FROM metrics WHERE run_id = ?1 AND key = ?2 AND step > ?3"},
  };
  if (Result<void> r = impl->prepare(writers); !r) return r.error();
  if (Result<void> r = impl->prepare_readers(); !r) return r.error();
  impl->owner = this_process();
  if (Result<void> r = impl->close_stale_runs(); !r) return r.error();
  if (Result<void> r = impl->close_stale_sweeps(); !r) return r.error();
  impl->start_writer();
  return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
}

Result<std::unique_ptr<RunStore>> RunStore::open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return make_error(path +
                      ": no run database here (nothing has been recorded into it; --db "
                      "names another)");
  // mode=ro reads a database in WAL mode while its folder is writable; immutable=1 reads
  // one whose folder is not (no -shm file can be made, and no writer can exist there).
  Result<Db> db = Db::open_read_only(path, /*immutable=*/false);
  if (db) {
    if (Result<int64_t> r = check_run_db(*db); !r) {
      if (db->errcode() != SQLITE_CANTOPEN && db->errcode() != SQLITE_READONLY) return r.error();
      db = Db::open_read_only(path, /*immutable=*/true);
    }
  } else {
    db = Db::open_read_only(path, /*immutable=*/true);
  }
  if (!db) return db.error();
  Result<int64_t> version = check_run_db(*db);
  if (!version) return version.error();
  if (*version == 0) return not_a_run_db_empty(path);
  if (*version < kSchemaVersion) {
    // An older file is upgraded first, where it can be written (the one write a reader
    // makes): readers and RunTable's SQL only know the current layout.
    if (Result<void> r = upgrade_for_reading(path, *version); !r) return r.error();
    db = Db::open_read_only(path, /*immutable=*/false);
    if (!db) return db.error();
    if (Result<int64_t> v = check_run_db(*db); !v) return v.error();
  }
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  impl->read_only = true;
  if (Result<void> r = impl->prepare_readers(); !r) return r.error();
  return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
}

bool RunStore::read_only() const {
  return impl_->read_only;
}

const std::vector<int64_t>& RunStore::closed_stale_runs() const {
  return impl_->stale;
}

Result<void> RunStore::Impl::prepare(std::span<const Sql> statements) {
  for (const Sql& s : statements) {
    Result<Stmt> st = db.prepare(s.text);
    if (!st) return st.error();
    *s.stmt = std::move(*st);
  }
  return {};
}

// What every store reads with, read-only ones included.
Result<void> RunStore::Impl::prepare_readers() {
  const Sql readers[] = {
      {&select_runs, MLS_RUN_SELECT "ORDER BY r.id"},
      {&select_run, MLS_RUN_SELECT "WHERE r.id = ?1"},
      {&select_params, "SELECT key, value FROM params WHERE run_id = ?1 ORDER BY key"},
      // (step, rowid) follows the index, and keeps repeated steps in logging order.
      {&select_metrics,
       "SELECT step, value, wall_time FROM metrics WHERE run_id = ?1 AND key = ?2 "
       "ORDER BY step, rowid"},
      {&select_metric_keys, "SELECT DISTINCT key FROM metrics WHERE run_id = ?1 ORDER BY key"},
  };
  return prepare(readers);
}

Result<void> RunStore::Impl::close_stale_runs() {
  std::vector<std::pair<int64_t, std::string>> gone;
  {
    Result<Stmt> st =
        db.prepare("SELECT id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL");
    if (!st) return st.error();
    auto scope = st->scoped();
    for (;;) {
      Result<bool> row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      if (owner_gone(st->column_text(1))) gone.emplace_back(st->column_int(0), st->column_text(1));
    }
  }
  // The owner is part of the condition: a run resumed meanwhile has a new one.
  Result<Stmt> up = db.prepare("UPDATE runs SET status = 'interrupted', ended = " MLS_NOW_SQL
                               " WHERE id = ?1 AND status = 'running' AND owner = ?2");
  if (!up) return up.error();
  for (const auto& [id, owner] : gone) {
    auto scope = up->scoped();
    up->bind_int(1, id).bind_text(2, owner);
    if (Result<void> r = up->run(); !r) return r.error();
    if (db.changes() > 0) stale.push_back(id);
  }
  return {};
}

RunStore::RunStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void RunStore::set_busy_timeout_ms(int ms) {
  std::lock_guard lock(impl_->mu);
  impl_->db.set_busy_timeout(ms);
}

RunStore::~RunStore() {
  impl_->stop_writer();  // it writes what was queued before it ends
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  // A destructor cannot return the error, and silently losing metrics is worse than a
  // line on stderr.
  if (Result<void> r = impl_->take_write_error(); !r) {
    std::fprintf(stderr, "mlstudio: %s\n", r.error().message.c_str());
  }
}

const std::string& RunStore::path() const {
  return impl_->db.path();
}

// [SECTION] runs -------------------------------------------------------------------------

Result<int64_t> RunStore::begin_run(const NewRun& run) {
  if (impl_->read_only) return impl_->read_only_error();
  if (run.trial.has_value() != run.sweep_id.has_value())
    return make_error("begin_run: a sweep's run needs both sweep_id and trial");
  if (run.world_size < 1)
    return make_error("begin_run: world_size " + std::to_string(run.world_size) + " is below 1");
  std::lock_guard lock(impl_->mu);
  Db& db = impl_->db;
  // The run, its experiment and its trial's latest attempt together, or none of them.
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  Result<int64_t> experiment = impl_->experiment_id(run.experiment);
  if (!experiment) return experiment.error();
  {
    Stmt& st = impl_->insert_run;
    auto scope = st.scoped();
    st.bind_text(1, run.name)
        .bind_text(2, run.project_path)
        .bind_text(3, run.project_hash)
        .bind_text(4, run.device)
        .bind_int(5, static_cast<int64_t>(run.seed));
    if (run.parent_run_id) st.bind_int(6, *run.parent_run_id);
    st.bind_text(7, impl_->owner).bind_int(8, *experiment).bind_int(9, run.world_size);
    if (run.fork_step) st.bind_int(10, *run.fork_step);
    if (run.sweep_id) st.bind_int(11, *run.sweep_id).bind_int(12, *run.trial);
    if (Result<void> r = st.run(); !r) {
      if (db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY) {
        std::string what = run.parent_run_id ? "no parent run " + std::to_string(*run.parent_run_id)
                                             : std::string("no such parent run");
        if (run.sweep_id) what += " or no sweep " + std::to_string(*run.sweep_id);
        return make_error("begin_run: " + what + " in " + db.path());
      }
      return r.error();
    }
  }
  int64_t id = db.last_insert_rowid();
  if (run.sweep_id) {
    Result<Stmt> st = db.prepare(
        "UPDATE sweep_trials SET run_id = ?1, attempts = attempts + 1 "
        "WHERE sweep_id = ?2 AND trial = ?3");
    if (!st) return st.error();
    auto scope = st->scoped();
    st->bind_int(1, id).bind_int(2, *run.sweep_id).bind_int(3, *run.trial);
    if (Result<void> r = st->run(); !r) return r.error();
    if (db.changes() == 0) {
      return make_error("begin_run: sweep " + std::to_string(*run.sweep_id) + " has no trial " +
                        std::to_string(*run.trial) + " in " + db.path() +
                        " (add_trial records it first)");
    }
  }
  if (Result<void> r = tx->commit(); !r) return r.error();
  impl_->set_current_run(id);
  return id;
}

Result<void> RunStore::log_param(int64_t run_id, const std::string& key, const std::string& value) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Stmt& st = impl_->insert_param;
  auto scope = st.scoped();
  st.bind_int(1, run_id).bind_text(2, key).bind_text(3, value);
  if (Result<void> r = st.run(); !r) {
    if (impl_->db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return make_error("log_param(\"" + key + "\"): " + impl_->no_run(run_id).message);
    }
    return r.error();
  }
  return {};
}

Result<void> RunStore::end_run(int64_t run_id, const std::string& status) {
  if (impl_->read_only) return impl_->read_only_error();
  if (status != "finished" && status != "failed" && status != "interrupted" && status != "pruned") {
    return make_error("end_run: status '" + status +
                      "' is not one of finished, failed, interrupted, pruned");
  }
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  Stmt& st = impl_->end_run;
  {
    auto scope = st.scoped();
    st.bind_int(1, run_id).bind_text(2, status);
    if (Result<void> r = st.run(); !r) return r.error();
    if (impl_->db.changes() == 0) return impl_->no_run(run_id);
  }
  impl_->forget_current_run(run_id);
  return impl_->take_write_error();
}

Result<void> RunStore::resume_run(int64_t run_id, ResumePoint from) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  // Reopening the run and dropping what the lost attempt logged past the checkpoint are one
  // transaction: a kill in between leaves neither half.
  Result<Transaction> tx = Transaction::begin(impl_->db);
  if (!tx) return tx.error();
  {
    Stmt& st = impl_->resume_run;
    auto scope = st.scoped();
    st.bind_int(1, run_id).bind_text(2, impl_->owner);
    if (Result<void> r = st.run(); !r) return r.error();
    if (impl_->db.changes() == 0) return impl_->no_run(run_id);
  }
  std::vector<std::string> keys;
  {
    Stmt& st = impl_->select_metric_keys;
    auto scope = st.scoped();
    st.bind_int(1, run_id);
    for (;;) {
      Result<bool> row = st.step();
      if (!row) return row.error();
      if (!*row) break;
      keys.push_back(st.column_text(0));
    }
  }
  for (const std::string& key : keys) {
    Stmt& st = impl_->drop_metrics_after;
    auto scope = st.scoped();
    st.bind_int(1, run_id);
    st.bind_text(2, key);
    st.bind_int(3, metric_per_epoch(key) ? from.epoch : from.step);
    if (Result<void> r = st.run(); !r) return r.error();
  }
  if (Result<void> r = recompute_summaries(impl_->db, run_id); !r) return r.error();
  if (Result<void> r = tx->commit(); !r) return r.error();
  impl_->set_current_run(run_id);
  return {};
}

// [SECTION] metrics ----------------------------------------------------------------------

void RunStore::log_metric(std::string_view key, int64_t step, double value) {
  double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Impl& m = *impl_;
  std::unique_lock q(m.qmu);
  const bool threaded = m.writer.joinable();
  if (!threaded && m.queue.size() >= kFlushPoints) {
    q.unlock();  // mu before qmu
    std::lock_guard lock(m.mu);
    m.flush_locked();
    q.lock();
  }
  // Waits are over before current_run is read: end_run may have ended it meanwhile.
  if (m.queue.size() >= kMaxQueued) {
    m.work.notify_one();
    m.space.wait(q, [&] { return m.queue.size() < kMaxQueued; });
  }
  if (!m.current_run || m.read_only) {
    if (!m.write_error) {
      m.write_error = m.db.path() + ": log_metric(\"" + std::string(key) +
                      "\") with no current run (call begin_run first)";
    }
    ++m.lost_points;
    return;
  }
  auto k = m.keys.find(key);
  if (k == m.keys.end()) k = m.keys.emplace(key).first;
  m.queue.push_back({*m.current_run, &*k, step, value, wall});
  // The writer sleeps until a batch's first point, then until it is full or due.
  if (m.queue.size() == 1) {
    m.queued_since = std::chrono::steady_clock::now();
    m.work.notify_one();
  } else if (m.queue.size() == kFlushPoints) {
    m.work.notify_one();
  }
}

Result<void> RunStore::flush() {
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  return impl_->take_write_error();
}

void RunStore::Impl::start_writer() {
  queue.reserve(kFlushPoints * 4);
  batch.reserve(kFlushPoints * 4);
  // Without a thread (the system refused one), log_metric writes each full batch itself,
  // as before there was a writer.
  try {
    writer = std::thread([this] { writer_loop(); });
  } catch (const std::system_error&) {
  }
}

void RunStore::Impl::stop_writer() {
  if (!writer.joinable()) return;
  {
    std::lock_guard q(qmu);
    stop = true;
  }
  work.notify_one();
  writer.join();
}

void RunStore::Impl::writer_loop() {
  for (;;) {
    {
      std::unique_lock q(qmu);
      while (!stop) {
        if (queue.empty()) {
          work.wait(q);
          continue;
        }
        if (queue.size() >= kFlushPoints) break;
        auto due = queued_since + kFlushInterval;
        if (std::chrono::steady_clock::now() >= due) break;
        work.wait_until(q, due);
      }
      if (stop && queue.empty()) return;
    }
    // A reader or flush() holding mu may write the queue first; then there is nothing left.
    std::lock_guard lock(mu);
    flush_locked();
  }
}

// One transaction per batch: a commit (not a row) is what costs a disk sync. The batch's
// summary per (run, key) is folded into metric_summary in the same transaction, so a reader
// never sees points without their summary. The batch is taken under mu, so no batch is ever
// half-way between the queue and the file while another holder of mu reads or writes:
// points reach the file in logging order, and a caller of flush() sees every point logged
// before it written (or its loss recorded).
void RunStore::Impl::flush_locked() {
  {
    std::lock_guard q(qmu);
    if (queue.empty()) return;
    batch.swap(queue);
    if (std::this_thread::get_id() == writer.get_id()) ++batches;
  }
  space.notify_all();
  auto write = [&]() -> Result<void> {
    Result<Transaction> tx = Transaction::begin(db);
    if (!tx) return tx.error();
    std::vector<std::pair<int64_t, SummaryAcc>> sums;  // a handful of keys per batch
    size_t hit = 0;
    {
      auto scope = insert_metric.scoped();
      for (const Pending& p : batch) {
        insert_metric.bind_int(1, p.run_id).bind_text(2, *p.key).bind_int(3, p.step);
        insert_metric.bind_double(4, p.value).bind_double(5, p.wall_time);
        if (Result<void> r = insert_metric.run(); !r) return r.error();
        if (hit >= sums.size() || sums[hit].first != p.run_id || sums[hit].second.s.key != *p.key) {
          hit = 0;
          while (hit < sums.size() &&
                 (sums[hit].first != p.run_id || sums[hit].second.s.key != *p.key))
            ++hit;
          if (hit == sums.size()) sums.emplace_back(p.run_id, SummaryAcc(*p.key));
        }
        sums[hit].second.add(p.step, p.value);
      }
    }
    for (const auto& [run, acc] : sums)
      if (Result<void> r = store::upsert_summary(upsert_summary, run, acc); !r) return r;
    return tx->commit();
  };
  if (Result<void> r = write(); !r) {
    // Dropped rather than retried: a failure that outlives a 5 s busy timeout (disk full,
    // file removed) would otherwise grow the queue for the rest of the run.
    std::lock_guard q(qmu);
    if (!write_error) write_error = "writing metric points failed: " + r.error().message;
    lost_points += static_cast<int64_t>(batch.size());
  }
  batch.clear();
}

int64_t RunStore::writer_batches() {
  std::lock_guard q(impl_->qmu);
  return impl_->batches;
}

Result<void> RunStore::Impl::take_write_error() {
  std::lock_guard q(qmu);
  if (!write_error) return {};
  std::string msg =
      *write_error + "; " + std::to_string(lost_points) + " metric point(s) were not recorded";
  write_error.reset();
  lost_points = 0;
  return make_error(std::move(msg));
}

// [SECTION] reads ------------------------------------------------------------------------

Result<std::vector<RunInfo>> RunStore::list_runs() {
  std::lock_guard lock(impl_->mu);
  Stmt& st = impl_->select_runs;
  auto scope = st.scoped();
  std::vector<RunInfo> runs;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return runs;
    runs.push_back(read_run(st));
  }
}

Result<RunInfo> RunStore::get_run(int64_t id) {
  std::lock_guard lock(impl_->mu);
  Stmt& st = impl_->select_run;
  auto scope = st.scoped();
  st.bind_int(1, id);
  Result<bool> row = st.step();
  if (!row) return row.error();
  if (!*row) return impl_->no_run(id);
  return read_run(st);
}

Result<std::vector<std::pair<std::string, std::string>>> RunStore::params(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Stmt& st = impl_->select_params;
  auto scope = st.scoped();
  st.bind_int(1, run_id);
  return read_pairs(st);
}

Result<std::vector<MetricPoint>> RunStore::metrics(int64_t run_id, const std::string& key) {
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();  // a failure stays recorded for flush()/end_run() to report
  Stmt& st = impl_->select_metrics;
  auto scope = st.scoped();
  st.bind_int(1, run_id).bind_text(2, key);
  std::vector<MetricPoint> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return out;
    double v =
        st.column_is_null(1) ? std::numeric_limits<double>::quiet_NaN() : st.column_double(1);
    out.push_back({st.column_int(0), v, st.column_double(2)});
  }
}

Result<std::vector<std::string>> RunStore::metric_keys(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  Stmt& st = impl_->select_metric_keys;
  auto scope = st.scoped();
  st.bind_int(1, run_id);
  std::vector<std::string> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(st.column_text(0));
  }
}

Result<std::vector<MetricSummary>> RunStore::metric_summaries(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  Result<Stmt> st = impl_->db.prepare(
      "SELECT key, latest, latest_step, \"min\", \"max\", best, best_step, count "
      "FROM metric_summary WHERE run_id = ?1 ORDER BY key");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id);
  std::vector<MetricSummary> out;
  auto opt = [&](int i) {
    return st->column_is_null(i) ? std::nullopt : std::optional<double>(st->column_double(i));
  };
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    MetricSummary m;
    m.key = st->column_text(0);
    m.latest = opt(1).value_or(std::numeric_limits<double>::quiet_NaN());
    m.latest_step = st->column_int(2);
    m.min = opt(3);
    m.max = opt(4);
    m.best = opt(5);
    if (!st->column_is_null(6)) m.best_step = st->column_int(6);
    m.count = st->column_int(7);
    out.push_back(std::move(m));
  }
}

Result<void> RunStore::put_snapshot(int64_t run_id, const Snapshot& snap) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "INSERT INTO snapshots(run_id, kind, text) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(run_id) DO UPDATE SET kind = excluded.kind, text = excluded.text");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, snap.kind).bind_text(3, snap.text);
  if (Result<void> r = st->run(); !r) {
    if (impl_->db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY)
      return make_error("put_snapshot: " + impl_->no_run(run_id).message);
    return r.error();
  }
  return {};
}

Result<std::optional<Snapshot>> RunStore::snapshot(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare("SELECT kind, text FROM snapshots WHERE run_id = ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id);
  Result<bool> row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<Snapshot>();
  return std::optional<Snapshot>(Snapshot{st->column_text(0), st->column_text(1)});
}

}  // namespace mls::store

#undef MLS_RUN_SELECT
