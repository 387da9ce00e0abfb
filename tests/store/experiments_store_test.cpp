// Schema 4 of the run store (issue 28): the migration from version 3, the metric summaries
// kept at every flush, 'pruned', and a locked or corrupt file.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "engine/train/data_source.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "tests/store/fixtures.h"

namespace mls::store {
namespace {

using test::error_of;
using test::read_bytes;
using test::TempDir;
using test::write_bytes;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::unique_ptr<RunStore> open_store(const std::string& path) {
  Result<std::unique_ptr<RunStore>> s = RunStore::open(path);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return std::move(*s);
}

// Every row of a query, columns joined by '|', from a fresh connection.
std::vector<std::string> rows_of(const std::string& path, const std::string& sql) {
  Result<Db> db = Db::open(path);
  REQUIRE(db.ok());
  Result<Stmt> st = db->prepare(sql);
  INFO((st ? std::string() : st.error().message));
  REQUIRE(st.ok());
  auto scope = st->scoped();
  std::vector<std::string> out;
  for (;;) {
    Result<bool> row = st->step();
    REQUIRE(row.ok());
    if (!*row) return out;
    std::string line;
    for (int i = 0; i < st->column_count(); ++i) {
      if (i) line += "|";
      line += st->column_text(i);
    }
    out.push_back(line);
  }
}

void exec_sql(const std::string& path, const std::string& sql) {
  Result<Db> db = Db::open(path);
  REQUIRE(db.ok());
  Result<void> r = db->exec(sql);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

// What a summary must be, computed from the points as metrics() returns them (by step, then
// logging order), without the store's code.
MetricSummary expected_summary(const std::string& key, const std::vector<MetricPoint>& pts) {
  MetricSummary m;
  m.key = key;
  m.count = static_cast<int64_t>(pts.size());
  if (pts.empty()) return m;
  m.latest = pts.back().value;
  m.latest_step = pts.back().step;
  bool higher = metric_higher_is_better(key);
  for (const MetricPoint& p : pts) {
    if (std::isnan(p.value)) continue;
    if (!m.min || p.value < *m.min) m.min = p.value;
    if (!m.max || p.value > *m.max) m.max = p.value;
  }
  m.best = higher ? m.max : m.min;
  for (const MetricPoint& p : pts) {
    if (m.best && p.value == *m.best) {
      m.best_step = p.step;  // the first step (in step order) that reached it
      break;
    }
  }
  return m;
}

void check_summaries_match_points(RunStore& store, int64_t run) {
  Result<std::vector<MetricSummary>> sums = store.metric_summaries(run);
  REQUIRE(sums.ok());
  Result<std::vector<std::string>> keys = store.metric_keys(run);
  REQUIRE(keys.ok());
  REQUIRE(sums->size() == keys->size());
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string& key = (*keys)[i];
    INFO("run " << run << " key " << key);
    Result<std::vector<MetricPoint>> pts = store.metrics(run, key);
    REQUIRE(pts.ok());
    MetricSummary want = expected_summary(key, *pts);
    const MetricSummary& got = (*sums)[i];
    CHECK(got.key == key);
    CHECK(got.count == want.count);
    CHECK(got.latest_step == want.latest_step);
    if (std::isnan(want.latest)) {
      CHECK(std::isnan(got.latest));
    } else {
      CHECK(got.latest == want.latest);
    }
    CHECK(got.min == want.min);
    CHECK(got.max == want.max);
    CHECK(got.best == want.best);
    CHECK(got.best_step == want.best_step);
  }
}

// The version-3 layout, as mlstudio wrote it before issue 28.
constexpr const char* kVersion3Sql = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, project_path TEXT NOT NULL,
  project_hash TEXT NOT NULL, started TEXT NOT NULL, ended TEXT,
  status TEXT NOT NULL CHECK(status IN ('running','finished','failed','interrupted')),
  device TEXT NOT NULL, seed INTEGER NOT NULL,
  parent_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL, owner TEXT);
CREATE TABLE params(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(run_id, key));
CREATE TABLE metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL, step INTEGER NOT NULL, value REAL, wall_time REAL NOT NULL);
CREATE INDEX metrics_run_key_step ON metrics(run_id, key, step);
CREATE TABLE snapshots(run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL, text TEXT NOT NULL);
INSERT INTO meta VALUES('schema_version', '3');
INSERT INTO runs(name, project_path, project_hash, started, ended, status, device, seed, owner)
  VALUES('base', 'a.mls', 'aaaa', '2026-01-01T00:00:00.000Z', '2026-01-01T00:10:00.000Z',
         'finished', 'cpu', 7, 'host/boot/1/2');
