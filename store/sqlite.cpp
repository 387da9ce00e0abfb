#include "store/sqlite.h"

#include <sqlite3.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "engine/core/atomic_file.h"
#include "engine/core/check.h"

namespace mls::store {

namespace {

std::string sqlite_message(sqlite3* db) {
  return db ? sqlite3_errmsg(db) : "out of memory";
}

// A missing file or a regular one: SQLite would block reading a FIFO's header forever.
Result<void> check_regular_or_missing(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return {};
  return make_error(path + ": is " + file_type_name(st.st_mode) +
                    ", not a regular file (a run database must be one)");
}

}  // namespace

// [Db] -----------------------------------------------------------------------------------

Result<Db> Db::open(const std::string& path) {
  if (auto ok = check_regular_or_missing(path); !ok) return ok.error();
  Db db;
  db.path_ = path;
  int rc =
      sqlite3_open_v2(path.c_str(), &db.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return db.error("cannot open database");  // ~Db closes the handle
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, kBusyTimeoutMs);
  return db;
}

Result<Db> Db::open_read_only(const std::string& path, bool immutable) {
  if (auto ok = check_regular_or_missing(path); !ok) return ok.error();
  Db db;
  db.path_ = path;
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  uri += immutable ? "?mode=ro&immutable=1" : "?mode=ro";
  int rc = sqlite3_open_v2(uri.c_str(), &db.db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) return db.error("cannot open database for reading");
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, kBusyTimeoutMs);
  return db;
}

Db::Db(Db&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)),
      path_(std::move(o.path_)),
      busy_timeout_ms_(o.busy_timeout_ms_) {}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
    busy_timeout_ms_ = o.busy_timeout_ms_;
  }
  return *this;
}

// close_v2 defers the close until the last statement is finalised, so destruction order
// between a Db and its Stmts cannot leak the connection.
Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Result<void> Db::exec(const std::string& sql) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return {};
  std::string text = msg ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  if ((rc & 0xff) == SQLITE_BUSY) {
    // The commonest cause: another process is in the middle of writing the same file.
    text += " (another connection holds its write lock; waited " +
            std::to_string(busy_timeout_ms_) + " ms)";
  }
  return make_error(path_ + ": " + text + " (in: " + sql + ")");
}

Result<void> Db::exec_retrying_busy(const std::string& sql) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  // A little jitter per process, so two that collided do not retry in lockstep.
  int pause_ms = 2 + static_cast<int>(::getpid() % 7);
  for (;;) {
    Result<void> r = exec(sql);
    if (r || errcode() != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 50);
  }
}

Result<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &st, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    return error("cannot prepare \"" + std::string(sql) + "\"");
  }
  return Stmt(st, path_);
}

Error Db::error(std::string_view what) const {
  return make_error(path_ + ": " + std::string(what) + " (" + sqlite_message(db_) + ")");
}

int Db::errcode() const {
  return sqlite3_errcode(db_) & 0xff;
}
int Db::extended_errcode() const {
  return sqlite3_extended_errcode(db_);
}
int64_t Db::changes() const {
  return sqlite3_changes64(db_);
}
int64_t Db::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}
bool Db::read_only() const {
  return sqlite3_db_readonly(db_, "main") == 1;
}
void Db::set_busy_timeout(int ms) {
  busy_timeout_ms_ = ms;
  sqlite3_busy_timeout(db_, ms);
}

// [Stmt] ---------------------------------------------------------------------------------

Stmt::Scope::Scope(Stmt& s) : s_(s) {
  s_.reset();
}
Stmt::Scope::~Scope() {
  s_.reset();
}

Stmt::Stmt(Stmt&& o) noexcept : st_(std::exchange(o.st_, nullptr)), path_(std::move(o.path_)) {}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(st_);
    st_ = std::exchange(o.st_, nullptr);
    path_ = std::move(o.path_);
  }
  return *this;
}

Stmt::~Stmt() {
  sqlite3_finalize(st_);
}

Stmt& Stmt::bind_int(int i, int64_t v) {
  MLS_CHECK(sqlite3_bind_int64(st_, i, v) == SQLITE_OK, "sqlite bind_int failed");
  return *this;
}

Stmt& Stmt::bind_double(int i, double v) {
  MLS_CHECK(sqlite3_bind_double(st_, i, v) == SQLITE_OK, "sqlite bind_double failed");
  return *this;
}

Stmt& Stmt::bind_text(int i, std::string_view v) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may die before step().
  MLS_CHECK(
      sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8) == SQLITE_OK,
      "sqlite bind_text failed");
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  MLS_CHECK(sqlite3_bind_null(st_, i) == SQLITE_OK, "sqlite bind_null failed");
  return *this;
}

Result<bool> Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    sqlite3_reset(st_);
    return false;
  }
  // Read the message before reset, which may replace it.
  std::string msg =
      path_ + ": " + sqlite3_errmsg(sqlite3_db_handle(st_)) + " (in: " + sqlite3_sql(st_) + ")";
  sqlite3_reset(st_);
  return make_error(std::move(msg));
}

Result<void> Stmt::run() {
  for (;;) {
    Result<bool> row = step();
    if (!row) return row.error();
    if (!*row) return {};
  }
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

int Stmt::column_count() const {
  return sqlite3_column_count(st_);
}
bool Stmt::column_is_null(int i) const {
  return sqlite3_column_type(st_, i) == SQLITE_NULL;
}
int64_t Stmt::column_int(int i) const {
  return sqlite3_column_int64(st_, i);
}
double Stmt::column_double(int i) const {
  return sqlite3_column_double(st_, i);
}

std::string Stmt::column_text(int i) const {
  const unsigned char* p = sqlite3_column_text(st_, i);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(st_, i)));
}

// [Transaction] --------------------------------------------------------------------------

Result<Transaction> Transaction::begin(Db& db) {
  Result<void> r = db.exec("BEGIN IMMEDIATE");
  if (!r) return r.error();
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->exec("ROLLBACK");  // nothing useful to do if the rollback fails
}

Result<void> Transaction::commit() {
  MLS_CHECK(db_, "Transaction::commit twice");
  Result<void> r = db_->exec("COMMIT");
  if (r) db_ = nullptr;  // on failure the destructor still rolls back
  return r;
}

}  // namespace mls::store
