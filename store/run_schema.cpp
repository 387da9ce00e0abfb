#include "store/run_schema.h"

#include <sqlite3.h>

#include <string>

#include "store/run_store.h"
#include "store/run_summary.h"
#include "store/sqlite.h"

namespace mls::store {

namespace {

// AUTOINCREMENT so an id is never reused: ids are shown to users and referenced from outside
// (parent_run_id, notes, exported plots, sweep resumes). metrics.value is nullable because
// SQLite stores a NaN as NULL; a diverged loss must still be recorded.
std::string runs_table_sql(const char* name) {
  return std::string("CREATE TABLE IF NOT EXISTS ") + name + R"sql((
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL DEFAULT 1 REFERENCES experiments(id),
  name TEXT NOT NULL,
  project_path TEXT NOT NULL,
  project_hash TEXT NOT NULL,
  started TEXT NOT NULL,
  ended TEXT,
  status TEXT NOT NULL CHECK(status IN ('running','finished','failed','interrupted','pruned')),
  device TEXT NOT NULL,
  seed INTEGER NOT NULL,
  world_size INTEGER NOT NULL DEFAULT 1,
  parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  fork_step INTEGER,
  sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,
  trial INTEGER,
  note TEXT NOT NULL DEFAULT '',
  owner TEXT);
)sql";
}

// Everything but runs; IF NOT EXISTS throughout, so it also completes a migrated file.
constexpr const char* kTablesSql = R"sql(
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS experiments(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  created TEXT NOT NULL);
INSERT OR IGNORE INTO experiments(id, name, created)
  VALUES(1, 'Default', strftime('%Y-%m-%dT%H:%M:%fZ','now'));
CREATE TABLE IF NOT EXISTS sweeps(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  name TEXT NOT NULL,
  project_path TEXT NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('running','finished','interrupted','failed')),
  created TEXT NOT NULL,
  ended TEXT,
  owner TEXT);
CREATE INDEX IF NOT EXISTS runs_sweep ON runs(sweep_id, trial);
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent_run_id);
CREATE TABLE IF NOT EXISTS sweep_trials(
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  trial INTEGER NOT NULL,
  params TEXT NOT NULL,
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sweep_id, trial));
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
CREATE TABLE IF NOT EXISTS metric_summary(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  latest REAL,
  latest_step INTEGER NOT NULL,
  min REAL,
  max REAL,
  best REAL,
  best_step INTEGER,
  count INTEGER NOT NULL,
  PRIMARY KEY(run_id, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS metric_summary_key_best ON metric_summary(key, best);
CREATE INDEX IF NOT EXISTS metric_summary_key_latest ON metric_summary(key, latest);
CREATE TABLE IF NOT EXISTS tags(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(run_id, key));
CREATE TABLE IF NOT EXISTS artifacts(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  hash TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  step INTEGER,
  created TEXT NOT NULL,
  UNIQUE(run_id, path));
CREATE TABLE IF NOT EXISTS system_info(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run_id, key));
CREATE TABLE IF NOT EXISTS snapshots(
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  text TEXT NOT NULL);
)sql";

Error not_a_run_db(const std::string& path, const std::string& why) {
  return make_error(path + ": not an mlstudio run database (" + why + ")");
}

// A read that failed: corruption and a non-database get a sentence of their own.
Error read_failure(Db& db, const Error& e) {
  if (db.errcode() == SQLITE_NOTADB) return not_a_run_db(db.path(), "file is not a database");
  if (db.errcode() == SQLITE_CORRUPT) {
    return make_error(db.path() +
                      ": run database is corrupt (SQLite: database disk image is malformed); "
                      "its runs cannot be read. Restore a backup, or try sqlite3's .recover");
  }
  return e;
}

Result<bool> has_row(Db& db, const std::string& sql) {
  Result<Stmt> st = db.prepare(sql);
  if (!st) return st.error();
  auto scope = st->scoped();
  Result<bool> row = st->step();
  if (!row) return row.error();
  return *row;
}

Result<int64_t> query_int(Db& db, const std::string& sql, int64_t none) {
  Result<Stmt> st = db.prepare(sql);
  if (!st) return st.error();
  auto scope = st->scoped();
  Result<bool> row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_is_null(0)) return none;
  return st->column_int(0);
}

