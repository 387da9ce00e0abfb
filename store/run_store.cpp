// [SECTION] index
//   schema      the SQL, and the checks made before anything is written
//   impl        prepared statements and the metric buffer
//   open        validate, configure, create
//   runs        begin_run / log_param / end_run
//   metrics     log_metric / flush
//   reads       list_runs / get_run / params / metrics / metric_keys
#include "store/run_store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <span>

#include "store/process_owner.h"
#include "store/sqlite.h"

namespace mls::store {

// [SECTION] schema -----------------------------------------------------------------------

namespace {

// AUTOINCREMENT so a run id is never reused: ids are shown to users and may be referenced
// from outside (parent_run_id, notes, exported plots).
// metrics.value is nullable because SQLite stores a NaN as NULL; a diverged loss must
// still be recorded.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  project_path TEXT NOT NULL,
  project_hash TEXT NOT NULL,
  started TEXT NOT NULL,
  ended TEXT,
  status TEXT NOT NULL CHECK(status IN ('running','finished','failed','interrupted')),
  device TEXT NOT NULL,
  seed INTEGER NOT NULL,
  parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  owner TEXT);
CREATE TABLE IF NOT EXISTS params(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run_id, key));
CREATE TABLE IF NOT EXISTS metrics(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  wall_time REAL NOT NULL);
CREATE INDEX IF NOT EXISTS metrics_run_key_step ON metrics(run_id, key, step);
CREATE TABLE IF NOT EXISTS snapshots(
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  text TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', '3');
)sql";

// Millisecond ISO-8601 UTC, computed by SQLite so every writer formats it the same way.
#define MLS_NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

constexpr size_t kFlushPoints = 256;
constexpr auto kFlushInterval = std::chrono::seconds(1);

Error read_only_error(const std::string& path) {
  return make_error(path + ": opened read-only (by a command that only reads runs)");
}

Error not_a_run_db(const std::string& path, const std::string& why) {
  return make_error(path + ": not an mlstudio run database (" + why + ")");
}

// Everything here only reads, so a file we refuse is left byte-for-byte as it was.
Result<void> check_existing(Db& db) {
  const std::string& path = db.path();
  Result<Stmt> tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!tables) {
    if (db.errcode() == SQLITE_NOTADB) return not_a_run_db(path, "file is not a database");
    return tables.error();
  }
  bool has_meta = false, has_other = false;
  {
    auto scope = tables->scoped();
    for (;;) {
      Result<bool> row = tables->step();
      if (!row) {
        if (db.errcode() == SQLITE_NOTADB) return not_a_run_db(path, "file is not a database");
        return row.error();
      }
      if (!*row) break;
      std::string name = tables->column_text(0);
      // sqlite_sequence and friends are SQLite's own bookkeeping, not another program's.
      if (name == "meta") {
        has_meta = true;
      } else if (name.rfind("sqlite_", 0) != 0) {
        has_other = true;
      }
    }
  }
  if (!has_meta) {
    if (has_other) return not_a_run_db(path, "it has tables but no mlstudio meta table");
    return {};  // a new or empty database: the schema is created next
  }

  Result<Stmt> version = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!version) return version.error();
  auto scope = version->scoped();
  Result<bool> row = version->step();
  if (!row) return row.error();
  if (!*row) return not_a_run_db(path, "meta table has no schema_version");
  std::string text = version->column_text(0);
  int64_t v = version->column_int(0);
  if (v > kSchemaVersion) {
    return make_error(path + ": run database schema version " + std::to_string(v) +
                      " is newer than this mlstudio supports (" + std::to_string(kSchemaVersion) +
                      "); use a newer mlstudio to open it");
  }
  if (v < 1 || std::to_string(v) != text) {
    return not_a_run_db(path, "invalid schema_version '" + text + "'");
  }
  return {};
}

}  // namespace

// [SECTION] impl -------------------------------------------------------------------------

struct RunStore::Impl {
  struct Pending {
    int64_t run_id;
    std::string key;
    int64_t step;
    double value;
    double wall_time;
  };

