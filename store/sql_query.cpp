// runs query: a read-only connection with an authorizer, a row cap and a time cap.
#include "store/sql_query.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>

#include "store/run_schema.h"
#include "store/run_store.h"

namespace mls::store {

namespace {

struct Guard {
  std::string denied;  // the first refusal, for the message
  std::string weak;    // a write into SQLite's own tables (what CREATE or DROP does inside)
  std::string what() const { return denied.empty() ? weak : denied; }
  std::chrono::steady_clock::time_point deadline;
  bool timed_out = false;
};

bool is(const char* a, const char* b) {
  return a && sqlite3_stricmp(a, b) == 0;
}

// Pragmas that only read, even with an argument.
bool reading_pragma(const char* name) {
  for (const char* p :
       {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
        "function_list", "pragma_list", "table_list", "collation_list", "database_list"})
    if (is(name, p)) return true;
  return false;
}

int authorize(void* user, int action, const char* a3, const char* a4, const char*, const char*) {
  auto* g = static_cast<Guard*>(user);
  auto deny = [&](std::string what) {
    if (g->denied.empty()) g->denied = std::move(what);
    return SQLITE_DENY;
  };
  auto on = [](const char* t) { return t ? std::string(" on ") + t : std::string(); };
  auto write = [&](const char* verb) {
    // A write into SQLite's own tables is what a CREATE, DROP, ALTER or ANALYZE does first.
    if (a3 && sqlite3_strnicmp(a3, "sqlite_", 7) == 0) {
      std::string stmt = is(a3, "sqlite_stat1") || is(a3, "sqlite_stat4") ? "ANALYZE"
                         : std::string(verb) == "INSERT"                  ? "CREATE"
                         : std::string(verb) == "DELETE"                  ? "DROP"
                                                                          : "ALTER";
      if (g->weak.empty()) g->weak = stmt + " (" + verb + on(a3) + ")";
      return SQLITE_DENY;
    }
    return deny(verb + on(a3));
  };
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      // a3 unused, a4 the function's name.
      for (const char* f :
           {"load_extension", "writefile", "fts3_tokenizer", "edit", "readfile", "sqlite_dbpage"})
        if (is(a4, f)) return deny(std::string("the function ") + f + "()");
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      // a3 the pragma's name, a4 its argument (NULL when none).
      if (a4 == nullptr || reading_pragma(a3)) return SQLITE_OK;
      return deny(std::string("PRAGMA ") + (a3 ? a3 : "") + " with a value");
    case SQLITE_INSERT:
      return write("INSERT");
    case SQLITE_UPDATE:
      return write("UPDATE");
    case SQLITE_DELETE:
      return write("DELETE");
    case SQLITE_ATTACH:
      return deny("ATTACH");
    case SQLITE_DETACH:
      return deny("DETACH");
    case SQLITE_TRANSACTION:
      return deny("a transaction (BEGIN, COMMIT, ROLLBACK)");
    case SQLITE_SAVEPOINT:
      return deny("SAVEPOINT");
    case SQLITE_ALTER_TABLE:
      return deny("ALTER TABLE");
    case SQLITE_ANALYZE:
      return deny("ANALYZE");
    case SQLITE_REINDEX:
      return deny("REINDEX");
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE:
    case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW:
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_VTABLE:
      return deny("CREATE");
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TEMP_TABLE:
    case SQLITE_DROP_TEMP_TRIGGER:
    case SQLITE_DROP_TEMP_VIEW:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_VTABLE:
      return deny("DROP");
    default:
      return deny("this statement (authorizer action " + std::to_string(action) + ")");
  }
}

int progress(void* user) {
  auto* g = static_cast<Guard*>(user);
  if (std::chrono::steady_clock::now() < g->deadline) return 0;
  g->timed_out = true;
  return 1;
}

bool blank_tail(const char* tail) {
  // Whitespace, semicolons and comments only.
  const char* p = tail;
  while (*p) {
    if (std::isspace(static_cast<unsigned char>(*p)) || *p == ';') {
      ++p;
    } else if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n') ++p;
    } else if (p[0] == '/' && p[1] == '*') {
      const char* end = std::strstr(p + 2, "*/");
      if (!end) return true;  // an unterminated comment runs to the end
      p = end + 2;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<Db> open_run_db_reader(const std::string& db_path) {
  {
    // Every check (missing, not a database, newer schema) and an older file's upgrade.
    Result<std::unique_ptr<RunStore>> s = RunStore::open_read_only(db_path);
    if (!s) return s.error();
  }
  Result<Db> db = Db::open_read_only(db_path, /*immutable=*/false);
  if (db) {
    if (Result<int64_t> v = check_run_db(*db); !v) {
      if (db->errcode() != SQLITE_CANTOPEN && db->errcode() != SQLITE_READONLY) return v.error();
      db = Db::open_read_only(db_path, /*immutable=*/true);
    }
  } else {
    db = Db::open_read_only(db_path, /*immutable=*/true);
  }
  if (!db) return db.error();
  Result<int64_t> version = check_run_db(*db);
  if (!version) return version.error();
  if (*version != kSchemaVersion)
    return make_error(db_path + ": schema version " + std::to_string(*version) +
                      ", this build reads " + std::to_string(kSchemaVersion));
  return db;
}

Result<QueryResult> run_query(const std::string& db_path, const std::string& sql,
                              const QueryLimits& limits) {
  Result<Db> db = open_run_db_reader(db_path);
  if (!db) return db.error();
  sqlite3* raw = db->raw();
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(raw, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH,
                static_cast<int>(std::clamp<int64_t>(limits.max_value_bytes, 1, 1 << 30)));
  Guard guard;
  sqlite3_set_authorizer(raw, authorize, &guard);

  const std::string prefix = "runs query: ";
  sqlite3_stmt* st = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(raw, sql.c_str(), static_cast<int>(sql.size()), &st, &tail);
  struct Finalize {
    sqlite3_stmt*& s;
    ~Finalize() { sqlite3_finalize(s); }
  } fin{st};
  if (rc != SQLITE_OK) {
    if (!guard.what().empty())
      return make_error(prefix + "the database is read-only here: " + guard.what() +
                        " refused (only SELECT, WITH and reading PRAGMAs run)");
    return make_error(prefix + sqlite3_errmsg(raw));
  }
  if (st == nullptr) return make_error(prefix + "no statement to run");
  if (tail && !blank_tail(tail))
    return make_error(prefix + "one statement at a time (more follows the first ';')");
  if (!sqlite3_stmt_readonly(st))
    return make_error(prefix + "the database is read-only here: a statement that writes refused");

  using namespace std::chrono;
  guard.deadline = steady_clock::now() +
                   duration_cast<steady_clock::duration>(duration<double>(limits.max_seconds));
  sqlite3_progress_handler(raw, 1000, progress, &guard);

  QueryResult out;
  int64_t bytes = 0;  // the text kept so far (max_bytes)
  int n = sqlite3_column_count(st);
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(st, i);
    out.columns.push_back(name ? name : "");
  }
  for (;;) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (guard.timed_out)
        return make_error(prefix + "stopped after " +
                          std::to_string(limits.max_seconds).substr(0, 5) + " s (the time cap)");
      if (!guard.what().empty())
        return make_error(prefix + "the database is read-only here: " + guard.what() + " refused");
      if (sqlite3_errcode(raw) == SQLITE_TOOBIG)
        return make_error(prefix + "a value is too big (over " +
                          std::to_string(limits.max_value_bytes >> 20) + " MiB)");
      return make_error(prefix + sqlite3_errmsg(raw));
    }
    if (static_cast<int64_t>(out.rows.size()) >= limits.max_rows) {
      out.truncated = true;
      break;
    }
    std::vector<Cell> row;
    for (int i = 0; i < n; ++i) {
      Cell c;
      switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
          c.kind = Cell::Kind::Number;
          c.number = sqlite3_column_double(st, i);
          break;
        case SQLITE_TEXT:
        case SQLITE_BLOB: {
          c.kind = Cell::Kind::Text;
          const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
          c.text.assign(t ? t : "", static_cast<size_t>(sqlite3_column_bytes(st, i)));
          bytes += static_cast<int64_t>(c.text.size());
          break;
        }
        default:
          break;
      }
      row.push_back(std::move(c));
      if (bytes > limits.max_bytes) break;  // a row of many big columns stops here too
    }
    if (bytes > limits.max_bytes) {
      out.truncated = true;  // this row's text is past the cap: the rows before it are kept
      break;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace mls::store
