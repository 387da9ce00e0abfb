// RunTable: one read-only connection; each query is built from the filter language
// (store/run_filter.h) with every user value bound, and filtered, sorted and paged in SQL.
#include "store/run_table.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "store/run_filter.h"
#include "store/run_store.h"
#include "store/sql_query.h"
#include "store/sqlite.h"

namespace mls::store {

namespace {

// A statement that finalizes itself.
struct Prepared {
  sqlite3_stmt* st = nullptr;
  Prepared() = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() { sqlite3_finalize(st); }
};

// Each row's first column as text.
Result<std::vector<std::string>> keys(Db& db, const char* sql) {
  Result<Stmt> st = db.prepare(sql);
  if (!st) return st.error();
  std::vector<std::string> out;
  for (;;) {
    Result<bool> row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(st->column_text(0));
  }
  return out;
}

}  // namespace

std::string Cell::display() const {
  switch (kind) {
    case Kind::Null:
      return "";
    case Kind::Text:
      return text;
    case Kind::Number: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", number);
      return buf;
    }
  }
  return "";
}

std::vector<std::string> default_columns() {
  return {"id",
          "status",
          "name",
          "started",
          "device",
          "metrics.test/accuracy",
          "metrics.val/loss.best"};
}

struct RunTable::Impl {
  Db db;
  std::string path;

  Result<void> prepare(const std::string& sql, const SqlBinds& binds, Prepared& p) {
    if (sqlite3_prepare_v2(db.raw(), sql.c_str(), static_cast<int>(sql.size()), &p.st, nullptr) !=
        SQLITE_OK)
      return db.error("cannot read the runs");
    bind_all(p.st, binds);
    return {};
  }

  // The WHERE and ORDER BY of a query, binds added.
  Result<std::string> tail(const RunQuery& q, SqlBinds& binds, bool order) {
    Result<std::string> where = filter_sql(q.where, binds);
    if (!where) return where.error();
    std::string sql = " FROM runs AS r WHERE " + *where;
    if (!order) return sql;
    sql += " ORDER BY ";
    for (const SortKey& k : q.sort) {
      Result<Field> f = parse_field(k.field);
      if (!f) return make_error("--sort: " + f.error().message);
      sql += field_order_sql(*f, binds, k.descending) + ", ";
    }
    return sql + "r.id";
  }
};

RunTable::RunTable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunTable::~RunTable() = default;

const std::string& RunTable::path() const {
  return impl_->path;
}

Result<std::unique_ptr<RunTable>> RunTable::open(const std::string& db_path) {
  Result<Db> db = open_run_db_reader(db_path);
  if (!db) return db.error();
  if (Result<void> r = register_filter_functions(db->raw()); !r)
    return make_error(db_path + ": " + r.error().message);
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  impl->path = db_path;
  return std::unique_ptr<RunTable>(new RunTable(std::move(impl)));
}

Result<void> RunTable::check(const RunQuery& q) {
  SqlBinds binds;
  Result<std::string> t = impl_->tail(q, binds, true);
  if (!t) return t.error();
  for (const std::string& c : q.columns)
    if (Result<Field> f = parse_field(c); !f) return make_error("--columns: " + f.error().message);
  return {};
}

Result<int64_t> RunTable::count(const RunQuery& q) {
  SqlBinds binds;
  Result<std::string> t = impl_->tail(q, binds, false);
  if (!t) return t.error();
  Prepared p;
  if (Result<void> r = impl_->prepare("SELECT count(*)" + *t, binds, p); !r) return r.error();
  if (sqlite3_step(p.st) != SQLITE_ROW) return impl_->db.error("cannot count the runs");
  return static_cast<int64_t>(sqlite3_column_int64(p.st, 0));
}

Result<std::vector<std::string>> RunTable::columns(const RunQuery& q) {
  if (!q.columns.empty()) return q.columns;
  // The defaults' metrics only where some run logged them.
  Result<std::vector<std::string>> mk = metric_keys();
  if (!mk) return mk.error();
  std::vector<std::string> cols;
  for (const std::string& c : default_columns()) {
    Result<Field> f = parse_field(c);
    if (f &&
        (f->kind != Field::Kind::Metric || std::find(mk->begin(), mk->end(), f->name) != mk->end()))
      cols.push_back(c);
  }
  return cols;
}

