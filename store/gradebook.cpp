// [SECTION] index
//   schema      the SQL, and what a file must be before anything is written to it
//   open        validate, configure, create
//   writes      begin_grading / record / finish
//   reads       gradings / goals / submissions / pass_rates / best_per_student
#include "store/gradebook.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "store/sqlite.h"

namespace mls::store {

int GradedSubmission::passed() const {
  return static_cast<int>(
      std::count_if(goals.begin(), goals.end(), [](const GoalResult& g) { return g.passed; }));
}

// [SECTION] schema -----------------------------------------------------------------------

namespace {

// AUTOINCREMENT so a grading's id is never reused: a teacher quotes it (--grading 7).
// Every child row goes with its parent (ON DELETE CASCADE), so deleting a grading by hand
// in the sqlite3 shell leaves nothing behind. `ord` keeps the order the grader gave.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE gradings(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  lab_path TEXT NOT NULL,
  lab_hash TEXT NOT NULL,
  lab_title TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  wall_seconds REAL NOT NULL DEFAULT 0);
CREATE INDEX gradings_lab ON gradings(lab_hash);
CREATE TABLE goals(
  grading INTEGER NOT NULL REFERENCES gradings(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  id TEXT NOT NULL,
  text TEXT NOT NULL,
  hidden INTEGER NOT NULL,
  PRIMARY KEY(grading, ord),
  UNIQUE(grading, id));
CREATE TABLE submissions(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  grading INTEGER NOT NULL REFERENCES gradings(id) ON DELETE CASCADE,
  student TEXT NOT NULL,
  path TEXT NOT NULL,
  file_hash TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status <> ''),
  detail TEXT NOT NULL,
  seconds REAL NOT NULL,
  recorded_at TEXT NOT NULL);
CREATE INDEX submissions_grading ON submissions(grading, id);
CREATE TABLE tampered(
  submission INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  what TEXT NOT NULL,
  PRIMARY KEY(submission, ord));
CREATE TABLE goal_results(
  submission INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  goal_id TEXT NOT NULL,
  passed INTEGER NOT NULL,
  message TEXT NOT NULL,
  PRIMARY KEY(submission, ord),
  UNIQUE(submission, goal_id));
)sql";

// Millisecond ISO-8601 UTC, computed by SQLite so every writer formats it the same way.
#define MLS_NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

Error not_a_gradebook(const std::string& path, const std::string& why) {
  return make_error(path + ": not an mlstudio gradebook (" + why + ")");
}

// Calls fn(st) for each row of a statement whose parameters are bound (a Stmt::Scope made
// here would clear them). step() resets it when done or failed.
template <typename Fn>
Result<void> each_row(Stmt& st, Fn&& fn) {
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.error();
    if (!*row) return {};
    fn(st);
  }
}

Result<int64_t> pragma_int(Db& db, const char* name) {
  Result<Stmt> st = db.prepare(std::string("PRAGMA ") + name);
  if (!st) return st.error();
  auto scope = st->scoped();
  Result<bool> row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int(0) : 0;
}

// What the file is, read without writing a byte, so a file we refuse is left as it was.
// true: an empty or new database that the schema may be created in; false: a gradebook.
Result<bool> check_existing(Db& db) {
  const std::string& path = db.path();
  Result<int64_t> app = pragma_int(db, "application_id");
  if (!app) {
    if (db.errcode() == SQLITE_NOTADB) return not_a_gradebook(path, "file is not a database");
    return app.error();
  }
  if (*app == kGradebookApplicationId) {
    Result<int64_t> v = pragma_int(db, "user_version");
    if (!v) return v.error();
    if (*v > kGradebookVersion)
      return make_error(path + ": gradebook layout version " + std::to_string(*v) +
                        " is newer than this mlstudio supports (" +
                        std::to_string(kGradebookVersion) + "); use a newer mlstudio to open it");
    if (*v < 1) return not_a_gradebook(path, "its layout version is " + std::to_string(*v));
    return false;
  }
  if (*app != 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08llX", static_cast<unsigned long long>(*app) & 0xFFFFFFFF);
    return not_a_gradebook(path, std::string("another program's database: application id ") + hex);
  }
  Result<Stmt> tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!tables) return tables.error();
  std::set<std::string> names;
  Result<void> r = each_row(*tables, [&](Stmt& st) {
    std::string name = st.column_text(0);
    if (name.rfind("sqlite_", 0) != 0) names.insert(name);  // SQLite's own bookkeeping
  });
  if (!r) return r.error();
  if (names.empty()) return true;
  if (names.count("runs") && names.count("meta"))
    return not_a_gradebook(path, "it is an mlstudio run database");
  return not_a_gradebook(path,
                         "it holds another program's tables, such as '" + *names.begin() + "'");
}

}  // namespace