INSERT INTO runs(name, project_path, project_hash, started, ended, status, device, seed,
                 parent_run_id, owner)
  VALUES('child', 'a.mls', 'aaaa', '2026-01-02T00:00:00.000Z', NULL, 'interrupted', 'cuda:0',
         8, 1, NULL);
INSERT INTO runs(name, project_path, project_hash, started, status, device, seed)
  VALUES('gone', 'b.mls', 'bbbb', '2026-01-03T00:00:00.000Z', 'failed', 'cpu', 9);
DELETE FROM runs WHERE id = 3;
INSERT INTO params VALUES(1, 'lr', '0.01'), (1, 'epochs', '3'), (2, 'lr', '0.02');
INSERT INTO metrics VALUES
  (1, 'train/loss', 1, 2.0, 100.0), (1, 'train/loss', 2, 1.5, 101.0),
  (1, 'train/loss', 3, NULL, 102.0), (1, 'train/loss', 4, 0.5, 103.0),
  (1, 'train/loss', 4, 0.75, 104.0),
  (1, 'val/accuracy', 1, 0.5, 100.5), (1, 'val/accuracy', 2, 0.9, 101.5),
  (1, 'val/accuracy', 3, 0.9, 102.5), (1, 'val/accuracy', 4, 0.8, 103.5),
  (2, 'train/loss', 1, 3.0, 200.0);
INSERT INTO snapshots VALUES(1, 'mls', '{"version": 1}');
)sql";

