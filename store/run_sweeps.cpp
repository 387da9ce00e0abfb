// RunStore: sweeps and their trials. A sweep is a row with the spec `sweep --resume` needs;
// each trial a row with its params and its latest attempt (a run that begin_run links).
#include <sqlite3.h>

#include "store/process_owner.h"
#include "store/run_store.h"
#include "store/run_store_impl.h"

namespace mls::store {

namespace {

#define MLS_SWEEP_SELECT                                                                \
  "SELECT s.id, e.name, s.name, s.project_path, s.spec, s.status, s.created, s.ended, " \
  "s.owner FROM sweeps s LEFT JOIN experiments e ON e.id = s.experiment_id "

SweepInfo read_sweep(const Stmt& st) {
  SweepInfo s;
  s.id = st.column_int(0);
  s.experiment = st.column_text(1);
  s.name = st.column_text(2);
  s.project_path = st.column_text(3);
  s.spec_json = st.column_text(4);
  s.status = st.column_text(5);
  s.created = st.column_text(6);
  s.ended = st.column_text(7);
  s.owner = st.column_text(8);
  // What a writer's open() would record: a reader (runs list, the GUI) sees it at once.
  if (s.status == "running" && !s.owner.empty() && owner_gone(s.owner)) s.status = "interrupted";
  return s;
}

Error no_sweep(const Db& db, int64_t id) {
  return make_error("no sweep " + std::to_string(id) + " in " + db.path());
}

}  // namespace

// The sweeps a process that is gone left 'running' (killed with its workers) become
// 'interrupted', as runs do: `sweep --resume` continues them.
Result<void> RunStore::Impl::close_stale_sweeps() {
  std::vector<std::pair<int64_t, std::string>> gone;
  {
    Result<Stmt> st =
        db.prepare("SELECT id, owner FROM sweeps WHERE status = 'running' AND owner IS NOT NULL");
    if (!st) return st.error();
    auto scope = st->scoped();
    for (;;) {
      Result<bool> row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      if (owner_gone(st->column_text(1))) gone.emplace_back(st->column_int(0), st->column_text(1));
    }
  }
  Result<Stmt> up = db.prepare("UPDATE sweeps SET status = 'interrupted', ended = " MLS_NOW_SQL
                               " WHERE id = ?1 AND status = 'running' AND owner = ?2");
  if (!up) return up.error();
  for (const auto& [id, owner] : gone) {
    auto scope = up->scoped();
    up->bind_int(1, id).bind_text(2, owner);
    if (Result<void> r = up->run(); !r) return r.error();
  }
  return {};
}

Result<int64_t> RunStore::create_sweep(const NewSweep& sweep) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Db& db = impl_->db;
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  Result<int64_t> experiment = impl_->experiment_id(sweep.experiment);
  if (!experiment) return experiment.error();
  Result<Stmt> st = db.prepare(
      "INSERT INTO sweeps(experiment_id, name, project_path, spec, status, created, owner) "
      "VALUES(?1, ?2, ?3, ?4, 'running', " MLS_NOW_SQL ", ?5)");
  if (!st) return st.error();
  {
    auto scope = st->scoped();
    st->bind_int(1, *experiment).bind_text(2, sweep.name).bind_text(3, sweep.project_path);
    st->bind_text(4, sweep.spec_json).bind_text(5, impl_->owner);
    if (Result<void> r = st->run(); !r) return r.error();
  }
  int64_t id = db.last_insert_rowid();
  if (Result<void> r = tx->commit(); !r) return r.error();
  return id;
}

Result<SweepInfo> RunStore::get_sweep(int64_t id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(MLS_SWEEP_SELECT "WHERE s.id = ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, id);
  Result<bool> row = st->step();
  if (!row) return row.error();
  if (!*row) return no_sweep(impl_->db, id);
  return read_sweep(*st);
}

Result<std::vector<SweepInfo>> RunStore::list_sweeps() {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(MLS_SWEEP_SELECT "ORDER BY s.id");
  if (!st) return st.error();
  auto scope = st->scoped();
  std::vector<SweepInfo> out;
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(read_sweep(*st));
  }
}

namespace {

// One UPDATE of a sweep row; "no sweep N" when there is none.
Result<void> update_sweep(Db& db, const char* sql, int64_t id, const std::string& text) {
  Result<Stmt> st = db.prepare(sql);
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, id).bind_text(2, text);
  if (Result<void> r = st->run(); !r) return r.error();
  if (db.changes() == 0) return no_sweep(db, id);
  return {};
}

}  // namespace

Result<void> RunStore::end_sweep(int64_t id, const std::string& status) {
  if (impl_->read_only) return impl_->read_only_error();
  if (status != "finished" && status != "interrupted" && status != "failed") {
    return make_error("end_sweep: status '" + status +
                      "' is not one of finished, interrupted, failed");
  }
  std::lock_guard lock(impl_->mu);
  return update_sweep(impl_->db,
                      "UPDATE sweeps SET status = ?2, ended = " MLS_NOW_SQL " WHERE id = ?1", id,
                      status);
}

Result<void> RunStore::reopen_sweep(int64_t id) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  return update_sweep(impl_->db,
                      "UPDATE sweeps SET status = 'running', ended = NULL, owner = ?2 "
                      "WHERE id = ?1",
                      id, impl_->owner);
}

Result<void> RunStore::set_sweep_owner(int64_t id) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  return update_sweep(impl_->db, "UPDATE sweeps SET owner = ?2 WHERE id = ?1", id, impl_->owner);
}

Result<void> RunStore::add_trial(int64_t sweep_id, int64_t trial, const std::string& params_json) {
  if (impl_->read_only) return impl_->read_only_error();
  std::lock_guard lock(impl_->mu);
  Db& db = impl_->db;
  Result<Stmt> st =
      db.prepare("INSERT INTO sweep_trials(sweep_id, trial, params) VALUES(?1, ?2, ?3)");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, sweep_id).bind_int(2, trial).bind_text(3, params_json);
  if (Result<void> r = st->run(); !r) {
    if (db.extended_errcode() == SQLITE_CONSTRAINT_FOREIGNKEY)
      return make_error("add_trial: " + no_sweep(db, sweep_id).message);
    if (db.extended_errcode() == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return make_error("add_trial: sweep " + std::to_string(sweep_id) + " in " + db.path() +
                        " already has trial " + std::to_string(trial));
    }
    return r.error();
  }
  return {};
}

Result<std::vector<TrialInfo>> RunStore::trials(int64_t sweep_id) {
  std::lock_guard lock(impl_->mu);
  Result<Stmt> st = impl_->db.prepare(
      "SELECT t.trial, t.params, t.run_id, t.attempts, r.status FROM sweep_trials t "
      "LEFT JOIN runs r ON r.id = t.run_id WHERE t.sweep_id = ?1 ORDER BY t.trial");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, sweep_id);
  std::vector<TrialInfo> out;
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    TrialInfo t;
    t.trial = st->column_int(0);
    t.params_json = st->column_text(1);
    if (!st->column_is_null(2)) t.run_id = st->column_int(2);
    t.attempts = st->column_int(3);
    t.run_status = st->column_text(4);
    out.push_back(std::move(t));
  }
}

}  // namespace mls::store

#undef MLS_SWEEP_SELECT
