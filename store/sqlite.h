// Thin RAII over the SQLite C API. Db owns a connection, Stmt a prepared statement and
// Transaction a BEGIN..COMMIT that rolls back unless committed. Every error names the
// database file, so a message shown to the user says which file is at fault.
//
//   Result<Db> db = Db::open("runs.db");
//   if (!db) return db.error();
//   Result<Stmt> st = db->prepare("SELECT name FROM runs WHERE id = ?1");
//   if (!st) return st.error();
//   auto scope = st->scoped();  // resets the statement however we leave this block
//   st->bind_int(1, 7);
//   for (;;) {
//     Result<bool> row = st->step();
//     if (!row) return row.error();
//     if (!*row) break;
//     names.push_back(st->column_text(0));
//   }
//
// sqlite3.h stays out of this header: the handles are forward-declared C structs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "engine/core/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mls::store {

class Stmt;

// How long a connection waits for another process's lock before SQLITE_BUSY.
inline constexpr int kBusyTimeoutMs = 5000;

class Db {
 public:
  // Opens read-write, creating the file if missing. Sets a 5 s busy timeout so a second
  // process writing the same file waits briefly instead of failing at once.
  static Result<Db> open(const std::string& path);
  // Opens an existing file read-only (never creates it). `immutable`: also without the WAL
  // index, for a file in a folder that cannot be written (no writer can be there either).
  static Result<Db> open_read_only(const std::string& path, bool immutable);

  Db() = default;
  Db(Db&& o) noexcept;
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

  // Runs one or more statements that return no rows we need (DDL, pragmas, BEGIN).
  Result<void> exec(const std::string& sql);
  // exec, retried for up to kBusyTimeoutMs while it fails with SQLITE_BUSY. SQLite answers
  // BUSY at once, without calling the busy handler, where waiting could deadlock: switching
  // the journal mode while another process creates the same file is such a case.
  Result<void> exec_retrying_busy(const std::string& sql);
  Result<Stmt> prepare(std::string_view sql);

  // "PATH: what (sqlite message)" for the connection's most recent failure.
  Error error(std::string_view what) const;
  // The primary result code of the most recent failure (SQLITE_NOTADB, ...).
  int errcode() const;
  // The extended code (SQLITE_CONSTRAINT_FOREIGNKEY, ...).
  int extended_errcode() const;
  int64_t changes() const;
  int64_t last_insert_rowid() const;
  bool read_only() const;
  // How long to wait for another connection's lock (kBusyTimeoutMs at open).
  void set_busy_timeout(int ms);

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  int busy_timeout_ms_ = kBusyTimeoutMs;
};

class Stmt {
 public:
  // Resets the statement on construction and destruction, so a reused statement never
  // keeps a read snapshot open (in WAL mode that would hide other writers' commits).
  class Scope {
   public:
    explicit Scope(Stmt& s);
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();

   private:
    Stmt& s_;
  };

  Stmt() = default;
  Stmt(sqlite3_stmt* st, std::string path) : st_(st), path_(std::move(path)) {}
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  [[nodiscard]] Scope scoped() { return Scope(*this); }

  // Parameters are 1-based, as in SQL (?1, ?2, ...). A bad index is a programmer error.
  Stmt& bind_int(int i, int64_t v);
  Stmt& bind_double(int i, double v);
  Stmt& bind_text(int i, std::string_view v);
  Stmt& bind_null(int i);

  // true: a row is ready to read; false: done. Resets the statement when done or failed.
  Result<bool> step();
  // Steps to completion, for statements that return no rows.
  Result<void> run();
  // Back to the start with all parameters cleared.
  void reset();

  // Columns are 0-based, as in the SQLite API.
  int column_count() const;
  bool column_is_null(int i) const;
  int64_t column_int(int i) const;
  double column_double(int i) const;
  std::string column_text(int i) const;  // "" for NULL

 private:
  sqlite3_stmt* st_ = nullptr;
  std::string path_;  // for messages; a copy so a moved Db cannot leave it dangling
};

// BEGIN IMMEDIATE takes the write lock up front, so waiting on another writer happens here
// (under the busy timeout) rather than as a failure halfway through the writes.
class Transaction {
 public:
  static Result<Transaction> begin(Db& db);
  Transaction(Transaction&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();  // rolls back unless committed

  Result<void> commit();

 private:
  explicit Transaction(Db& db) : db_(&db) {}
  Db* db_ = nullptr;
};

}  // namespace mls::store
