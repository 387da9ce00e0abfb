#include "store/run_store.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "store/sqlite.h"
#include "tests/store/fixtures.h"

namespace mls::store {
namespace {

using test::error_of;
using test::read_bytes;
using test::TempDir;
using test::write_bytes;

std::unique_ptr<RunStore> open_ok(const std::string& path) {
  Result<std::unique_ptr<RunStore>> s = RunStore::open(path);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return std::move(*s);
}

// One text value from a fresh connection, to check the file rather than our own view.
std::string query_text(const std::string& path, const std::string& sql) {
  Result<Db> db = Db::open(path);
  REQUIRE(db.ok());
  Result<Stmt> st = db->prepare(sql);
  INFO((st ? std::string() : st.error().message));
  REQUIRE(st.ok());
  auto scope = st->scoped();
  Result<bool> row = st->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return st->column_text(0);
}

void exec_ok(const std::string& path, const std::string& sql) {
  Result<Db> db = Db::open(path);
  REQUIRE(db.ok());
  Result<void> r = db->exec(sql);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double loss_at(int64_t i) {
  return 2.5 * std::exp(-0.001 * static_cast<double>(i)) + 1e-9 * i;
}

const std::regex kIsoUtc(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");

TEST_CASE("run store: begin, params, 5000 metrics, end round trip", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  CHECK(store->path() == dir.file("runs.db"));

  NewRun nr{.name = "mnist-mlp",
            .project_path = "/home/u/mnist.mlsproj",
            .project_hash = "6e12adb9a80c5f06",
            .device = "cpu",
            .seed = 0xfedcba9876543210ull,  // above INT64_MAX: must survive as 64 bits
            .parent_run_id = std::nullopt};
  const double t0 = unix_now();
  Result<int64_t> id = store->begin_run(nr);
  REQUIRE(id.ok());

  Result<RunInfo> running = store->get_run(*id);
  REQUIRE(running.ok());
  CHECK(running->status == "running");
  CHECK(running->ended.empty());
  CHECK(std::regex_match(running->started, kIsoUtc));

  REQUIRE(store->log_param(*id, "lr", "0.1").ok());
  REQUIRE(store->log_param(*id, "batch_size", "128").ok());
  REQUIRE(store->log_param(*id, "lr", "0.01").ok());  // replaces, does not duplicate

  for (int64_t i = 0; i < 5000; ++i) {
    store->log_metric("train/loss", i, loss_at(i));
    if (i % 1000 == 999) store->log_metric("val/acc", i, 0.5 + 0.0001 * static_cast<double>(i));
  }
  REQUIRE(store->end_run(*id, "finished").ok());
  const double t1 = unix_now();

  Result<RunInfo> info = store->get_run(*id);
  REQUIRE(info.ok());
  CHECK(info->id == *id);
  CHECK(info->name == "mnist-mlp");
  CHECK(info->project_path == "/home/u/mnist.mlsproj");
  CHECK(info->project_hash == "6e12adb9a80c5f06");
  CHECK(info->device == "cpu");
  CHECK(info->seed == 0xfedcba9876543210ull);
  CHECK_FALSE(info->parent_run_id.has_value());
  CHECK(info->status == "finished");
  CHECK(std::regex_match(info->ended, kIsoUtc));
  CHECK(info->ended >= info->started);  // ISO-8601 strings order as times

  auto params = store->params(*id);
  REQUIRE(params.ok());
  using P = std::pair<std::string, std::string>;
  CHECK(*params == std::vector<P>{{"batch_size", "128"}, {"lr", "0.01"}});

  auto keys = store->metric_keys(*id);
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"train/loss", "val/acc"});

  auto loss = store->metrics(*id, "train/loss");
  REQUIRE(loss.ok());
  REQUIRE(loss->size() == 5000);
  CHECK(loss->front().step == 0);
  CHECK(loss->front().value == 2.5);
  CHECK(loss->back().step == 4999);
  CHECK(loss->back().value == loss_at(4999));
  size_t mismatches = 0;
  for (size_t i = 0; i < loss->size(); ++i) {
    const MetricPoint& p = (*loss)[i];
    if (p.step != static_cast<int64_t>(i) || p.value != loss_at(p.step)) ++mismatches;
    if (p.wall_time < t0 - 1 || p.wall_time > t1 + 1) ++mismatches;
  }
  CHECK(mismatches == 0);

  auto acc = store->metrics(*id, "val/acc");
  REQUIRE(acc.ok());
  REQUIRE(acc->size() == 5);
  CHECK((*acc)[0].step == 999);
  CHECK((*acc)[0].value == 0.5 + 0.0001 * 999.0);
  CHECK((*acc)[4].step == 4999);

  // Every point is in the file itself, not only in this store's view.
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics") == "5005");
}

TEST_CASE("run store: NaN and infinities survive the round trip", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  Result<int64_t> id = store->begin_run({.name = "diverged"});
  REQUIRE(id.ok());
  store->log_metric("loss", 0, 1.0);
  store->log_metric("loss", 1, std::numeric_limits<double>::infinity());
  store->log_metric("loss", 2, std::numeric_limits<double>::quiet_NaN());
  store->log_metric("loss", 3, -std::numeric_limits<double>::infinity());
  REQUIRE(store->end_run(*id, "failed").ok());
  auto pts = store->metrics(*id, "loss");
  REQUIRE(pts.ok());
  REQUIRE(pts->size() == 4);
  CHECK((*pts)[0].value == 1.0);
  CHECK((*pts)[1].value == std::numeric_limits<double>::infinity());
  CHECK(std::isnan((*pts)[2].value));
  CHECK((*pts)[3].value == -std::numeric_limits<double>::infinity());
}

TEST_CASE("run store: repeated steps keep logging order", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  Result<int64_t> id = store->begin_run({.name = "r"});
  REQUIRE(id.ok());
  store->log_metric("x", 5, 50.0);
  store->log_metric("x", 2, 20.0);
  store->log_metric("x", 5, 51.0);
  auto pts = store->metrics(*id, "x");
  REQUIRE(pts.ok());
  REQUIRE(pts->size() == 3);
  CHECK((*pts)[0].value == 20.0);
  CHECK((*pts)[1].value == 50.0);
  CHECK((*pts)[2].value == 51.0);
}

TEST_CASE("run store: the file is in WAL mode with schema_version 4", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  CHECK(query_text(store->path(), "PRAGMA journal_mode") == "wal");
  CHECK(query_text(store->path(), "SELECT value FROM meta WHERE key = 'schema_version'") == "4");
}

TEST_CASE("run store: runs list by id, a missing run is named in the error", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  Result<int64_t> a = store->begin_run({.name = "first", .seed = 1});
  REQUIRE(a.ok());
  Result<int64_t> b = store->begin_run({.name = "second", .seed = 2, .parent_run_id = *a});
  REQUIRE(b.ok());
  CHECK(*b > *a);

  auto runs = store->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  CHECK((*runs)[0].id == *a);
  CHECK((*runs)[0].name == "first");
  CHECK((*runs)[0].seed == 1);
  CHECK((*runs)[1].id == *b);
  CHECK((*runs)[1].name == "second");
  CHECK((*runs)[1].parent_run_id == std::optional<int64_t>(*a));

  std::string msg = error_of(store->get_run(7));
  CHECK(msg == "no run 7 in " + dir.file("runs.db"));

  CHECK_THAT(error_of(store->begin_run({.name = "orphan", .parent_run_id = 42})),
             Catch::Contains("no parent run 42"));
  CHECK_THAT(error_of(store->log_param(99, "lr", "1")), Catch::Contains("no run 99"));
  CHECK_THAT(error_of(store->end_run(99, "finished")), Catch::Contains("no run 99"));
  CHECK_THAT(error_of(store->end_run(*a, "done")), Catch::Contains("'done'"));
  // The bad calls above changed nothing.
  auto again = store->list_runs();
  REQUIRE(again.ok());
  CHECK(again->size() == 2);
  CHECK((*again)[0].status == "running");
}

TEST_CASE("run store: a second store on the same file sees flushed runs", "[store]") {
  TempDir dir;
  auto writer = open_ok(dir.file("runs.db"));
  Result<int64_t> id = writer->begin_run({.name = "shared", .device = "cuda:0"});
  REQUIRE(id.ok());
  REQUIRE(writer->log_param(*id, "epochs", "3").ok());
  for (int64_t i = 0; i < 300; ++i) writer->log_metric("loss", i, static_cast<double>(i));
  REQUIRE(writer->flush().ok());

  auto reader = open_ok(dir.file("runs.db"));  // while the writer is still open
  auto runs = reader->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK((*runs)[0].name == "shared");
  CHECK((*runs)[0].device == "cuda:0");
  CHECK((*runs)[0].status == "running");
  auto pts = reader->metrics(*id, "loss");
  REQUIRE(pts.ok());
  REQUIRE(pts->size() == 300);
  CHECK(pts->back().value == 299.0);

  // The reader does not hold an old snapshot: it sees the writer's next commit.
  REQUIRE(writer->end_run(*id, "finished").ok());
  auto after = reader->get_run(*id);
  REQUIRE(after.ok());
  CHECK(after->status == "finished");
}

TEST_CASE("run store: the destructor flushes, a live process's running run stays running",
          "[store]") {
  TempDir dir;
  int64_t id = 0;
  {
    auto store = open_ok(dir.file("runs.db"));
    Result<int64_t> r = store->begin_run({.name = "crashy"});
    REQUIRE(r.ok());
    id = *r;
    for (int64_t i = 0; i < 10; ++i) store->log_metric("loss", i, 0.5 * static_cast<double>(i));
  }
  auto store = open_ok(dir.file("runs.db"));
  auto info = store->get_run(id);
  REQUIRE(info.ok());
  CHECK(info->status == "running");
  CHECK(info->ended.empty());
  auto pts = store->metrics(id, "loss");
  REQUIRE(pts.ok());
  REQUIRE(pts->size() == 10);
  CHECK(pts->back().value == 4.5);
}

TEST_CASE("run store: a failed metric write is reported once by flush", "[store]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));

  // No current run yet.
  store->log_metric("loss", 0, 1.0);
  std::string msg = error_of(store->flush());
  CHECK_THAT(msg, Catch::Contains("no current run"));
  CHECK_THAT(msg, Catch::Contains("1 metric point(s) were not recorded"));
  CHECK(store->flush().ok());  // reported once

  // Another connection deletes the run under us (foreign keys are per connection and
  // off there), so our inserts fail their foreign key check.
  Result<int64_t> id = store->begin_run({.name = "doomed"});
  REQUIRE(id.ok());
  exec_ok(store->path(), "DELETE FROM runs WHERE id = " + std::to_string(*id));
  for (int64_t i = 0; i < 3; ++i) store->log_metric("loss", i, 1.0);
  msg = error_of(store->flush());
  CHECK_THAT(msg, Catch::Contains(dir.file("runs.db")));
  CHECK_THAT(msg, Catch::Contains("FOREIGN KEY"));
  CHECK_THAT(msg, Catch::Contains("3 metric point(s) were not recorded"));
  CHECK(store->flush().ok());
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics") == "0");
}

TEST_CASE("run store: points logged on one thread while another reads arrive once, in order",
          "[store][writer]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  Result<int64_t> id = store->begin_run({.name = "threads"});
  REQUIRE(id.ok());
  constexpr int64_t n = 20000;
  std::atomic<bool> done{false};
  // Only this thread asserts (Catch2's assertions are not thread-safe).
  std::thread logger([&] {
    for (int64_t i = 0; i < n; ++i) {
      store->log_metric("train/loss", i, 0.5 * static_cast<double>(i));
      store->log_metric("train/accuracy", i, static_cast<double>(i % 7));
    }
    done = true;
  });
  int reads = 0;
  size_t seen = 0;
  bool in_order = true;
  bool summary_ok = true;
  while (!done || reads == 0) {
    Result<std::vector<MetricPoint>> pts = store->metrics(*id, "train/loss");
    REQUIRE(pts.ok());
    // Every read is a prefix of what was logged: each step once, none skipped.
    for (size_t i = 0; i < pts->size(); ++i) {
      if ((*pts)[i].step != static_cast<int64_t>(i) || (*pts)[i].value != 0.5 * (*pts)[i].step)
        in_order = false;
    }
    if (pts->size() < seen) in_order = false;
    seen = pts->size();
    Result<std::vector<MetricSummary>> sums = store->metric_summaries(*id);
    REQUIRE(sums.ok());
    for (const MetricSummary& m : *sums) {
      // Points and their summary are committed together: count is latest_step + 1.
      if (m.count != m.latest_step + 1) summary_ok = false;
      if (m.key == "train/loss" && m.count < static_cast<int64_t>(seen)) summary_ok = false;
    }
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  logger.join();
  CHECK(in_order);
  CHECK(summary_ok);
  REQUIRE(store->flush().ok());
  Result<std::vector<MetricPoint>> loss = store->metrics(*id, "train/loss");
  Result<std::vector<MetricPoint>> acc = store->metrics(*id, "train/accuracy");
  REQUIRE(loss.ok());
  REQUIRE(acc.ok());
  REQUIRE(loss->size() == static_cast<size_t>(n));
  REQUIRE(acc->size() == static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE((*loss)[i].step == i);
    REQUIRE((*acc)[i].step == i);
    REQUIRE((*acc)[i].value == static_cast<double>(i % 7));
  }
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(*id);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 2);
  CHECK((*sums)[1].key == "train/loss");
  CHECK((*sums)[1].count == n);
  CHECK((*sums)[1].latest == 0.5 * (n - 1));
  CHECK((*sums)[0].max == 6.0);
  CHECK((*sums)[0].best == 6.0);  // accuracy: higher is better
  CHECK((*sums)[0].best_step == 6);
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics") == std::to_string(2 * n));
  // Reads write the queue themselves (they flush first); between them the writer thread
  // takes batches. Which of the two wrote a batch depends on the scheduler.
  if (store->writer_batches() == 0) WARN("the writer thread took no batch; reads wrote them all");
  INFO("reads while logging: " << reads);
}

TEST_CASE("run store: a write failure in the writer thread's batch is reported by flush",
          "[store][writer]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  Result<int64_t> id = store->begin_run({.name = "doomed"});
  REQUIRE(id.ok());
  // Another connection deletes the run (foreign keys are off there): our inserts then fail.
  exec_ok(store->path(), "DELETE FROM runs WHERE id = " + std::to_string(*id));
  for (int64_t i = 0; i < 300; ++i) store->log_metric("loss", i, 1.0);
  // 256 queued points wake the writer; wait (up to 20 s) until it has taken a batch.
  for (int i = 0; i < 2000 && store->writer_batches() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(store->writer_batches() >= 1);
  std::string msg = error_of(store->flush());
  CHECK_THAT(msg, Catch::Contains("FOREIGN KEY"));
  CHECK_THAT(msg, Catch::Contains("300 metric point(s) were not recorded"));
  CHECK(store->flush().ok());  // reported once
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics") == "0");
}

TEST_CASE("run store: log_metric waits while the writer is far behind, and loses nothing",
          "[store][writer]") {
  TempDir dir;
  auto store = open_ok(dir.file("runs.db"));
  store->set_busy_timeout_ms(60000);  // the writer waits for the lock below, not fails
  Result<int64_t> id = store->begin_run({.name = "behind"});
  REQUIRE(id.ok());
  // Another connection holds the write lock: the writer's batch waits, the queue fills.
  Result<Db> other = Db::open(store->path());
  REQUIRE(other.ok());
  REQUIRE(other->exec("BEGIN IMMEDIATE").ok());
  constexpr int64_t n = 1200000;
  std::atomic<int64_t> logged{0};
  std::thread logger([&] {
    for (int64_t i = 0; i < n; ++i) {
      store->log_metric("train/loss", i, static_cast<double>(i));
      logged = i + 1;
    }
  });
  // Wait until the logger stops advancing (up to 20 s): it waits for room in the queue.
  int64_t last = -1;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int64_t now = logged;
    if (now == last && now > 0) break;
    last = now;
  }
  const int64_t stalled_at = logged;
  REQUIRE(other->exec("ROLLBACK").ok());
  logger.join();
  CHECK(stalled_at >= (int64_t{1} << 20));  // about a million points queued
  CHECK(stalled_at < n);                    // then log_metric waited
  REQUIRE(store->flush().ok());
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics") == std::to_string(n));
  CHECK(query_text(store->path(), "SELECT count(*) FROM metrics WHERE value = step AND run_id = " +
                                      std::to_string(*id)) == std::to_string(n));
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(*id);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 1);
  CHECK((*sums)[0].count == n);
  CHECK((*sums)[0].latest_step == n - 1);
}

TEST_CASE("run store: a file that is not a database is refused and left unchanged", "[store]") {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::string junk;
  for (int i = 0; i < 200; ++i) junk += "line " + std::to_string(i) + ": not a database\n";
  write_bytes(path, junk);

  std::string msg = error_of(RunStore::open(path));
  CHECK(msg == path + ": not an mlstudio run database (file is not a database)");
  CHECK(read_bytes(path) == junk);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST_CASE("run store: another program's SQLite file is refused and left unchanged", "[store]") {
  TempDir dir;
  const std::string path = dir.file("other.db");
  exec_ok(path, "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT)");
  const std::string before = read_bytes(path);
  CHECK_THAT(error_of(RunStore::open(path)),
             Catch::Contains(path + ": not an mlstudio run database"));
  CHECK(read_bytes(path) == before);
}

TEST_CASE("run store: a newer schema version is refused", "[store]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  { open_ok(path); }
  exec_ok(path, "UPDATE meta SET value = '5' WHERE key = 'schema_version'");
  const std::string before = read_bytes(path);
  std::string msg = error_of(RunStore::open(path));
  CHECK_THAT(msg, Catch::StartsWith(path + ": "));
  CHECK_THAT(msg, Catch::Contains("schema version 5 is newer than this mlstudio supports (4)"));
  CHECK_THAT(error_of(RunStore::open_read_only(path)),
             Catch::Contains("schema version 5 is newer"));
  CHECK(read_bytes(path) == before);
  CHECK(query_text(path, "SELECT value FROM meta WHERE key = 'schema_version'") == "5");
}

TEST_CASE("run store: a missing directory is named in the error", "[store]") {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/runs.db");
  std::string msg = error_of(RunStore::open(path));
  CHECK_THAT(msg, Catch::StartsWith(path + ": "));
  CHECK_THAT(msg, Catch::Contains("does not exist"));
  CHECK_FALSE(std::filesystem::exists(dir.file("no")));
}

TEST_CASE("run store: a schema 1 file is upgraded in place, its runs kept", "[store]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  // What mlstudio wrote before runs had an owner.
  exec_ok(
      path,
      "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, "
      "project_path TEXT NOT NULL, project_hash TEXT NOT NULL, started TEXT NOT NULL, ended TEXT, "
      "status TEXT NOT NULL CHECK(status IN ('running','finished','failed','interrupted')), "
      "device TEXT NOT NULL, seed INTEGER NOT NULL, "
      "parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL);"
      "CREATE TABLE params(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
      "key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(run_id, key));"
      "CREATE TABLE metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
      "key TEXT NOT NULL, step INTEGER NOT NULL, value REAL, wall_time REAL NOT NULL);"
      "INSERT INTO meta VALUES('schema_version', '1');"
      "INSERT INTO runs(name, project_path, project_hash, started, status, device, seed) "
      "VALUES('old', 'p.mls', 'h', '2026-01-01T00:00:00.000Z', 'running', 'cpu', 7);");
  auto store = open_ok(path);
  CHECK(query_text(path, "SELECT value FROM meta WHERE key = 'schema_version'") == "4");
  auto old = store->get_run(1);
  REQUIRE(old.ok());
  CHECK(old->name == "old");
  CHECK(old->status == "running");  // no owner recorded: not known to be gone
  CHECK(old->owner.empty());
  auto id = store->begin_run({.name = "new"});
  REQUIRE(id.ok());
  CHECK_FALSE(store->get_run(*id)->owner.empty());
}

TEST_CASE("run store: a run whose process died is marked interrupted at the next open", "[store]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  { open_ok(path); }
  // A child process starts a run, logs, and dies without a word (as kill -9 leaves it).
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto s = RunStore::open(path);
    if (!s) std::_Exit(2);
    auto id = (*s)->begin_run({.name = "killed"});
    if (!id) std::_Exit(3);
    for (int64_t i = 1; i <= 5; ++i) (*s)->log_metric("loss", i, 1.0);
    if (!(*s)->flush()) std::_Exit(4);
    std::_Exit(0);  // no end_run, no destructor
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(query_text(path, "SELECT status FROM runs WHERE id = 1") == "running");
  // A reader changes nothing.
  {
    auto ro = RunStore::open_read_only(path);
    REQUIRE(ro.ok());
    CHECK((*ro)->closed_stale_runs().empty());
    CHECK((*ro)->get_run(1)->status == "running");
  }
  // This process's own running run is alive: it stays running.
  auto mine = open_ok(path);
  auto live = mine->begin_run({.name = "alive"});
  REQUIRE(live.ok());
  CHECK(mine->closed_stale_runs() == std::vector<int64_t>{1});
  CHECK(mine->get_run(1)->status == "interrupted");
  CHECK_FALSE(mine->get_run(1)->ended.empty());
  CHECK(mine->metrics(1, "loss")->size() == 5);  // what it logged is kept
  auto again = open_ok(path);
  CHECK(again->closed_stale_runs().empty());
  CHECK(again->get_run(*live)->status == "running");
}

TEST_CASE("run store: read-only opening never creates a file and refuses writes", "[store]") {
  TempDir dir;
  const std::string missing = dir.file("missing.db");
  std::string msg = error_of(RunStore::open_read_only(missing));
  CHECK_THAT(msg, Catch::StartsWith(missing + ": no run database here"));
  CHECK_FALSE(std::filesystem::exists(missing));
  const std::string path = dir.file("runs.db");
  {
    auto w = open_ok(path);
    auto id = w->begin_run({.name = "done"});
    REQUIRE(id.ok());
    REQUIRE(w->log_param(*id, "lr", "0.1").ok());
    w->log_metric("loss", 1, 0.25);
    REQUIRE(w->end_run(*id, "finished").ok());
  }
  const auto before = read_bytes(path);
  auto ro = RunStore::open_read_only(path);
  REQUIRE(ro.ok());
  CHECK((*ro)->read_only());
  CHECK((*ro)->list_runs()->size() == 1);
  CHECK((*ro)->params(1)->at(0).second == "0.1");
  CHECK((*ro)->metrics(1, "loss")->at(0).value == 0.25);
  CHECK_THAT(error_of((*ro)->begin_run({.name = "x"})), Catch::Contains("opened read-only"));
  CHECK_THAT(error_of((*ro)->end_run(1, "failed")), Catch::Contains("opened read-only"));
  (*ro)->log_metric("loss", 2, 1.0);
  CHECK_FALSE((*ro)->flush().ok());
  ro->reset();
  CHECK(read_bytes(path) == before);
  // A file that is not a run database is refused by readers too.
  write_bytes(dir.file("junk.db"), "not sqlite at all, just text");
  CHECK_THAT(error_of(RunStore::open_read_only(dir.file("junk.db"))),
             Catch::Contains("not an mlstudio run database"));
}

TEST_CASE("run store: a run keeps one snapshot of what it trained", "[store]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_ok(path);
  auto id = store->begin_run({.name = "a", .device = "cpu"});
  REQUIRE(id.ok());
  auto none = store->snapshot(*id);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(store->put_snapshot(*id, {"mls", "{\"format\": 1}\n"}).ok());
  REQUIRE(store->put_snapshot(*id, {"lua", "print(1)\n"}).ok());  // replaces
  auto s = store->snapshot(*id);
  REQUIRE(s.ok());
  REQUIRE(s->has_value());
  CHECK((*s)->kind == "lua");
  CHECK((*s)->text == "print(1)\n");
  CHECK(query_text(path, "SELECT count(*) FROM snapshots") == "1");
  CHECK_THAT(error_of(store->put_snapshot(*id + 7, {"lua", "x"})), Catch::Contains("no run"));
}

TEST_CASE("run store: a schema 2 file gains the snapshots table", "[store]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  {
    auto store = open_ok(path);
    REQUIRE(store->begin_run({.name = "old", .device = "cpu"}).ok());
  }
  exec_ok(path, "DROP TABLE snapshots; UPDATE meta SET value = '2' WHERE key = 'schema_version'");
  auto store = open_ok(path);
  CHECK(query_text(path, "SELECT value FROM meta WHERE key = 'schema_version'") == "4");
  REQUIRE(store->put_snapshot(1, {"mls", "{}"}).ok());
  CHECK(store->get_run(1)->name == "old");
}

}  // namespace
}  // namespace mls::store
