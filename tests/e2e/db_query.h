// One value read from a run database by SQL, for the e2e tests that check what a command
// recorded (sweeps, MPI jobs).
//
//   CHECK(scalar(db, "SELECT COUNT(*) FROM runs") == 4);
//   CHECK(text(db, "PRAGMA integrity_check") == "ok");
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "store/sqlite.h"

namespace mls::e2e {

// The first column of the first row, as an integer (the row must exist).
inline int64_t scalar(const std::string& db, const std::string& sql) {
  auto d = mls::store::Db::open_read_only(db, false);
  REQUIRE(d.ok());
  auto st = d->prepare(sql);
  REQUIRE(st.ok());
  auto scope = st->scoped();
  auto row = st->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return st->column_int(0);
}

// The first column of the first row, as text ("(no row)" when there is none).
inline std::string text(const std::string& db, const std::string& sql) {
  auto d = mls::store::Db::open(db);
  REQUIRE(d.ok());
  auto st = d->prepare(sql);
  REQUIRE(st.ok());
  auto scope = st->scoped();
  auto row = st->step();
  REQUIRE(row.ok());
  return *row ? st->column_text(0) : "(no row)";
}

}  // namespace mls::e2e