// Versions 1-3 -> 4. runs gains columns with references and a wider CHECK, which ALTER TABLE
// cannot do: it is rebuilt (https://sqlite.org/lang_altertable.html, "making other kinds of
// table schema changes"), foreign keys being off so dropping the old table cascades nothing.
Result<void> migrate_runs(Db& db) {
  // The highest id ever given, which may exceed the largest id left (deleted runs at the end).
  Result<int64_t> seq = query_int(db, "SELECT seq FROM sqlite_sequence WHERE name = 'runs'", 0);
  if (!seq) return seq.error();
  Result<bool> has_owner =
      has_row(db, "SELECT 1 FROM pragma_table_info('runs') WHERE name = 'owner'");
  if (!has_owner) return has_owner.error();
  std::string copy =
      "INSERT INTO runs_v4(id, experiment_id, name, project_path, project_hash, started, ended, "
      "status, device, seed, world_size, parent_run_id, owner) "
      "SELECT id, 1, name, project_path, project_hash, started, ended, status, device, seed, 1, "
      "parent_run_id, " +
      std::string(*has_owner ? "owner" : "NULL") + " FROM runs";
  for (const std::string& sql : {runs_table_sql("runs_v4"), copy, std::string("DROP TABLE runs"),
                                 std::string("ALTER TABLE runs_v4 RENAME TO runs"),
                                 "UPDATE sqlite_sequence SET seq = max(seq, " +
                                     std::to_string(*seq) + ") WHERE name = 'runs'"}) {
    if (Result<void> r = db.exec(sql); !r) return r;
  }
  return {};
}

Result<void> check_foreign_keys(Db& db) {
  Result<Stmt> st = db.prepare("PRAGMA foreign_key_check");
  if (!st) return st.error();
  auto scope = st->scoped();
  Result<bool> row = st->step();
  if (!row) return row.error();
  if (!*row) return {};
  return make_error(db.path() + ": upgrading the run database found a row of table '" +
                    st->column_text(0) + "' (rowid " + st->column_text(1) +
                    ") that refers to a missing row of '" + st->column_text(2) +
                    "'; the file was left unchanged");
}

}  // namespace

Result<int64_t> check_run_db(Db& db) {
  const std::string& path = db.path();
  Result<Stmt> tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!tables) return read_failure(db, tables.error());
  bool has_meta = false, has_other = false;
  {
    auto scope = tables->scoped();
    for (;;) {
      Result<bool> row = tables->step();
      if (!row) return read_failure(db, row.error());
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
  {
    // mlstudio's schema has no trigger and no view. A file from elsewhere with one would have
    // SQLite run it on mlstudio's writes (a trigger) or reads (a view in a table's place).
    Result<Stmt> extra = db.prepare(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') LIMIT 1");
    if (!extra) return read_failure(db, extra.error());
    auto scope = extra->scoped();
    Result<bool> row = extra->step();
    if (!row) return read_failure(db, row.error());
    if (*row)
      return not_a_run_db(path, "it has a " + extra->column_text(0) + " '" + extra->column_text(1) +
                                    "' that mlstudio's schema has not (it would run on each "
                                    "read or write); the file was not used");
  }
  if (!has_meta) {
    if (has_other) return not_a_run_db(path, "it has tables but no mlstudio meta table");
    return int64_t{0};  // a new or empty database: the schema is created next
  }

  Result<Stmt> version = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!version) return read_failure(db, version.error());
  auto scope = version->scoped();
  Result<bool> row = version->step();
  if (!row) return read_failure(db, row.error());
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
  return v;
}

Result<void> create_or_migrate(Db& db) {
  // Read again under the write lock: another process may have created or upgraded it.
  Result<int64_t> v = check_run_db(db);
  if (!v) return v.error();
  if (*v == kSchemaVersion) return {};
  if (*v > 0) {
    if (Result<void> r = migrate_runs(db); !r) return r;
  } else if (Result<void> r = db.exec(runs_table_sql("runs")); !r) {
    return r;
  }
  if (Result<void> r = db.exec(kTablesSql); !r) return r;
  if (*v > 0) {
    if (Result<void> r = recompute_summaries(db, std::nullopt); !r) return r;
  }
  std::string version = std::to_string(kSchemaVersion);
  if (Result<void> r = db.exec("INSERT INTO meta(key, value) VALUES('schema_version', '" + version +
                               "') ON CONFLICT(key) DO UPDATE SET value = excluded.value");
      !r) {
    return r;
  }
  return check_foreign_keys(db);
}

}  // namespace mls::store
