#include "store/sqlite.h"

#include <catch2/catch.hpp>

#include "tests/store/fixtures.h"

namespace mls::store {
namespace {

int64_t count_rows(Db& db) {
  Result<Stmt> st = db.prepare("SELECT count(*) FROM t");
  REQUIRE(st.ok());
  auto scope = st->scoped();
  Result<bool> row = st->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return st->column_int(0);
}

TEST_CASE("sqlite: a transaction rolls back unless committed", "[store]") {
  test::TempDir dir;
  Result<Db> db = Db::open(dir.file("t.db"));
  REQUIRE(db.ok());
  REQUIRE(db->exec("CREATE TABLE t(x INTEGER)").ok());
  Result<Stmt> ins = db->prepare("INSERT INTO t(x) VALUES(?1)");
  REQUIRE(ins.ok());
  {
    Result<Transaction> tx = Transaction::begin(*db);
    REQUIRE(tx.ok());
    REQUIRE(ins->bind_int(1, 1).run().ok());
  }  // dropped: rolled back
  CHECK(count_rows(*db) == 0);
  {
    Result<Transaction> tx = Transaction::begin(*db);
    REQUIRE(tx.ok());
    REQUIRE(ins->bind_int(1, 2).run().ok());
    REQUIRE(ins->bind_int(1, 3).run().ok());  // a statement is reusable after run()
    REQUIRE(tx->commit().ok());
  }
  CHECK(count_rows(*db) == 2);
}

TEST_CASE("sqlite: errors name the file and carry SQLite's message", "[store]") {
  test::TempDir dir;
  const std::string path = dir.file("t.db");
  Result<Db> db = Db::open(path);
  REQUIRE(db.ok());
  CHECK_THAT(
      test::error_of(db->prepare("SELECT * FROM nowhere")),
      Catch::StartsWith(path + ": cannot prepare") && Catch::Contains("no such table: nowhere"));
  REQUIRE(db->exec("CREATE TABLE u(k TEXT PRIMARY KEY)").ok());
  Result<Stmt> ins = db->prepare("INSERT INTO u(k) VALUES(?1)");
  REQUIRE(ins.ok());
  REQUIRE(ins->bind_text(1, "a").run().ok());
  CHECK_THAT(test::error_of(ins->bind_text(1, "a").run()),
             Catch::StartsWith(path + ": UNIQUE constraint failed: u.k"));
  CHECK(ins->bind_text(1, "b").run().ok());  // the failure left the statement usable
}

}  // namespace
}  // namespace mls::store