Result<std::vector<RunRow>> RunTable::rows(const RunQuery& q, int64_t offset, int64_t limit) {
  SqlBinds binds;
  Result<std::vector<std::string>> rc = columns(q);
  if (!rc) return rc.error();
  const std::vector<std::string>& cols = *rc;
  std::string select = "SELECT r.id";
  for (const std::string& c : cols) {
    Result<Field> f = parse_field(c);
    if (!f) return make_error("--columns: " + f.error().message);
    select += ", " + field_sql(*f, binds);
  }
  Result<std::string> t = impl_->tail(q, binds, true);
  if (!t) return t.error();
  std::string sql = select + *t + " LIMIT " + binds.add(limit < 0 ? int64_t{-1} : limit) +
                    " OFFSET " + binds.add(std::max<int64_t>(0, offset));
  Prepared p;
  if (Result<void> r = impl_->prepare(sql, binds, p); !r) return r.error();
  std::vector<RunRow> out;
  for (;;) {
    int rc = sqlite3_step(p.st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return impl_->db.error("cannot read the runs");
    RunRow row;
    row.id = sqlite3_column_int64(p.st, 0);
    for (int i = 1; i <= static_cast<int>(cols.size()); ++i) {
      Cell c;
      switch (sqlite3_column_type(p.st, i)) {
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
          c.kind = Cell::Kind::Number;
          c.number = sqlite3_column_double(p.st, i);
          if (std::isnan(c.number)) c.kind = Cell::Kind::Null;
          break;
        case SQLITE_TEXT:
        case SQLITE_BLOB: {
          c.kind = Cell::Kind::Text;
          const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(p.st, i));
          c.text.assign(t ? t : "", static_cast<size_t>(sqlite3_column_bytes(p.st, i)));
          break;
        }
        default:
          break;
      }
      row.cells.push_back(std::move(c));
    }
    out.push_back(std::move(row));
  }
  return out;
}

Result<std::vector<std::string>> RunTable::unknown_keys(const RunQuery& q) {
  SqlBinds binds;
  std::vector<Field> fields;
  Result<std::string> w = filter_sql(q.where, binds, &fields);
  if (!w) return w.error();
  for (const SortKey& k : q.sort)
    if (Result<Field> f = parse_field(k.field); f) fields.push_back(*f);
  for (const std::string& c : q.columns)
    if (Result<Field> f = parse_field(c); f) fields.push_back(*f);
  // Each key is looked up alone (a key that exists is found at once); only a missing one
  // reads every key of its kind, for the guess.
  std::vector<std::string> out;
  for (const Field& f : fields) {
    if (f.kind == Field::Kind::Attribute) continue;
    const char* table = f.kind == Field::Kind::Param    ? "params"
                        : f.kind == Field::Kind::Metric ? "metric_summary"
                                                        : "tags";
    Result<Stmt> st =
        impl_->db.prepare(std::string("SELECT 1 FROM ") + table + " WHERE key = ?1 LIMIT 1");
    if (!st) return st.error();
    st->bind_text(1, f.name);
    Result<bool> found = st->step();
    if (!found) return found.error();
    st->reset();
    if (*found) continue;
    Result<std::vector<std::string>> have = keys(
        impl_->db, (std::string("SELECT DISTINCT key FROM ") + table + " ORDER BY key").c_str());
    if (!have) return have.error();
    const char* what = f.kind == Field::Kind::Param    ? "param"
                       : f.kind == Field::Kind::Metric ? "metric"
                                                       : "tag";
    std::string guess = closest(f.name, *have);
    std::string line = std::string("no run has ") + what + " '" + f.name + "'" +
                       (guess.empty() ? "" : " (did you mean " + guess + "?)");
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
  }
  return out;
}

Result<std::vector<std::string>> RunTable::param_keys() {
  return keys(impl_->db, "SELECT DISTINCT key FROM params ORDER BY key");
}

Result<std::vector<std::string>> RunTable::metric_keys() {
  // metric_summary_key_best's first column: a scan of the index, not of the points.
  return keys(impl_->db, "SELECT DISTINCT key FROM metric_summary ORDER BY key");
}

}  // namespace mls::store