TEST_CASE("run store 4: a version-3 file is upgraded in place, every row kept",
          "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  exec_sql(path, kVersion3Sql);
  auto store = open_store(path);

  CHECK(rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") ==
        std::vector<std::string>{"4"});
  CHECK(rows_of(path, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
  CHECK(rows_of(path, "PRAGMA foreign_key_check").empty());
  CHECK(rows_of(path, "SELECT id, name FROM experiments") == std::vector<std::string>{"1|Default"});

  Result<std::vector<RunInfo>> runs = store->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  const RunInfo& base = (*runs)[0];
  CHECK(base.id == 1);
  CHECK(base.name == "base");
  CHECK(base.project_hash == "aaaa");
  CHECK(base.started == "2026-01-01T00:00:00.000Z");
  CHECK(base.ended == "2026-01-01T00:10:00.000Z");
  CHECK(base.status == "finished");
  CHECK(base.seed == 7);
  CHECK(base.owner == "host/boot/1/2");
  CHECK(base.experiment == "Default");
  CHECK(base.world_size == 1);
  CHECK_FALSE(base.fork_step.has_value());
  CHECK_FALSE(base.sweep_id.has_value());
  CHECK(base.note.empty());
  const RunInfo& child = (*runs)[1];
  CHECK(child.id == 2);
  CHECK(child.device == "cuda:0");
  CHECK(child.status == "interrupted");
  CHECK(child.parent_run_id == std::optional<int64_t>(1));
  CHECK(child.owner.empty());

  using Pairs = std::vector<std::pair<std::string, std::string>>;
  CHECK(*store->params(1) == Pairs{{"epochs", "3"}, {"lr", "0.01"}});
  CHECK(*store->params(2) == Pairs{{"lr", "0.02"}});
  Result<std::vector<MetricPoint>> loss = store->metrics(1, "train/loss");
  REQUIRE(loss.ok());
  REQUIRE(loss->size() == 5);
  CHECK(std::isnan((*loss)[2].value));
  CHECK((*loss)[4].value == 0.75);
  CHECK((*loss)[4].wall_time == 104.0);
  Result<std::optional<Snapshot>> snap = store->snapshot(1);
  REQUIRE(snap.ok());
  REQUIRE(snap->has_value());
  CHECK((*snap)->text == "{\"version\": 1}");

  // The summaries computed from the points present.
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(1);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 2);
  const MetricSummary& l = (*sums)[0];
  CHECK(l.key == "train/loss");
  CHECK(l.count == 5);
  CHECK(l.latest == 0.75);  // step 4 twice: the one logged last
  CHECK(l.latest_step == 4);
  CHECK(l.min == std::optional<double>(0.5));
  CHECK(l.max == std::optional<double>(2.0));
  CHECK(l.best == std::optional<double>(0.5));
  CHECK(l.best_step == std::optional<int64_t>(4));
  const MetricSummary& a = (*sums)[1];
  CHECK(a.key == "val/accuracy");
  CHECK(a.best == std::optional<double>(0.9));  // accuracy: higher is better
  CHECK(a.best_step == std::optional<int64_t>(2));
  CHECK(a.latest == 0.8);
  check_summaries_match_points(*store, 1);
  check_summaries_match_points(*store, 2);

  // An id is never reused: run 3 was deleted before the upgrade.
  Result<int64_t> next = store->begin_run({.name = "new"});
  REQUIRE(next.ok());
  CHECK(*next == 4);
  // The new CHECK: 'pruned' is a status now.
  REQUIRE(store->end_run(*next, "pruned").ok());
  CHECK(store->get_run(*next)->status == "pruned");
  CHECK_THAT(error_of(store->end_run(*next, "paused")), Catch::Contains("pruned"));
  // Foreign keys are on again after the upgrade: deleting run 1 clears its child's parent.
  exec_sql(path, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE id = 1");
  CHECK(rows_of(path, "SELECT count(*) FROM metric_summary WHERE run_id = 1") ==
        std::vector<std::string>{"0"});
  CHECK_FALSE(store->get_run(2)->parent_run_id.has_value());
}

TEST_CASE("run store 4: a read-only opening upgrades an older file it can write",
          "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  exec_sql(path, kVersion3Sql);
  Result<std::unique_ptr<RunStore>> ro = RunStore::open_read_only(path);
  INFO((ro ? std::string() : ro.error().message));
  REQUIRE(ro.ok());
  CHECK((*ro)->get_run(2)->experiment == "Default");
  CHECK((*ro)->metric_summaries(1)->size() == 2);
  CHECK(rows_of(path, "SELECT value FROM meta WHERE key = 'schema_version'") ==
        std::vector<std::string>{"4"});
}

TEST_CASE("run store 4: summaries equal what the points give, flush after flush",
          "[store][schema4]") {
  TempDir dir;
  auto store = open_store(dir.file("runs.db"));
  Result<int64_t> run = store->begin_run({.name = "s"});
  REQUIRE(run.ok());
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // 1,000 steps of four keys, flushed in uneven batches; NaNs, repeated steps and ties.
  for (int64_t step = 1; step <= 1000; ++step) {
    double loss = 3.0 / static_cast<double>(step) + 0.1 + 0.1 * u(rng);
    if (step % 97 == 0) loss = kNaN;
    store->log_metric("train/loss", step, loss);
    store->log_metric("test/accuracy", step, std::round(u(rng) * 20) / 20);  // many ties
    if (step % 50 == 0) store->log_metric("train/loss", step, 0.05);         // a step logged twice
    if (step % 100 == 0) {
      int64_t epoch = step / 100;
      store->log_metric("val/loss", epoch, 1.0 / static_cast<double>(epoch));
      store->log_metric("epoch/samples_per_s", epoch, 1000.0 + u(rng));
    }
    if (step % 333 == 0) REQUIRE(store->flush().ok());
  }
  store->log_metric("train/loss", 1000, kNaN);  // the latest is a NaN
  REQUIRE(store->flush().ok());
  check_summaries_match_points(*store, *run);
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(*run);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 4);
  CHECK((*sums)[0].key == "epoch/samples_per_s");
  CHECK((*sums)[0].best == (*sums)[0].max);  // throughput: higher is better
  CHECK((*sums)[1].key == "test/accuracy");
  CHECK((*sums)[1].best == (*sums)[1].max);
  CHECK((*sums)[2].key == "train/loss");
  CHECK(std::isnan((*sums)[2].latest));
  CHECK((*sums)[2].latest_step == 1000);
  CHECK((*sums)[2].count == 1000 + 20 + 1);
  CHECK((*sums)[2].best == std::optional<double>(0.05));
  CHECK((*sums)[2].best_step == std::optional<int64_t>(50));
  CHECK((*sums)[3].key == "val/loss");
  CHECK((*sums)[3].best == std::optional<double>(0.1));
  CHECK((*sums)[3].best_step == std::optional<int64_t>(10));
  CHECK((*sums)[3].latest_step == 10);

  // A resume drops what the lost attempt logged past its checkpoint (step 420, epoch 4):
  // the summaries are those of the points that remain.
  REQUIRE(store->end_run(*run, "interrupted").ok());
  REQUIRE(store->resume_run(*run, {.step = 420, .epoch = 4}).ok());
  check_summaries_match_points(*store, *run);
  sums = store->metric_summaries(*run);
  REQUIRE(sums.ok());
  CHECK((*sums)[2].latest_step == 420);
  CHECK((*sums)[2].count == 420 + 8);
  CHECK((*sums)[3].latest_step == 4);
  CHECK((*sums)[3].best == std::optional<double>(0.25));
  // Logging goes on after the resume, and the summary follows it.
  store->log_metric("val/loss", 5, 0.01);
  store->log_metric("train/loss", 421, 0.01);
  REQUIRE(store->flush().ok());
  check_summaries_match_points(*store, *run);
  CHECK(store->metric_summaries(*run)->at(3).best == std::optional<double>(0.01));
}

TEST_CASE("run store 4: which way a metric improves", "[store][schema4]") {
  for (const char* k :
       {"test/accuracy", "val/accuracy", "val/macro_f1", "val/r2", "test/auc", "val/precision",
        "val/recall", "epoch/samples_per_s", "epoch/top5_accuracy", "accuracy"})
    CHECK(metric_higher_is_better(k));
  for (const char* k : {"train/loss", "val/loss", "val/rmse", "val/mae", "epoch/seconds",
                        "epoch/lr", "epoch/train_loss", "loss", "epoch/data_wait_fraction"})
    CHECK_FALSE(metric_higher_is_better(k));
}

TEST_CASE("run store 4: a locked database names the file and loses no run", "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_store(path);
  Result<int64_t> first = store->begin_run({.name = "kept"});
  REQUIRE(first.ok());
  store->log_metric("train/loss", 1, 0.5);
  REQUIRE(store->end_run(*first, "finished").ok());

  // Another connection holds a write transaction.
  Result<Db> other = Db::open(path);
  REQUIRE(other.ok());
  REQUIRE(other->exec("BEGIN IMMEDIATE; INSERT INTO params VALUES(1, 'x', 'y')").ok());
  store->set_busy_timeout_ms(100);
  std::string msg = error_of(store->begin_run({.name = "blocked"}));
  CHECK_THAT(msg, Catch::StartsWith(path + ": "));
  CHECK_THAT(msg, Catch::Contains("locked"));
  // A second store still opens (reading needs no write lock) and reads the finished run.
  auto reader = open_store(path);
  CHECK(reader->get_run(*first)->status == "finished");
  REQUIRE(other->exec("ROLLBACK").ok());

  Result<int64_t> after = store->begin_run({.name = "after"});
  REQUIRE(after.ok());
  CHECK(*after == *first + 1);
  CHECK(store->list_runs()->size() == 2);
  CHECK(store->metrics(*first, "train/loss")->size() == 1);
  CHECK(rows_of(path, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
}

TEST_CASE("run store 4: a corrupt file is refused by name", "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  {
    auto store = open_store(path);
    REQUIRE(store->begin_run({.name = "r"}).ok());
  }
  exec_sql(path, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() > 8192);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5 ^ (i * 7));
  write_bytes(path, bytes);
  std::string msg = error_of(RunStore::open(path));
  CHECK_THAT(msg, Catch::StartsWith(path + ": "));
  CHECK_THAT(msg, Catch::Contains("run database is corrupt"));
  CHECK(read_bytes(path) == bytes);
  CHECK_THAT(error_of(RunStore::open_read_only(path)), Catch::StartsWith(path + ": "));
}

}  // namespace
}  // namespace mls::store
