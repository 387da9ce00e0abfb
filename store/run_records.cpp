// RunStore: what is recorded beside a run's points: tags, its note, system info, the
// experiments, artifacts (files with their hash and size), copies of a parent's curve for a
// fork, and deleting a run.
#include <sqlite3.h>

#include <filesystem>
#include <system_error>

#include "engine/train/data_source.h"
#include "store/file_hash.h"
#include "store/process_owner.h"
#include "store/run_store.h"
#include "store/run_store_impl.h"
#include "store/run_summary.h"

namespace mls::store {

namespace fs = std::filesystem;

Result<std::vector<std::pair<std::string, std::string>>> read_pairs(Stmt& st) {
  std::vector<std::pair<std::string, std::string>> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return out;
    out.emplace_back(st.column_text(0), st.column_text(1));
  }
}

Result<int64_t> RunStore::Impl::experiment_id(const std::string& name) {
  if (name.empty() || name == "Default") return int64_t{1};
  Result<Stmt> ins =
      db.prepare("INSERT OR IGNORE INTO experiments(name, created) VALUES(?1, " MLS_NOW_SQL ")");
  if (!ins) return ins.error();
  {
    auto scope = ins->scoped();
    ins->bind_text(1, name);
    if (Result<void> r = ins->run(); !r) return r.error();
  }
  Result<Stmt> sel = db.prepare("SELECT id FROM experiments WHERE name = ?1");
  if (!sel) return sel.error();
  auto scope = sel->scoped();
  sel->bind_text(1, name);
  Result<bool> row = sel->step();
  if (!row) return row.error();
  MLS_CHECK(*row, "experiment inserted but not found");
  return sel->column_int(0);
}

Error RunStore::Impl::run_write_error(const std::string& what, int64_t run_id,
                                      const Error& e) const {
  if (db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY)
    return make_error(what + ": " + no_run(run_id).message);
  return e;
}

Result<void> RunStore::Impl::run_write(Stmt& st, const std::string& what, int64_t run_id,
                                       bool must_change) {
  if (Result<void> r = st.run(); !r) return run_write_error(what, run_id, r.error());
  if (must_change && db.changes() == 0) return make_error(what + ": " + no_run(run_id).message);
  return {};
}

// [SECTION] tags, note, system info, experiments ------------------------------------------

Result<void> RunStore::set_tag(int64_t run_id, const std::string& key, const std::string& value) {
  if (impl_->read_only) return impl_->read_only_error();
  if (key.empty()) return make_error("set_tag: a tag needs a name");
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "INSERT INTO tags(run_id, key, value) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, key).bind_text(3, value);
  return impl_->run_write(*st, "set_tag(\"" + key + "\")", run_id, false);
}

Result<bool> RunStore::remove_tag(int64_t run_id, const std::string& key) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare("DELETE FROM tags WHERE run_id = ?1 AND key = ?2");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, key);
  if (Result<void> r = st->run(); !r) return r.error();
  return impl_->db.changes() > 0;
}

Result<std::vector<std::pair<std::string, std::string>>> RunStore::tags(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare("SELECT key, value FROM tags WHERE run_id = ?1 ORDER BY key");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id);
  return read_pairs(*st);
}

Result<void> RunStore::set_note(int64_t run_id, const std::string& text) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare("UPDATE runs SET note = ?2 WHERE id = ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, text);
  return impl_->run_write(*st, "set_note", run_id, true);
}

Result<void> RunStore::set_system_info(
    int64_t run_id, const std::vector<std::pair<std::string, std::string>>& pairs) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Result<Transaction> tx = Transaction::begin(impl_->db);
  if (!tx) return tx.error();
  Result<Stmt> st = impl_->db.prepare(
      "INSERT INTO system_info(run_id, key, value) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value");
  if (!st) return st.error();
  for (const auto& [key, value] : pairs) {
    auto scope = st->scoped();
    st->bind_int(1, run_id).bind_text(2, key).bind_text(3, value);
    if (Result<void> r = impl_->run_write(*st, "set_system_info", run_id, false); !r) return r;
  }
  return tx->commit();
}

Result<std::vector<std::pair<std::string, std::string>>> RunStore::system_info(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st =
      impl_->db.prepare("SELECT key, value FROM system_info WHERE run_id = ?1 ORDER BY key");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id);
  return read_pairs(*st);
}

Result<std::vector<ExperimentInfo>> RunStore::list_experiments() {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "SELECT e.id, e.name, e.created, (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id) "
      "FROM experiments e ORDER BY e.id");
  if (!st) return st.error();
  auto scope = st->scoped();
  std::vector<ExperimentInfo> out;
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back({st->column_int(0), st->column_text(1), st->column_text(2), st->column_int(3)});
  }
}

// [SECTION] artifacts ----------------------------------------------------------------------

std::string RunStore::resolve_path(const std::string& path) const {
  fs::path p(path);
  if (p.is_relative()) {
    std::error_code ec;
    fs::path db = fs::absolute(impl_->db.path(), ec);
    p = db.parent_path() / p;
  }
  return p.lexically_normal().string();
}

