// RunTable against the fixture's 40 runs: columns, sorts, paging and keys by hand count; a
// read-only file; refusals of what is not a run database.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "store/run_table.h"
#include "store/sqlite.h"

#include "tests/store/run_db_fixture.h"

using namespace mls::store;
using namespace mls::store::test;

namespace {

std::vector<RunRow> all_rows(RunTable& t, const RunQuery& q) {
  auto r = t.rows(q, 0, -1);
  INFO((r ? "" : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

std::vector<int64_t> ids(const std::vector<RunRow>& rows) {
  std::vector<int64_t> out;
  for (const RunRow& r : rows) out.push_back(r.id);
  return out;
}

}  // namespace

TEST_CASE("run table: columns hold each field's value", "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  RunQuery q;
  q.columns = {"id",
               "name",
               "status",
               "device",
               "experiment",
               "params.lr",
               "metrics.val/loss.best",
               "metrics.val/loss",
               "tags.keep",
               "tags.group",
               "seed",
               "metrics.val/loss.best_step",
               "params.none"};
  auto rows = all_rows(**t, q);
  REQUIRE(rows.size() == kFixtureRuns);
  for (const RunRow& row : rows) {
    FixtureRun f = fixture_run(static_cast<int>(row.id - 1));
    REQUIRE(row.cells.size() == q.columns.size());
    CHECK(row.cells[0].number == f.id);
    CHECK(row.cells[1].text == f.name);
    CHECK(row.cells[2].text == f.status);
    CHECK(row.cells[3].text == f.device);
    CHECK(row.cells[4].text == f.experiment);
    CHECK(row.cells[5].text == f.lr);
    CHECK(row.cells[5].kind == Cell::Kind::Text);
    CHECK(row.cells[6].number == Approx(f.val_loss_best));
    CHECK(row.cells[7].number == Approx(f.val_loss_latest));
    CHECK(row.cells[8].kind == (f.keep ? Cell::Kind::Text : Cell::Kind::Null));
    CHECK(row.cells[9].text == f.group);
    CHECK(row.cells[10].number == f.seed);
    CHECK(row.cells[11].number == (f.id % 4 == 1 ? 2 : 3));
    CHECK(row.cells[12].kind == Cell::Kind::Null);
    CHECK(row.cells[12].display().empty());
  }
  Cell c;
  c.kind = Cell::Kind::Number;
  c.number = 0.123456789;
  CHECK(c.display() == "0.123457");
}

TEST_CASE("run table: the default columns, with the metrics only where logged",
          "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  auto cols = (*t)->columns({});
  REQUIRE(cols.ok());
  CHECK(*cols == std::vector<std::string>{"id", "status", "name", "started", "device",
                                          "metrics.test/accuracy", "metrics.val/loss.best"});
  auto rows = (*t)->rows({}, 0, 3);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 3);
  CHECK((*rows)[2].cells.size() == 7);
  CHECK((*rows)[2].cells[5].number == Approx(0.02));

  TempDir empty_dir;
  { REQUIRE(RunStore::open(empty_dir.file("e.db")).ok()); }
  auto e = RunTable::open(empty_dir.file("e.db"));
  REQUIRE(e.ok());
  CHECK(*(*e)->columns({}) ==
        std::vector<std::string>{"id", "status", "name", "started", "device"});
  CHECK(*(*e)->count({}) == 0);
  CHECK((*e)->rows({}, 0, -1)->empty());
}

TEST_CASE("run table: sorts, then by id, missing values last either way", "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  auto fx = fixture_runs();
  RunQuery q;
  q.sort = {{"metrics.val/loss.best", false}};
  auto by_best = fx;
  std::stable_sort(by_best.begin(), by_best.end(), [](const FixtureRun& a, const FixtureRun& b) {
    return a.val_loss_best < b.val_loss_best;
  });
  std::vector<int64_t> want;
  for (auto& f : by_best) want.push_back(f.id);
  CHECK(ids(all_rows(**t, q)) == want);
  q.sort[0].descending = true;
  std::reverse(want.begin(), want.end());
  CHECK(ids(all_rows(**t, q)) == want);

  // params.lr by its number: 1e-4 (ids 4, 8, ...) before 0.001 and 0.01; "auto" (id 6), not a
  // number, after every number; within equal values by id.
  q.sort = {{"params.lr", false}};
  auto rows = ids(all_rows(**t, q));
  CHECK(std::vector<int64_t>(rows.begin(), rows.begin() + 3) == std::vector<int64_t>{4, 8, 12});
  CHECK(rows.back() == 6);
  q.sort = {{"params.lr", true}};
  rows = ids(all_rows(**t, q));
  CHECK(std::vector<int64_t>(rows.begin(), rows.begin() + 3) == std::vector<int64_t>{1, 5, 9});
  CHECK(rows.back() == 6);  // text after numbers, either way

  // Two keys: device, then seed descending.
  q.sort = {{"device", false}, {"seed", true}};
  rows = ids(all_rows(**t, q));
  CHECK(rows.front() == 39);  // cpu, seed 38
  CHECK(rows[19] == 1);       // the last cpu run
  CHECK(rows[20] == 40);      // cuda:0, seed 39
  // A tag only some runs have: those without it last, ascending or descending.
  q.sort = {{"tags.keep", true}};
  rows = ids(all_rows(**t, q));
  CHECK(std::vector<int64_t>(rows.begin(), rows.begin() + 8) ==
        std::vector<int64_t>{1, 6, 11, 16, 21, 26, 31, 36});
  q.sort = {{"stauts", false}};
  CHECK(error_of((*t)->rows(q, 0, 10))
            .find("--sort: unknown field 'stauts' (did you mean "
                  "status?)") == 0);
  CHECK(error_of((*t)->check(q)).find("--sort: unknown field") == 0);
}

TEST_CASE("run table: paging with offset and limit in SQL, and count with a filter",
          "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  RunQuery q;
  q.where = "status = 'finished' AND params.batch_size = 64";
  q.sort = {{"id", true}};
  q.columns = {"id"};
  int want =
      count_runs([](const FixtureRun& f) { return f.status == "finished" && f.batch == "64"; });
  CHECK(*(*t)->count(q) == want);
  std::vector<int64_t> expected;
  for (int i = kFixtureRuns - 1; i >= 0; --i) {
    FixtureRun f = fixture_run(i);
    if (f.status == "finished" && f.batch == "64") expected.push_back(f.id);
  }
  std::vector<int64_t> paged;
  for (int64_t off = 0; off < want; off += 4) {
    auto page = (*t)->rows(q, off, 4);
    REQUIRE(page.ok());
    CHECK(page->size() == static_cast<size_t>(std::min<int64_t>(4, want - off)));
    for (auto& r : *page) paged.push_back(r.id);
  }
  CHECK(paged == expected);
  CHECK((*t)->rows(q, want, 10)->empty());
  q.columns = {"params.lr", "bogus"};
  CHECK(error_of((*t)->rows(q, 0, 1)).find("--columns: unknown field 'bogus'") == 0);
  CHECK(error_of((*t)->check(q)).find("--columns: unknown field 'bogus'") == 0);
  q.columns = {};
  q.where = "params.lr <";
  CHECK(error_of((*t)->count(q)).find("--where: column 12: expected a value") == 0);
}

TEST_CASE("run table: the param and metric keys in the database", "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  CHECK(*(*t)->param_keys() == std::vector<std::string>{"batch_size", "lr", "optimizer"});
  CHECK(*(*t)->metric_keys() ==
        std::vector<std::string>{"test/accuracy", "train/loss", "val/loss"});
}

TEST_CASE("run table: reads a read-only file, refuses junk, a newer schema, a missing file",
          "[store][run_table]") {
  namespace fs = std::filesystem;
  TempDir dir;
  std::string path = make_runs_db(dir);
  fs::permissions(path, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  const std::string before = read_bytes(path);
  {
    auto t = RunTable::open(path);
    REQUIRE(t.ok());
    CHECK(*(*t)->count({.where = "tags.keep"}) == 8);
  }
  CHECK(read_bytes(path) == before);
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);

  write_bytes(dir.file("junk.db"), std::string(8192, 'j'));
  CHECK(error_of(RunTable::open(dir.file("junk.db"))).find("junk.db") != std::string::npos);
  CHECK(error_of(RunTable::open(dir.file("missing.db"))).find("missing.db") != std::string::npos);
  {
    auto db = Db::open(path);
    REQUIRE(db.ok());
    REQUIRE(db->exec("UPDATE meta SET value = '99' WHERE key = 'schema_version'").ok());
  }
  std::string msg = error_of(RunTable::open(path));
  CHECK(msg.find("99") != std::string::npos);
  CHECK(msg.find(path) != std::string::npos);
}

// Not a CI test (hidden): builds the 10,000 runs x 20 params x 1,000 steps once at
// $MLS_RUNS_PERF_DB (default /tmp/mls-runs-perf.db) and prints how long RunTable takes and
// the query plans. The lead's benchmark (bench/) measures it formally.
TEST_CASE("run table: timings on 10,000 runs", "[.][run_table_perf]") {
  const char* env = std::getenv("MLS_RUNS_PERF_DB");
  std::string path = env ? env : "/tmp/mls-runs-perf.db";
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a) {
    return std::chrono::duration<double, std::milli>(clock::now() - a).count();
  };
  if (!std::filesystem::exists(path)) {
    auto t0 = clock::now();
    { REQUIRE(RunStore::open(path).ok()); }
    auto db = Db::open(path);
    REQUIRE(db.ok());
    REQUIRE(db->exec("PRAGMA synchronous = OFF; BEGIN").ok());
    auto run = db->prepare(
        "INSERT INTO runs(name, project_path, project_hash, started, ended, status, device, "
        "seed) VALUES (?1, '/p.mls', 'h', '2026-01-01T00:00:00.000Z', "
        "'2026-01-01T01:00:00.000Z', ?2, 'cpu', ?3)");
    auto par = db->prepare("INSERT INTO params(run_id, key, value) VALUES (?1, ?2, ?3)");
    auto met = db->prepare(
        "INSERT INTO metrics(run_id, key, step, value, wall_time) VALUES (?1, 'train/loss', ?2, "
        "?3, 0)");
    auto sum = db->prepare(
        "INSERT INTO metric_summary(run_id, key, latest, latest_step, min, max, best, best_step, "
        "count) VALUES (?1, ?2, ?3, 1000, ?4, ?5, ?4, 1000, 1000)");
    REQUIRE((run.ok() && par.ok() && met.ok() && sum.ok()));
    for (int i = 1; i <= 10000; ++i) {
      run->bind_text(1, "run-" + std::to_string(i))
          .bind_text(2, i % 10 == 0 ? "failed" : "finished")
          .bind_int(3, i);
      REQUIRE(run->run().ok());
      for (int k = 0; k < 20; ++k) {
        double v = k == 0 ? std::pow(10.0, -1 - (i % 4)) : (i * 7 + k) % 97;
        par->bind_int(1, i)
            .bind_text(2, k == 0 ? "lr" : "p" + std::to_string(k))
            .bind_text(3, std::to_string(v));
        REQUIRE(par->run().ok());
      }
      double last = 0;
      for (int s = 1; s <= 1000; ++s) {
        last = 1.0 / s + (i % 100) / 1000.0;
        met->bind_int(1, i).bind_int(2, s).bind_double(3, last);
        REQUIRE(met->run().ok());
      }
      for (const char* key : {"train/loss", "val/loss"}) {
        sum->bind_int(1, i).bind_text(2, key).bind_double(3, last).bind_double(4, last).bind_double(
            5, 1 + (i % 100) / 1000.0);
        REQUIRE(sum->run().ok());
      }
    }
    REQUIRE(db->exec("COMMIT").ok());
    WARN("generated " << path << " in " << ms(t0) << " ms, "
                      << std::filesystem::file_size(path) / (1024 * 1024) << " MiB");
  }
  auto t0 = clock::now();
  auto t = RunTable::open(path);
  REQUIRE(t.ok());
  double open_ms = ms(t0);
  RunQuery q;
  q.where = "params.lr < 0.01 AND status = 'finished' AND metrics.val/loss.best < 1.05";
  q.sort = {{"metrics.val/loss.best", false}};
  q.columns = {"id",
               "status",
               "name",
               "params.lr",
               "params.p3",
               "metrics.val/loss.best",
               "metrics.train/loss"};
  t0 = clock::now();
  auto n = (*t)->count(q);
  double count_ms = ms(t0);
  REQUIRE(n.ok());
  t0 = clock::now();
  auto page = (*t)->rows(q, 0, 50);
  double rows_ms = ms(t0);
  REQUIRE(page.ok());
  t0 = clock::now();
  auto last = (*t)->rows(q, *n - 50, 50);
  double last_ms = ms(t0);
  RunQuery all;
  all.sort = {{"params.p5", true}};
  t0 = clock::now();
  auto every = (*t)->rows(all, 0, -1);
  double every_ms = ms(t0);
  REQUIRE(every.ok());
  t0 = clock::now();
  auto mk = (*t)->metric_keys();
  double keys_ms = ms(t0);
  WARN("open " << open_ms << " ms; count (" << *n << " match) " << count_ms << " ms; first 50 "
               << rows_ms << " ms; last 50 " << last_ms << " ms; all 10000 sorted by a param "
               << every_ms << " ms; metric_keys " << keys_ms << " ms");
}

TEST_CASE("run table: keys a query names that no run has are listed, with a guess",
          "[store][run_table]") {
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  RunQuery q;
  q.where = "metrics.val/los < 3 AND params.lr < 1 OR tags.kep";
  q.sort = {{"params.optimiser", false}};
  q.columns = {"id", "metrics.val/loss.best", "params.zzz"};
  auto u = (*t)->unknown_keys(q);
  INFO((u ? "" : u.error().message));
  REQUIRE(u.ok());
  CHECK(*u == std::vector<std::string>{"no run has metric 'val/los' (did you mean val/loss?)",
                                       "no run has tag 'kep' (did you mean keep?)",
                                       "no run has param 'optimiser' (did you mean optimizer?)",
                                       "no run has param 'zzz'"});
  CHECK((*t)->unknown_keys({.where = "params.lr < 1 AND tags.keep"})->empty());
}
