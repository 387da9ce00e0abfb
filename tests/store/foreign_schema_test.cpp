// A run database from elsewhere with a trigger or a view of its own: SQLite would run the
// trigger on each of mlstudio's writes (a recursive count to 1e12 hung `runs tag`), and a
// view in a table's place on each read. Every open refuses the file, naming it; it is unchanged.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include "store/run_store.h"
#include "store/sql_query.h"

#include "tests/store/fixtures.h"
#include "tests/store/run_db_fixture.h"

using namespace mls::store;
using namespace mls::store::test;

namespace {

void exec(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(raw);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("run store: a database with a trigger or a view of its own is refused by name",
          "[store][hostile]") {
  const char* extras[] = {
      "CREATE TRIGGER slow AFTER INSERT ON tags BEGIN SELECT count(*) FROM (WITH RECURSIVE "
      "c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) SELECT x FROM c); "
      "END",
      "CREATE VIEW slow AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
      "SELECT x FROM c"};
  for (const char* extra : extras) {
    INFO(extra);
    TempDir dir;
    const std::string path = make_runs_db(dir);
    exec(path, extra);
    const std::string before = read_bytes(path);
    std::string msg = error_of(RunStore::open(path));
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("'slow'") != std::string::npos);
    CHECK(error_of(RunStore::open_read_only(path)).find("'slow'") != std::string::npos);
    CHECK(error_of(run_query(path, "SELECT 1")).find("'slow'") != std::string::npos);
    CHECK(read_bytes(path) == before);
  }
}