struct Gradebook::Impl {
  Db db;
  bool read_only = false;

  Error no_grading(int64_t id) const {
    return make_error("no grading " + std::to_string(id) + " in " + db.path());
  }
  Result<void> writable() const {
    if (!read_only) return {};
    return make_error(db.path() + ": gradebook opened read-only (by a command that only reads)");
  }
  Result<GradedSubmission> load_submission(int64_t id);
};

// [SECTION] open -------------------------------------------------------------------------

Gradebook::Gradebook(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gradebook::Gradebook(Gradebook&&) noexcept = default;
Gradebook& Gradebook::operator=(Gradebook&&) noexcept = default;
Gradebook::~Gradebook() = default;

const std::string& Gradebook::path() const {
  return impl_->db.path();
}

Result<Gradebook> Gradebook::open(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return make_error(path + ": cannot create gradebook: directory " + parent.string() +
                      " does not exist");
  Result<Db> db = Db::open(path);
  if (!db) return db.error();
  if (db->read_only())
    return make_error(path + ": gradebook is read-only (grading needs write access)");
  if (Result<bool> c = check_existing(*db); !c) return c.error();

  // WAL lets `mlstudio gradebook` read while a grading writes. The switch needs the file to
  // itself, hence the retries (sqlite.h: exec_retrying_busy).
  if (Result<void> w = db->exec_retrying_busy("PRAGMA journal_mode = WAL"); !w) return w.error();
  if (Result<void> r = db->exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"); !r)
    return r.error();
  {
    Result<Transaction> tx = Transaction::begin(*db);
    if (!tx) return tx.error();
    // Again under the write lock: another process may have created it meanwhile.
    Result<bool> fresh = check_existing(*db);
    if (!fresh) return fresh.error();
    if (*fresh) {
      if (Result<void> s = db->exec(kSchemaSql); !s) return s.error();
      const std::string marks =
          "PRAGMA application_id = " + std::to_string(kGradebookApplicationId) +
          "; PRAGMA user_version = " + std::to_string(kGradebookVersion);
      if (Result<void> s = db->exec(marks); !s) return s.error();
    }
    // Layout migrations (user_version N -> N+1) go here, inside this transaction.
    if (Result<void> c = tx->commit(); !c) return c.error();
  }
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  return Gradebook(std::move(impl));
}

Result<Gradebook> Gradebook::open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return make_error(path + ": no gradebook here (`mlstudio grade LAB.mls ... --gradebook " +
                      path + "` writes one)");
  // mode=ro reads a WAL database whose folder is writable; immutable=1 one whose folder is
  // not (no -shm file can be made there, so no writer can be there either).
  Result<Db> db = Db::open_read_only(path, /*immutable=*/false);
  Result<bool> c = db ? check_existing(*db) : Result<bool>(db.error());
  if (!c && db && db->errcode() != SQLITE_CANTOPEN && db->errcode() != SQLITE_READONLY)
    return c.error();
  if (!c) {
    db = Db::open_read_only(path, /*immutable=*/true);
    if (!db) return db.error();
    c = check_existing(*db);
    if (!c) return c.error();
  }
  if (*c) return not_a_gradebook(path, "it is an empty database");
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  impl->read_only = true;
  return Gradebook(std::move(impl));
}

// [SECTION] writes -----------------------------------------------------------------------

Result<int64_t> Gradebook::begin_grading(const std::string& lab_path, const std::string& lab_hash,
                                         const std::string& lab_title,
                                         const std::vector<GoalDef>& goals) {
  if (Result<void> w = impl_->writable(); !w) return w.error();
  std::set<std::string> seen;
  for (const GoalDef& g : goals) {
    if (g.id.empty()) return make_error(lab_path + ": a goal has no id");
    if (!seen.insert(g.id).second) return make_error(lab_path + ": goal '" + g.id + "' twice");
  }
  Db& db = impl_->db;
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  Result<Stmt> ins = db.prepare(
      "INSERT INTO gradings(lab_path, lab_hash, lab_title, started_at) "
      "VALUES(?1, ?2, ?3, " MLS_NOW_SQL ")");
  if (!ins) return ins.error();
  {
    auto scope = ins->scoped();
    ins->bind_text(1, lab_path).bind_text(2, lab_hash).bind_text(3, lab_title);
    if (Result<void> r = ins->run(); !r) return r.error();
  }
  const int64_t id = db.last_insert_rowid();
  Result<Stmt> goal =
      db.prepare("INSERT INTO goals(grading, ord, id, text, hidden) VALUES(?1, ?2, ?3, ?4, ?5)");
  if (!goal) return goal.error();
  for (size_t i = 0; i < goals.size(); ++i) {
    auto scope = goal->scoped();
    goal->bind_int(1, id)
        .bind_int(2, static_cast<int64_t>(i))
        .bind_text(3, goals[i].id)
        .bind_text(4, goals[i].text)
        .bind_int(5, goals[i].hidden ? 1 : 0);
    if (Result<void> r = goal->run(); !r) return r.error();
  }
  if (Result<void> c = tx->commit(); !c) return c.error();
  return id;
}

Result<void> Gradebook::record(int64_t grading, const GradedSubmission& s) {
  if (Result<void> w = impl_->writable(); !w) return w.error();
  const std::string who = "submission '" + s.student + "' (" + s.path + ")";
  if (s.status.empty()) return make_error(who + ": no status to record");
  Result<std::vector<GoalDef>> defs = goals(grading);
  if (!defs) return defs.error();
  std::set<std::string> known, seen;
  for (const GoalDef& g : *defs) known.insert(g.id);
  for (const GoalResult& r : s.goals) {
    if (!known.count(r.goal_id))
      return make_error(who + ": goal '" + r.goal_id + "' is not a goal of grading " +
                        std::to_string(grading) + " in " + path());
    if (!seen.insert(r.goal_id).second)
      return make_error(who + ": goal '" + r.goal_id + "' has two results");
  }

  Db& db = impl_->db;
  Result<Transaction> tx = Transaction::begin(db);
  if (!tx) return tx.error();
  Result<Stmt> ins = db.prepare(
      "INSERT INTO submissions(grading, student, path, file_hash, status, detail, seconds, "
      "recorded_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, " MLS_NOW_SQL ")");
  if (!ins) return ins.error();
  {
    auto scope = ins->scoped();
    ins->bind_int(1, grading)
        .bind_text(2, s.student)
        .bind_text(3, s.path)
        .bind_text(4, s.file_hash)
        .bind_text(5, s.status)
        .bind_text(6, s.detail)
        .bind_double(7, s.seconds);
    if (Result<void> r = ins->run(); !r) return r.error();
  }
  const int64_t sub = db.last_insert_rowid();
  Result<Stmt> tam = db.prepare("INSERT INTO tampered(submission, ord, what) VALUES(?1, ?2, ?3)");
  if (!tam) return tam.error();
  for (size_t i = 0; i < s.tampered.size(); ++i) {
    auto scope = tam->scoped();
    tam->bind_int(1, sub).bind_int(2, static_cast<int64_t>(i)).bind_text(3, s.tampered[i]);
    if (Result<void> r = tam->run(); !r) return r.error();
  }
  Result<Stmt> res = db.prepare(
      "INSERT INTO goal_results(submission, ord, goal_id, passed, message) "
      "VALUES(?1, ?2, ?3, ?4, ?5)");
  if (!res) return res.error();
  for (size_t i = 0; i < s.goals.size(); ++i) {
    const GoalResult& g = s.goals[i];
    auto scope = res->scoped();
    res->bind_int(1, sub)
        .bind_int(2, static_cast<int64_t>(i))
        .bind_text(3, g.goal_id)
        .bind_int(4, g.passed ? 1 : 0)
        .bind_text(5, g.message);
    if (Result<void> r = res->run(); !r) return r.error();
  }
  return tx->commit();
}

Result<void> Gradebook::finish(int64_t grading, double wall_seconds) {
  if (Result<void> w = impl_->writable(); !w) return w.error();
  Result<Stmt> st = impl_->db.prepare(
      "UPDATE gradings SET wall_seconds = ?2, finished_at = " MLS_NOW_SQL " WHERE id = ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, grading).bind_double(2, wall_seconds);
  if (Result<void> r = st->run(); !r) return r.error();
  if (impl_->db.changes() == 0) return impl_->no_grading(grading);
  return {};
}

// [SECTION] reads ------------------------------------------------------------------------

namespace {

#define MLS_GRADING_COLUMNS                                                   \
  "g.id, g.lab_path, g.lab_hash, g.lab_title, g.started_at, g.wall_seconds, " \
  "(SELECT count(*) FROM submissions s WHERE s.grading = g.id)"

Grading read_grading(const Stmt& st) {
  Grading g;
  g.id = st.column_int(0);
  g.lab_path = st.column_text(1);
  g.lab_hash = st.column_text(2);
  g.lab_title = st.column_text(3);
  g.started_at = st.column_text(4);
  g.wall_seconds = st.column_double(5);
  g.submissions = static_cast<int>(st.column_int(6));
  return g;
}

}  // namespace

Result<std::vector<Grading>> Gradebook::gradings() const {
  Result<Stmt> st =
      impl_->db.prepare("SELECT " MLS_GRADING_COLUMNS " FROM gradings g ORDER BY g.id DESC");
  if (!st) return st.error();
  std::vector<Grading> out;
  if (Result<void> r = each_row(*st, [&](Stmt& s) { out.push_back(read_grading(s)); }); !r)
    return r.error();
  return out;
}

Result<Grading> Gradebook::grading(int64_t id) const {
  Result<Stmt> st =
      impl_->db.prepare("SELECT " MLS_GRADING_COLUMNS " FROM gradings g WHERE g.id = ?1");
  if (!st) return st.error();
  st->bind_int(1, id);
  std::vector<Grading> out;
  if (Result<void> r = each_row(*st, [&](Stmt& s) { out.push_back(read_grading(s)); }); !r)
    return r.error();
  if (out.empty()) return impl_->no_grading(id);
  return out.front();
}

Result<std::vector<GoalDef>> Gradebook::goals(int64_t grading_id) const {
  if (Result<Grading> g = grading(grading_id); !g) return g.error();
  Result<Stmt> st =
      impl_->db.prepare("SELECT id, text, hidden FROM goals WHERE grading = ?1 ORDER BY ord");
  if (!st) return st.error();
  st->bind_int(1, grading_id);
  std::vector<GoalDef> out;
  Result<void> r = each_row(*st, [&](Stmt& s) {
    out.push_back({s.column_text(0), s.column_text(1), s.column_int(2) != 0});
  });
  if (!r) return r.error();
  return out;
}

Result<GradedSubmission> Gradebook::Impl::load_submission(int64_t id) {
  Result<Stmt> st = db.prepare(
      "SELECT student, path, file_hash, status, detail, seconds FROM submissions WHERE id = ?1");
  if (!st) return st.error();
  st->bind_int(1, id);
  GradedSubmission s;
  Result<void> r = each_row(*st, [&](Stmt& q) {
    s.student = q.column_text(0);
    s.path = q.column_text(1);
    s.file_hash = q.column_text(2);
    s.status = q.column_text(3);
    s.detail = q.column_text(4);
    s.seconds = q.column_double(5);
  });
  if (!r) return r.error();
  Result<Stmt> tam = db.prepare("SELECT what FROM tampered WHERE submission = ?1 ORDER BY ord");
  if (!tam) return tam.error();
  tam->bind_int(1, id);
  r = each_row(*tam, [&](Stmt& q) { s.tampered.push_back(q.column_text(0)); });
  if (!r) return r.error();
  Result<Stmt> res = db.prepare(
      "SELECT goal_id, passed, message FROM goal_results WHERE submission = ?1 ORDER BY ord");
  if (!res) return res.error();
  res->bind_int(1, id);
  r = each_row(*res, [&](Stmt& q) {
    s.goals.push_back({q.column_text(0), q.column_int(1) != 0, q.column_text(2)});
  });
  if (!r) return r.error();
  return s;
}

Result<std::vector<GradedSubmission>> Gradebook::submissions(int64_t grading_id) const {
  if (Result<Grading> g = grading(grading_id); !g) return g.error();
  Result<Stmt> st = impl_->db.prepare("SELECT id FROM submissions WHERE grading = ?1 ORDER BY id");
  if (!st) return st.error();
  st->bind_int(1, grading_id);
  std::vector<int64_t> ids;
  if (Result<void> r = each_row(*st, [&](Stmt& s) { ids.push_back(s.column_int(0)); }); !r)
    return r.error();
  std::vector<GradedSubmission> out;
  for (int64_t id : ids) {
    Result<GradedSubmission> s = impl_->load_submission(id);
    if (!s) return s.error();
    out.push_back(std::move(*s));
  }
  return out;
}

Result<std::vector<GoalRate>> Gradebook::pass_rates(int64_t grading_id) const {
  Result<Grading> g = grading(grading_id);
  if (!g) return g.error();
  Result<Stmt> st = impl_->db.prepare(
      "SELECT o.id, o.text, o.hidden, "
      "  (SELECT count(*) FROM goal_results r JOIN submissions s ON r.submission = s.id "
      "   WHERE s.grading = o.grading AND r.goal_id = o.id AND r.passed <> 0) "
      "FROM goals o WHERE o.grading = ?1 ORDER BY o.ord");
  if (!st) return st.error();
  st->bind_int(1, grading_id);
  std::vector<GoalRate> out;
  Result<void> r = each_row(*st, [&](Stmt& s) {
    out.push_back({s.column_text(0), s.column_text(1), s.column_int(2) != 0,
                   static_cast<int>(s.column_int(3)), g->submissions});
  });
  if (!r) return r.error();
  return out;
}

Result<std::vector<GradedSubmission>> Gradebook::best_per_student(
    const std::string& lab_hash) const {
  Result<Stmt> st = impl_->db.prepare(
      "SELECT s.id, s.student, "
      "  (SELECT count(*) FROM goal_results r WHERE r.submission = s.id AND r.passed <> 0) "
      "FROM submissions s JOIN gradings g ON s.grading = g.id "
      "WHERE g.lab_hash = ?1 ORDER BY s.id");
  if (!st) return st.error();
  st->bind_text(1, lab_hash);
  struct Best {
    int64_t id;
    int64_t passed;
  };
  std::map<std::string, Best> best;  // by student: the output's order
  Result<void> r = each_row(*st, [&](Stmt& s) {
    const Best b{s.column_int(0), s.column_int(2)};
    auto [it, added] = best.try_emplace(s.column_text(1), b);
    if (!added && b.passed >= it->second.passed) it->second = b;  // rows come oldest first
  });
  if (!r) return r.error();
  std::vector<GradedSubmission> out;
  for (const auto& [student, b] : best) {
    Result<GradedSubmission> s = impl_->load_submission(b.id);
    if (!s) return s.error();
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace mls::store
