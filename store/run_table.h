// RunTable: the runs of a database as rows of chosen columns, filtered and sorted inside
// SQLite, a page at a time. `mlstudio runs list|export` and the editor's run browser (a
// model that fetches lazily) both read through it, so a filter means the same everywhere.
//
//   auto t = RunTable::open("mlstudio-runs.db");            // read-only; never writes
//   if (!t) return fail(t.error().message);
//   RunQuery q;
//   q.where = "params.lr < 0.01 AND (status = 'finished' OR tags.keep)";
//   q.sort = {{"metrics.val/loss.best", /*descending=*/false}};
//   q.columns = {"id", "status", "params.lr", "metrics.val/loss.best"};
//   Result<int64_t> n = (*t)->count(q);                     // rows that match
//   Result<std::vector<RunRow>> page = (*t)->rows(q, /*offset=*/0, /*limit=*/200);
//
// Fields (the filter's, the sort's and the columns' language, store/run_filter.h):
//   attributes   id name status started ended duration device seed world_size experiment
//                parent fork_step sweep trial note project project_hash
//   params.KEY                 a parameter (compared as a number when both sides are numbers)
//   metrics.KEY[.AGG]          AGG: latest (the default; also "last"), min, max, best, count,
//                              step (the latest's step), best_step
//   tags.KEY                   a tag's value; `tags.KEY` alone is true when the run has it
// KEY may be quoted ("val/loss" or `val/loss`) when it holds spaces, dots or operators.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::store {

struct SortKey {
  std::string field;  // any field above
  bool descending = false;
};

struct RunQuery {
  std::string where;                 // the filter language; "" all runs
  std::vector<SortKey> sort;         // then by id; empty: by id
  std::vector<std::string> columns;  // empty: default_columns()
};

// One cell: a number, a text, or nothing (a run without that param or metric, a NaN).
struct Cell {
  enum class Kind { Null, Number, Text } kind = Kind::Null;
  double number = 0;
  std::string text;
  std::string display() const;  // "" for Null; numbers to 6 significant digits
};

struct RunRow {
  int64_t id = 0;
  std::vector<Cell> cells;  // one per column, in the query's order
};

// "id, status, name, started, device" and, where runs logged them, test/accuracy's latest
// and val/loss's best (all seven here; RunTable::columns drops the metrics nobody logged).
std::vector<std::string> default_columns();

class RunTable {
 public:
  // Read-only (a missing file is an error naming it; a newer schema is refused by name).
  static Result<std::unique_ptr<RunTable>> open(const std::string& db_path);
  ~RunTable();

  // Checks a query without running it: a bad filter's message points at the column
  // ("--where: column 12: expected a value after '<'\n  params.lr <\n             ^").
  Result<void> check(const RunQuery& q);
  Result<int64_t> count(const RunQuery& q);
  Result<std::vector<RunRow>> rows(const RunQuery& q, int64_t offset, int64_t limit);  // <0: all
  // The columns rows() returns for `q`: q.columns, or those of default_columns() that apply
  // (the metrics only where some run logged them).
  Result<std::vector<std::string>> columns(const RunQuery& q);
  // Keys the query names that no run in the database has, each a line ("no run has metric
  // 'val/los' (did you mean val/loss?)"): a typo there matches nothing rather than failing.
  Result<std::vector<std::string>> unknown_keys(const RunQuery& q);
  // The params and metric keys that occur in the database (for column pickers), sorted.
  Result<std::vector<std::string>> param_keys();
  Result<std::vector<std::string>> metric_keys();

  const std::string& path() const;

 private:
  struct Impl;
  explicit RunTable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mls::store
