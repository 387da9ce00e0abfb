// runs query: reads answer; every kind of write is refused with a message saying what, and
// the file's bytes are the same afterwards.
#include <catch2/catch.hpp>

#include "store/sql_query.h"

#include "tests/store/run_db_fixture.h"

using namespace mls::store;
using namespace mls::store::test;

TEST_CASE("runs query: a SELECT answers with columns and rows", "[store][query]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  auto r = run_query(path,
                     "SELECT value, count(*) AS n FROM params WHERE key = 'optimizer' "
                     "GROUP BY value ORDER BY value");
  REQUIRE(r.ok());
  REQUIRE(r->columns == std::vector<std::string>{"value", "n"});
  REQUIRE(r->rows.size() == 2);
  CHECK(r->rows[0][0].text == "adam");
  CHECK(r->rows[0][1].number == count_runs([](const FixtureRun& f) { return f.opt == "adam"; }));
  CHECK(r->rows[1][0].text == "sgd");
  CHECK_FALSE(r->truncated);
  // WITH and reading pragmas run too.
  auto w = run_query(path, "WITH x AS (SELECT id FROM runs WHERE id < 4) SELECT sum(id) FROM x;");
  REQUIRE(w.ok());
  CHECK(w->rows[0][0].number == 6);
  auto p = run_query(path, "PRAGMA table_info(runs)");
  REQUIRE(p.ok());
  CHECK(p->rows.size() > 10);
  auto v = run_query(path, "PRAGMA user_version");
  REQUIRE(v.ok());
}

TEST_CASE("runs query: the row cap stops reading and says so", "[store][query]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  auto r = run_query(path, "SELECT id FROM runs ORDER BY id", {.max_rows = 7});
  REQUIRE(r.ok());
  CHECK(r->rows.size() == 7);
  CHECK(r->truncated);
  CHECK(r->rows[6][0].number == 7);
}

TEST_CASE("runs query: the time cap stops a query that runs too long", "[store][query]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  // A recursive count to a billion takes minutes; the cap is a tenth of a second.
  auto r = run_query(path,
                     "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                     "WHERE x < 1000000000) SELECT count(*) FROM c",
                     {.max_rows = 10, .max_seconds = 0.1});
  CHECK(error_of(r).find("stopped after 0.100 s (the time cap)") != std::string::npos);
}

TEST_CASE("runs query: INSERT, UPDATE, DELETE, ATTACH, DDL and PRAGMA writes are refused",
          "[store][query]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  // The store's WAL is checkpointed into the file when it closes: these are the bytes.
  const std::string before = read_bytes(path);
  REQUIRE(before.size() > 4096);
  struct Case {
    const char* sql;
    const char* says;
  };
  const Case cases[] = {
      {"INSERT INTO tags(run_id, key, value) VALUES (1, 'x', 'y')", "INSERT on tags refused"},
      {"UPDATE runs SET name = 'x'", "UPDATE on runs refused"},
      {"DELETE FROM runs", "DELETE on runs refused"},
      {"ATTACH DATABASE 'other.db' AS o", "ATTACH refused"},
      {"DETACH DATABASE main", "DETACH refused"},
      {"PRAGMA user_version = 3", "PRAGMA user_version with a value refused"},
      {"PRAGMA journal_mode = DELETE", "PRAGMA journal_mode with a value refused"},
      {"PRAGMA main.journal_mode=delete", "PRAGMA journal_mode with a value refused"},
      {"CREATE TABLE t(x)", "CREATE"},
      {"CREATE TEMP VIEW v AS SELECT 1", "CREATE"},
      {"DROP TABLE tags", "DROP"},
      {"ALTER TABLE runs ADD COLUMN x", "ALTER"},
      {"BEGIN", "a transaction (BEGIN, COMMIT, ROLLBACK) refused"},
      {"VACUUM", "refused"},
      {"REINDEX", "REINDEX refused"},
      {"ANALYZE", "ANALYZE"},
      {"SELECT load_extension('x')", "the function load_extension() refused"},
      {"WITH x AS (SELECT 1) DELETE FROM runs", "DELETE on runs refused"},
      {"INSERT INTO runs SELECT * FROM runs", "INSERT on runs refused"},
  };
  for (const Case& c : cases) {
    INFO(c.sql);
    std::string msg = error_of(run_query(path, c.sql));
    INFO(msg);
    CHECK(msg.find("runs query: the database is read-only here: ") == 0);
    CHECK(msg.find(c.says) != std::string::npos);
  }
  // A second statement after a harmless first is refused before anything runs.
  CHECK(error_of(run_query(path, "SELECT 1; DELETE FROM runs")).find("one statement at a time") !=
        std::string::npos);
  // A trailing ';' and comments are fine.
  CHECK(run_query(path, "SELECT 1; -- done\n").ok());
  CHECK(error_of(run_query(path, "SELEC 1")).find("runs query: near \"SELEC\"") == 0);
  CHECK(error_of(run_query(path, "   ")).find("no statement") != std::string::npos);
  CHECK(read_bytes(path) == before);
  CHECK(run_query(path, "SELECT count(*) FROM runs")->rows[0][0].number == kFixtureRuns);
}

TEST_CASE("runs query: a file that is not a run database is refused by name", "[store][query]") {
  TempDir dir;
  write_bytes(dir.file("junk.db"), std::string(5000, 'x'));
  std::string msg = error_of(run_query(dir.file("junk.db"), "SELECT 1"));
  CHECK(msg.find("junk.db") != std::string::npos);
  CHECK(error_of(run_query(dir.file("none.db"), "SELECT 1")).find("none.db") != std::string::npos);
}

TEST_CASE("runs query: huge values and many big rows are capped, not held in memory",
          "[store][query]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  // One value of a gigabyte: refused by SQLite's length limit, with a message saying so.
  for (const char* sql : {"SELECT zeroblob(1000000000)", "SELECT randomblob(1000000000)",
                          "SELECT length(hex(zeroblob(400000000)))"}) {
    INFO(sql);
    std::string msg = error_of(run_query(path, sql));
    CHECK(msg.find("runs query: ") == 0);
    CHECK(msg.find("too big") != std::string::npos);
  }
  // printf gives NULL past the limit rather than an error: capped all the same.
  auto p = run_query(path, "SELECT printf('%.*c', 1000000000, 'x')");
  REQUIRE(p.ok());
  CHECK(p->rows.at(0).at(0).kind == Cell::Kind::Null);
  CHECK(p->rows.at(0).at(0).text.empty());
  // Values under the limit, but more of them than the byte cap keeps: the rows stop there.
  QueryLimits limits;
  auto r =
      run_query(path,
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200) "
                "SELECT x, zeroblob(10000000) FROM c",
                limits);
  REQUIRE(r.ok());
  CHECK(r->truncated);
  REQUIRE(!r->rows.empty());
  CHECK(r->rows.size() < 200);
  size_t bytes = 0;
  for (const auto& row : r->rows) bytes += row[1].text.size();
  CHECK(bytes <= static_cast<size_t>(limits.max_bytes));
  CHECK(r->rows.back()[0].number == static_cast<double>(r->rows.size()));
  // One row of many big columns: not kept whole either.
  std::string wide = "SELECT zeroblob(10000000)";
  for (int i = 0; i < 20; ++i) wide += ", zeroblob(10000000)";
  auto w = run_query(path, wide, limits);
  REQUIRE(w.ok());
  CHECK(w->truncated);
  CHECK(w->rows.empty());
}