  // Declared first so it is destroyed last, after the statements that use it.
  Db db;
  Stmt insert_run, insert_param, insert_metric, end_run, resume_run, drop_metrics_after,
      select_runs, select_run, select_params, select_metrics, select_metric_keys;

  std::string owner;           // this process (process_owner.h)
  bool read_only = false;      // open_read_only: only the select statements exist
  std::vector<int64_t> stale;  // runs closed at open because their process was gone
  Result<void> close_stale_runs();
  struct Sql {
    Stmt* stmt;
    const char* text;
  };
  Result<void> prepare(std::span<const Sql> statements);
  Result<void> prepare_readers();

  std::mutex mu;
  std::vector<Pending> pending;
  std::optional<int64_t> current_run;
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();
  // The first unreported write failure, and how many points were lost since then.
  std::optional<std::string> write_error;
  int64_t lost_points = 0;

  void flush_locked();
  Result<void> take_write_error();
  Error no_run(int64_t id) const {
    return make_error("no run " + std::to_string(id) + " in " + db.path());
  }
};

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
  return r;
}

#define MLS_RUN_COLUMNS                                                                         \
  "id, name, project_path, project_hash, started, ended, status, device, seed, parent_run_id, " \
  "owner"

// Schema 1 -> 2: runs gain their owner; 2 -> 3: the snapshots table (created by kSchemaSql).
// Inside the transaction that creates the schema.
Result<void> migrate(Db& db) {
  Result<Stmt> cols = db.prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'owner'");
  if (!cols) return cols.error();
  bool has_owner = false;
  {
    auto scope = cols->scoped();
    Result<bool> row = cols->step();
    if (!row) return row.error();
    has_owner = *row;
  }
  if (!has_owner)
    if (Result<void> r = db.exec("ALTER TABLE runs ADD COLUMN owner TEXT"); !r) return r;
  return db.exec(
      "UPDATE meta SET value = '3' WHERE key = 'schema_version' AND value IN ('1', '2')");
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
  if (Result<void> r = check_existing(*db); !r) return r.error();

  // WAL lets the GUI read while training writes; synchronous=NORMAL is durable across an
  // application crash (only power loss can drop the last commits) and makes each flush
  // cheap. A filesystem without WAL support keeps its journal mode: slower, still correct.
  // The switch to WAL needs the file to itself: two processes creating it at once collide
  // there, and SQLite reports that at once instead of waiting (see exec_retrying_busy).
  if (Result<void> w = db->exec_retrying_busy("PRAGMA journal_mode = WAL"); !w) return w.error();
  Result<void> r = db->exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
  if (!r) return r.error();

  {
    Result<Transaction> tx = Transaction::begin(*db);
    if (!tx) return tx.error();
    if (Result<void> s = db->exec(kSchemaSql); !s) return s.error();
    if (Result<void> m = migrate(*db); !m) return m.error();
    if (Result<void> c = tx->commit(); !c) return c.error();
  }
  // Checked again inside the file we now hold: another process may have created it first.
  if (Result<void> c = check_existing(*db); !c) return c.error();

  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  const Impl::Sql writers[] = {
      {&impl->insert_run,
       "INSERT INTO runs(name, project_path, project_hash, started, status, device, seed, "
       "parent_run_id, owner) VALUES(?1, ?2, ?3, " MLS_NOW_SQL ", 'running', ?4, ?5, ?6, ?7)"},
      {&impl->insert_param,
       "INSERT INTO params(run_id, key, value) VALUES(?1, ?2, ?3) "
       "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value"},
      {&impl->insert_metric,
       "INSERT INTO metrics(run_id, key, step, value, wall_time) VALUES(?1, ?2, ?3, ?4, ?5)"},
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
    if (Result<void> r = check_existing(*db); !r) {
      if (db->errcode() != SQLITE_CANTOPEN && db->errcode() != SQLITE_READONLY) return r.error();
      db = Db::open_read_only(path, /*immutable=*/true);
    }
  } else {
    db = Db::open_read_only(path, /*immutable=*/true);
  }
  if (!db) return db.error();
  if (Result<void> r = check_existing(*db); !r) return r.error();
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
      {&select_runs, "SELECT " MLS_RUN_COLUMNS " FROM runs ORDER BY id"},
      {&select_run, "SELECT " MLS_RUN_COLUMNS " FROM runs WHERE id = ?1"},
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

RunStore::~RunStore() {
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
  if (impl_->read_only) return read_only_error(impl_->db.path());
  std::lock_guard lock(impl_->mu);
  Stmt& st = impl_->insert_run;
  auto scope = st.scoped();
  st.bind_text(1, run.name)
      .bind_text(2, run.project_path)
      .bind_text(3, run.project_hash)
      .bind_text(4, run.device)
      .bind_int(5, static_cast<int64_t>(run.seed));
  if (run.parent_run_id) st.bind_int(6, *run.parent_run_id);
  st.bind_text(7, impl_->owner);
  if (Result<void> r = st.run(); !r) {
    if (impl_->db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return make_error("begin_run: no parent run " + std::to_string(*run.parent_run_id) + " in " +
                        impl_->db.path());
    }
    return r.error();
  }
  int64_t id = impl_->db.last_insert_rowid();
  impl_->current_run = id;
  return id;
}

Result<void> RunStore::log_param(int64_t run_id, const std::string& key, const std::string& value) {
  if (impl_->read_only) return read_only_error(impl_->db.path());
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
  if (impl_->read_only) return read_only_error(impl_->db.path());
  if (status != "finished" && status != "failed" && status != "interrupted") {
    return make_error("end_run: status '" + status +
                      "' is not one of finished, failed, interrupted");
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
  if (impl_->current_run == run_id) impl_->current_run.reset();
  return impl_->take_write_error();
}

Result<void> RunStore::resume_run(int64_t run_id, ResumePoint from) {
  if (impl_->read_only) return read_only_error(impl_->db.path());
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
  if (Result<void> r = tx->commit(); !r) return r.error();
  impl_->current_run = run_id;
  return {};
}

// [SECTION] metrics ----------------------------------------------------------------------

void RunStore::log_metric(std::string_view key, int64_t step, double value) {
  double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(impl_->mu);
  if (!impl_->current_run || impl_->read_only) {
    if (!impl_->write_error) {
      impl_->write_error = impl_->db.path() + ": log_metric(\"" + std::string(key) +
                           "\") with no current run (call begin_run first)";
    }
    ++impl_->lost_points;
    return;
  }
  impl_->pending.push_back({*impl_->current_run, std::string(key), step, value, wall});
  if (impl_->pending.size() >= kFlushPoints ||
      std::chrono::steady_clock::now() - impl_->last_flush >= kFlushInterval) {
    impl_->flush_locked();
  }
}

Result<void> RunStore::flush() {
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  return impl_->take_write_error();
}

// One transaction per batch: a commit (not a row) is what costs a disk sync.
void RunStore::Impl::flush_locked() {
  last_flush = std::chrono::steady_clock::now();
  if (pending.empty()) return;
  auto write = [&]() -> Result<void> {
    Result<Transaction> tx = Transaction::begin(db);
    if (!tx) return tx.error();
    auto scope = insert_metric.scoped();
    for (const Pending& p : pending) {
      insert_metric.bind_int(1, p.run_id).bind_text(2, p.key).bind_int(3, p.step);
      insert_metric.bind_double(4, p.value).bind_double(5, p.wall_time);
      if (Result<void> r = insert_metric.run(); !r) return r.error();
    }
    return tx->commit();
  };
  if (Result<void> r = write(); !r) {
    // Dropped rather than retried: a failure that outlives a 5 s busy timeout (disk full,
    // file removed) would otherwise grow the buffer for the rest of the run.
    if (!write_error) write_error = "writing metric points failed: " + r.error().message;
    lost_points += static_cast<int64_t>(pending.size());
  }
  pending.clear();
}

Result<void> RunStore::Impl::take_write_error() {
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
  std::vector<std::pair<std::string, std::string>> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return out;
    out.emplace_back(st.column_text(0), st.column_text(1));
  }
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

Result<void> RunStore::put_snapshot(int64_t run_id, const Snapshot& snap) {
  if (impl_->read_only) return read_only_error(impl_->db.path());
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

#undef MLS_NOW_SQL
#undef MLS_RUN_COLUMNS