Result<int64_t> RunStore::add_artifact(int64_t run_id, const std::string& kind,
                                       const std::string& path, std::optional<int64_t> step) {
  if (impl_->read_only) return impl_->read_only_error();
  if (kind != "checkpoint" && kind != "onnx" && kind != "trace" && kind != "notebook" &&
      kind != "other") {
    return make_error("add_artifact: kind '" + kind +
                      "' is not one of checkpoint, onnx, trace, notebook, other");
  }
  // Read before the lock: hashing a large file must not hold up log_metric.
  const std::string file = resolve_path(path);
  Result<std::string> hash = file_hash_hex(file);
  if (!hash) return make_error("add_artifact: " + hash.error().message);
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(file, ec);
  if (ec)
    return make_error("add_artifact: " + file + ": cannot read its size (" + ec.message() + ")");

  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "INSERT INTO artifacts(run_id, kind, path, hash, bytes, step, created) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, " MLS_NOW_SQL
      ") ON CONFLICT(run_id, path) DO UPDATE SET kind = excluded.kind, hash = excluded.hash, "
      "bytes = excluded.bytes, step = excluded.step, created = excluded.created "
      "RETURNING id");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, kind).bind_text(3, path).bind_text(4, *hash);
  st->bind_int(5, static_cast<int64_t>(bytes));
  if (step) st->bind_int(6, *step);
  Result<bool> row = st->step();
  if (!row) return impl_->run_write_error("add_artifact", run_id, row.error());
  MLS_CHECK(*row, "RETURNING gave no row");
  int64_t id = st->column_int(0);
  if (Result<void> r = st->run(); !r) return r.error();  // completes the statement
  return id;
}

Result<std::vector<ArtifactInfo>> RunStore::artifacts(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "SELECT id, run_id, kind, path, hash, bytes, step, created FROM artifacts "
      "WHERE run_id = ?1 ORDER BY id");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id);
  std::vector<ArtifactInfo> out;
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    ArtifactInfo a;
    a.id = st->column_int(0);
    a.run_id = st->column_int(1);
    a.kind = st->column_text(2);
    a.path = st->column_text(3);
    a.hash = st->column_text(4);
    a.bytes = st->column_int(5);
    if (!st->column_is_null(6)) a.step = st->column_int(6);
    a.created = st->column_text(7);
    out.push_back(std::move(a));
  }
}

Result<bool> RunStore::artifact_shared(const std::string& path, int64_t except_run) {
  const std::string target = resolve_path(path);
  std::lock_guard lock(impl_->mu);
  // Paths are kept as given, so one file may be listed as "a/b.ckpt" and "/abs/a/b.ckpt":
  // compare them resolved. Only at deletion, so a scan of the table is fine.
  Result<Stmt> st = impl_->db.prepare("SELECT path FROM artifacts WHERE run_id != ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, except_run);
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return false;
    if (resolve_path(st->column_text(0)) == target) return true;
  }
}

// [SECTION] copies and deletion ------------------------------------------------------------

Result<void> RunStore::copy_metrics(int64_t from_run, int64_t to_run, int64_t up_to_step,
                                    int64_t up_to_epoch) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  Db& db = impl_->db;
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  {
    Stmt& st = impl_->select_run;
    auto scope = st.scoped();
    st.bind_int(1, from_run);
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return make_error("copy_metrics: " + impl_->no_run(from_run).message);
  }
  std::vector<std::string> keys;
  {
    Stmt& st = impl_->select_metric_keys;
    auto scope = st.scoped();
    st.bind_int(1, from_run);
    for (;;) {
      Result<bool> row = st.step();
      if (!row) return row.error();
      if (!*row) break;
      keys.push_back(st.column_text(0));
    }
  }
  Result<Stmt> copy = db.prepare(
      "INSERT INTO metrics(run_id, key, step, value, wall_time) "
      "SELECT ?1, key, step, value, wall_time FROM metrics "
      "WHERE run_id = ?2 AND key = ?3 AND step <= ?4 ORDER BY step, rowid");
  if (!copy) return copy.error();
  for (const std::string& key : keys) {
    auto scope = copy->scoped();
    copy->bind_int(1, to_run).bind_int(2, from_run).bind_text(3, key);
    copy->bind_int(4, metric_per_epoch(key) ? up_to_epoch : up_to_step);
    if (Result<void> r = impl_->run_write(*copy, "copy_metrics", to_run, false); !r) return r;
  }
  if (Result<void> r = recompute_summaries(db, to_run); !r) return r;
  return tx->commit();
}

Result<std::vector<std::string>> RunStore::delete_run(int64_t run_id) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  impl_->flush_locked();
  Db& db = impl_->db;
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  {
    Result<Stmt> st = db.prepare("SELECT status, owner FROM runs WHERE id = ?1");
    if (!st) return st.error();
    auto scope = st->scoped();
    st->bind_int(1, run_id);
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return make_error("delete_run: " + impl_->no_run(run_id).message);
    std::string owner = st->column_text(1);
    if (st->column_text(0) == "running" && !owner.empty() && !owner_gone(owner)) {
      return make_error("delete_run: run " + std::to_string(run_id) + " in " + db.path() +
                        " is still training (process " + owner + "); stop it first");
    }
  }
  std::vector<std::string> paths;
  {
    Result<Stmt> st = db.prepare("SELECT path FROM artifacts WHERE run_id = ?1 ORDER BY id");
    if (!st) return st.error();
    auto scope = st->scoped();
    st->bind_int(1, run_id);
    for (;;) {
      Result<bool> row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      paths.push_back(st->column_text(0));
    }
  }
  // Foreign keys do the rest: params, metrics, summaries, tags, artifacts, system info and
  // the snapshot cascade; children and sweep trials forget the run.
  Result<Stmt> del = db.prepare("DELETE FROM runs WHERE id = ?1");
  if (!del) return del.error();
  {
    auto scope = del->scoped();
    del->bind_int(1, run_id);
    if (Result<void> r = del->run(); !r) return r.error();
  }
  if (Result<void> r = tx->commit(); !r) return r.error();
  impl_->forget_current_run(run_id);
  return paths;
}

}  // namespace mls::store
