// `mlstudio runs query "SELECT ..."`: the user's own SQL over the run database, on a
// connection that cannot write. Four walls, each enough alone:
//   - the file is opened SQLITE_OPEN_READONLY (mode=ro);
//   - an authorizer denies every action but reading: INSERT, UPDATE, DELETE, CREATE, DROP,
//     ALTER, ATTACH, DETACH, transactions, savepoints, ANALYZE, REINDEX, a PRAGMA with an
//     argument (but the reading ones: table_info, index_list...) and the functions that
//     could write or load code (load_extension, writefile, fts3_tokenizer, edit);
//   - sqlite3_stmt_readonly must say the statement is read-only;
//   - one statement per call (a second after ';' is refused).
// A row cap, a byte cap, a length limit on every value and a time cap (a progress handler)
// bound what one query may cost.
//
//   Result<QueryResult> r = run_query("runs.db", "SELECT key, count(*) FROM params GROUP BY key");
//   if (!r) return fail(r.error().message);   // "runs query is read-only: INSERT refused"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "store/run_table.h"
#include "store/sqlite.h"

namespace mls::store {

struct QueryLimits {
  int64_t max_rows = 10000;  // rows past it are not read (QueryResult::truncated)
  double max_seconds = 10;   // then the query is stopped with an error saying so
  // A value (a row's cell, or anything the query builds on the way: zeroblob(1e9),
  // printf('%.*c', 1e9, 'x')) longer than this is an error; the rows kept stop (truncated)
  // once their text passes max_bytes, so a query over a stranger's file cannot exhaust memory.
  int64_t max_value_bytes = 16 << 20;
  int64_t max_bytes = 64 << 20;
};

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  bool truncated = false;  // more rows than max_rows
};

Result<QueryResult> run_query(const std::string& db_path, const std::string& sql,
                              const QueryLimits& limits = {});

// The run database opened read-only, checked (not a database, another program's tables, a
// newer schema: refused by name) and brought to the current schema as RunStore's reader does;
// read-only files and folders work.
Result<Db> open_run_db_reader(const std::string& db_path);

}  // namespace mls::store
