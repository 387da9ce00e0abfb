// Schema 4 of the run store (issue 28): the migration from version 3, the metric summaries
// kept at every flush, 'pruned', and a locked or corrupt file.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "engine/train/data_source.h"
#include "store/file_hash.h"
#include "store/process_owner.h"
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

TEST_CASE("run store 4: three processes opening a version-3 file at once upgrade it once",
          "[store][schema4][race]") {
  TempDir dir;
  for (int race = 0; race < 5; ++race) {
    const std::string path = dir.file("race-" + std::to_string(race) + ".db");
    exec_sql(path, kVersion3Sql);
    std::vector<pid_t> pids;
    for (int i = 0; i < 3; ++i) {
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        auto s = RunStore::open(path);
        if (!s) {
          std::fprintf(stderr, "%s\n", s.error().message.c_str());
          std::_Exit(1);
        }
        std::_Exit((*s)->begin_run({.name = "racer"}) ? 0 : 2);
      }
      pids.push_back(pid);
    }
    for (pid_t pid : pids) {
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    CHECK(rows_of(path, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
    CHECK(rows_of(path, "SELECT count(*) FROM runs") == std::vector<std::string>{"5"});
    CHECK(rows_of(path, "SELECT count(*) FROM metrics") == std::vector<std::string>{"10"});
    CHECK(rows_of(path, "SELECT sum(count) FROM metric_summary") == std::vector<std::string>{"10"});
  }
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
  REQUIRE(store->flush().ok());
  store->log_metric("train/loss", 1000, kNaN);  // the latest is a NaN, in a batch of its own
  // Steps out of order, with ties across batches: best_step is the smallest step reaching
  // the best, latest the largest step.
  store->log_metric("test/mae", 9, 0.2);
  store->log_metric("test/mae", 3, 0.2);
  REQUIRE(store->flush().ok());
  CHECK(store->metric_summaries(*run)->at(2).best_step == std::optional<int64_t>(3));
  store->log_metric("test/mae", 7, 0.1);
  REQUIRE(store->flush().ok());
  store->log_metric("test/mae", 2, 0.1);
  store->log_metric("test/mae", 8, 0.3);
  REQUIRE(store->flush().ok());
  check_summaries_match_points(*store, *run);
  Result<std::vector<MetricSummary>> mae = store->metric_summaries(*run);
  REQUIRE(mae.ok());
  REQUIRE(mae->size() == 5);
  CHECK((*mae)[2].key == "test/mae");
  CHECK((*mae)[2].best == std::optional<double>(0.1));
  CHECK((*mae)[2].best_step == std::optional<int64_t>(2));
  CHECK((*mae)[2].latest == 0.2);
  CHECK((*mae)[2].latest_step == 9);
  REQUIRE(store->flush().ok());
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(*run);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 5);
  sums->erase(sums->begin() + 2);  // test/mae, checked above
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
  REQUIRE(sums->size() == 5);  // test/mae's steps are all before 420
  CHECK((*sums)[3].key == "train/loss");
  CHECK((*sums)[3].latest_step == 420);
  CHECK((*sums)[3].count == 420 + 8);
  CHECK((*sums)[4].latest_step == 4);
  CHECK((*sums)[4].best == std::optional<double>(0.25));
  // Logging goes on after the resume, and the summary follows it.
  store->log_metric("val/loss", 5, 0.01);
  store->log_metric("train/loss", 421, 0.01);
  REQUIRE(store->flush().ok());
  check_summaries_match_points(*store, *run);
  CHECK(store->metric_summaries(*run)->at(4).best == std::optional<double>(0.01));
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

using Pairs = std::vector<std::pair<std::string, std::string>>;

int64_t count_of(const std::string& path, const std::string& sql) {
  std::vector<std::string> r = rows_of(path, sql);
  REQUIRE(r.size() == 1);
  return std::stoll(r[0]);
}

TEST_CASE("run store 4: experiments, tags, notes and system info round trip", "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_store(path);
  Result<int64_t> a = store->begin_run({.name = "a", .experiment = "mnist", .world_size = 4});
  Result<int64_t> b = store->begin_run({.name = "b", .experiment = "mnist"});
  Result<int64_t> c = store->begin_run({.name = "c"});
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(store->get_run(*a)->experiment == "mnist");
  CHECK(store->get_run(*a)->world_size == 4);
  CHECK(store->get_run(*b)->world_size == 1);
  CHECK(store->get_run(*c)->experiment == "Default");
  CHECK_THAT(error_of(store->begin_run({.name = "d", .world_size = 0})),
             Catch::Contains("world_size 0 is below 1"));
  Result<std::vector<ExperimentInfo>> ex = store->list_experiments();
  REQUIRE(ex.ok());
  REQUIRE(ex->size() == 2);
  CHECK((*ex)[0].name == "Default");
  CHECK((*ex)[0].runs == 1);
  CHECK((*ex)[1].name == "mnist");
  CHECK((*ex)[1].runs == 2);
  CHECK((*ex)[1].id == 2);

  REQUIRE(store->set_tag(*a, "keep").ok());
  REQUIRE(store->set_tag(*a, "owner", "ana").ok());
  REQUIRE(store->set_tag(*a, "owner", "bo").ok());  // replaced
  REQUIRE(store->set_tag(*b, "keep", "yes").ok());
  CHECK(*store->tags(*a) == Pairs{{"keep", ""}, {"owner", "bo"}});
  CHECK(*store->remove_tag(*a, "keep") == true);
  CHECK(*store->remove_tag(*a, "keep") == false);
  CHECK(*store->tags(*a) == Pairs{{"owner", "bo"}});
  CHECK(*store->tags(*b) == Pairs{{"keep", "yes"}});
  CHECK_THAT(error_of(store->set_tag(99, "x")), Catch::Contains("no run 99 in " + path));
  CHECK_THAT(error_of(store->set_tag(*a, "")), Catch::Contains("needs a name"));

  REQUIRE(store->set_note(*a, "lr too high; diverged at epoch 3").ok());
  CHECK(store->get_run(*a)->note == "lr too high; diverged at epoch 3");
  CHECK(store->get_run(*b)->note.empty());
  CHECK_THAT(error_of(store->set_note(99, "x")), Catch::Contains("no run 99"));

  REQUIRE(store->set_system_info(*a, {{"host", "h1"}, {"cores", "2"}, {"os", "Linux"}}).ok());
  REQUIRE(store->set_system_info(*a, {{"cores", "16"}}).ok());
  CHECK(*store->system_info(*a) == Pairs{{"cores", "16"}, {"host", "h1"}, {"os", "Linux"}});
  CHECK(store->system_info(*b)->empty());
  CHECK_THAT(error_of(store->set_system_info(99, {{"k", "v"}})), Catch::Contains("no run 99"));
  CHECK(count_of(path, "SELECT count(*) FROM system_info") == 3);  // the failed call left none
}

TEST_CASE("run store 4: artifacts keep their hash and size, shared paths are found",
          "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_store(path);
  Result<int64_t> a = store->begin_run({.name = "a"});
  Result<int64_t> b = store->begin_run({.name = "b"});
  REQUIRE((a.ok() && b.ok()));
  std::filesystem::create_directories(dir.file("ck"));
  write_bytes(dir.file("ck/last.ckpt"), "first weights");
  Result<int64_t> id = store->add_artifact(*a, "checkpoint", "ck/last.ckpt", 3);  // relative
  INFO((id ? std::string() : id.error().message));
  REQUIRE(id.ok());
  Result<std::vector<ArtifactInfo>> list = store->artifacts(*a);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].id == *id);
  CHECK((*list)[0].path == "ck/last.ckpt");
  CHECK((*list)[0].kind == "checkpoint");
  CHECK((*list)[0].hash == *file_hash_hex(dir.file("ck/last.ckpt")));
  CHECK((*list)[0].bytes == 13);
  CHECK((*list)[0].step == std::optional<int64_t>(3));
  CHECK_FALSE((*list)[0].created.empty());

  // Written again after the next epoch: the same row, updated.
  write_bytes(dir.file("ck/last.ckpt"), "second weights!");
  Result<int64_t> again = store->add_artifact(*a, "checkpoint", "ck/last.ckpt", 4);
  REQUIRE(again.ok());
  CHECK(*again == *id);
  list = store->artifacts(*a);
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].bytes == 15);
  CHECK((*list)[0].step == std::optional<int64_t>(4));
  CHECK((*list)[0].hash == *file_hash_hex(dir.file("ck/last.ckpt")));

  write_bytes(dir.file("model.onnx"), "onnx");
  REQUIRE(store->add_artifact(*a, "onnx", dir.file("model.onnx")).ok());
  CHECK_FALSE(store->artifacts(*a)->at(1).step.has_value());
  CHECK_THAT(error_of(store->add_artifact(*a, "weights", dir.file("model.onnx"))),
             Catch::Contains("not one of checkpoint, onnx, trace, notebook, other"));
  CHECK_THAT(error_of(store->add_artifact(*a, "other", "missing.bin")),
             Catch::Contains(dir.file("missing.bin")));
  CHECK_THAT(error_of(store->add_artifact(99, "other", dir.file("model.onnx"))),
             Catch::Contains("no run 99"));

  // Only run a lists ck/last.ckpt; once b lists the same file by its absolute path, it is
  // shared from a's point of view (and from b's).
  CHECK_FALSE(*store->artifact_shared("ck/last.ckpt", *a));
  CHECK(*store->artifact_shared(dir.file("ck/last.ckpt"), *b));
  REQUIRE(store->add_artifact(*b, "checkpoint", dir.file("ck/../ck/last.ckpt")).ok());
  CHECK(*store->artifact_shared("ck/last.ckpt", *a));
  CHECK(*store->artifact_shared("ck/last.ckpt", *b));
  CHECK_FALSE(*store->artifact_shared(dir.file("model.onnx"), *a));
}

TEST_CASE("run store 4: sweeps, trials and their attempts", "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_store(path);
  Result<int64_t> sw = store->create_sweep(
      {.experiment = "lr-search", .name = "s1", .project_path = "p.mls", .spec_json = "{\"n\":3}"});
  REQUIRE(sw.ok());
  Result<SweepInfo> info = store->get_sweep(*sw);
  REQUIRE(info.ok());
  CHECK(info->experiment == "lr-search");
  CHECK(info->name == "s1");
  CHECK(info->project_path == "p.mls");
  CHECK(info->spec_json == "{\"n\":3}");
  CHECK(info->status == "running");
  CHECK(info->owner == this_process());
  CHECK(info->ended.empty());
  CHECK_THAT(error_of(store->get_sweep(*sw + 1)),
             Catch::Contains("no sweep " + std::to_string(*sw + 1)));

  for (int64_t t = 0; t < 3; ++t)
    REQUIRE(store->add_trial(*sw, t, "{\"lr\": " + std::to_string(t) + "}").ok());
  CHECK_THAT(error_of(store->add_trial(*sw, 1, "{}")), Catch::Contains("already has trial 1"));
  CHECK_THAT(error_of(store->add_trial(99, 0, "{}")), Catch::Contains("no sweep 99"));

  Result<int64_t> r0 = store->begin_run({.name = "t0", .sweep_id = *sw, .trial = 0});
  REQUIRE(r0.ok());
  CHECK(store->get_run(*r0)->sweep_id == std::optional<int64_t>(*sw));
  CHECK(store->get_run(*r0)->trial == std::optional<int64_t>(0));
  REQUIRE(store->end_run(*r0, "failed").ok());
  Result<int64_t> r0b = store->begin_run({.name = "t0 again", .sweep_id = *sw, .trial = 0});
  REQUIRE(r0b.ok());
  REQUIRE(store->end_run(*r0b, "finished").ok());
  Result<int64_t> r1 = store->begin_run({.name = "t1", .sweep_id = *sw, .trial = 1});
  REQUIRE(r1.ok());
  REQUIRE(store->end_run(*r1, "pruned").ok());
  // A trial that was never added: refused, and no run row is left behind.
  const int64_t runs_before = count_of(path, "SELECT count(*) FROM runs");
  CHECK_THAT(error_of(store->begin_run({.name = "t7", .sweep_id = *sw, .trial = 7})),
             Catch::Contains("has no trial 7"));
  CHECK(count_of(path, "SELECT count(*) FROM runs") == runs_before);
  CHECK_THAT(error_of(store->begin_run({.name = "half", .sweep_id = *sw})),
             Catch::Contains("both sweep_id and trial"));

  Result<std::vector<TrialInfo>> trials = store->trials(*sw);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 3);
  CHECK((*trials)[0].params_json == "{\"lr\": 0}");
  CHECK((*trials)[0].run_id == std::optional<int64_t>(*r0b));
  CHECK((*trials)[0].attempts == 2);
  CHECK((*trials)[0].run_status == "finished");
  CHECK((*trials)[1].run_status == "pruned");
  CHECK((*trials)[1].attempts == 1);
  CHECK_FALSE((*trials)[2].run_id.has_value());
  CHECK((*trials)[2].attempts == 0);
  CHECK((*trials)[2].run_status.empty());

  REQUIRE(store->end_sweep(*sw, "interrupted").ok());
  CHECK(store->get_sweep(*sw)->status == "interrupted");
  CHECK_FALSE(store->get_sweep(*sw)->ended.empty());
  CHECK_THAT(error_of(store->end_sweep(*sw, "done")), Catch::Contains("not one of"));
  REQUIRE(store->reopen_sweep(*sw).ok());
  CHECK(store->get_sweep(*sw)->status == "running");
  CHECK(store->get_sweep(*sw)->ended.empty());
  CHECK_THAT(error_of(store->reopen_sweep(99)), Catch::Contains("no sweep 99"));

  // A sweep whose process is gone (same host and boot, another start time): readers see it
  // interrupted at once; the next writer's open records that.
  std::string me = this_process();
  std::string dead = me.substr(0, me.rfind('/') + 1) + "1";
  exec_sql(path, "UPDATE sweeps SET owner = '" + dead + "'");
  CHECK(store->get_sweep(*sw)->status == "interrupted");
  CHECK(store->list_sweeps()->at(0).status == "interrupted");
  CHECK(rows_of(path, "SELECT status FROM sweeps") == std::vector<std::string>{"running"});
  { auto writer = open_store(path); }
  CHECK(rows_of(path, "SELECT status FROM sweeps") == std::vector<std::string>{"interrupted"});
  REQUIRE(store->set_sweep_owner(*sw).ok());
  CHECK(store->get_sweep(*sw)->owner == me);
  REQUIRE(store->end_sweep(*sw, "finished").ok());
  CHECK(store->get_sweep(*sw)->status == "finished");
}

TEST_CASE("run store 4: a fork copies its parent's curve up to the fork point",
          "[store][schema4]") {
  TempDir dir;
  auto store = open_store(dir.file("runs.db"));
  Result<int64_t> parent = store->begin_run({.name = "parent"});
  REQUIRE(parent.ok());
  for (int64_t s = 1; s <= 10; ++s) store->log_metric("train/loss", s, 1.0 / s);
  for (int64_t e = 1; e <= 5; ++e) store->log_metric("val/accuracy", e, 0.1 * e);
  REQUIRE(store->end_run(*parent, "finished").ok());
  Result<int64_t> child =
      store->begin_run({.name = "child", .parent_run_id = *parent, .fork_step = 6});
  REQUIRE(child.ok());
  REQUIRE(store->copy_metrics(*parent, *child, 6, 3).ok());
  CHECK(store->get_run(*child)->fork_step == std::optional<int64_t>(6));
  CHECK(store->metrics(*child, "train/loss")->size() == 6);
  CHECK(store->metrics(*child, "val/accuracy")->size() == 3);
  check_summaries_match_points(*store, *child);
  Result<std::vector<MetricSummary>> sums = store->metric_summaries(*child);
  REQUIRE(sums.ok());
  CHECK((*sums)[0].best == std::optional<double>(1.0 / 6));
  CHECK((*sums)[1].best == std::optional<double>(0.1 * 3));
  // The child goes on from there.
  store->log_metric("train/loss", 7, 0.01);
  REQUIRE(store->flush().ok());
  check_summaries_match_points(*store, *child);
  CHECK(store->metrics(*parent, "train/loss")->size() == 10);  // the parent is untouched
  check_summaries_match_points(*store, *parent);
  CHECK_THAT(error_of(store->copy_metrics(99, *child, 1, 1)), Catch::Contains("no run 99"));
  CHECK_THAT(error_of(store->copy_metrics(*parent, 99, 1, 1)), Catch::Contains("no run 99"));
}

TEST_CASE("run store 4: deleting a run removes its rows and leaves the others whole",
          "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  auto store = open_store(path);
  Result<int64_t> sw = store->create_sweep({.name = "s"});
  REQUIRE(sw.ok());
  REQUIRE(store->add_trial(*sw, 0, "{}").ok());
  write_bytes(dir.file("a.ckpt"), "a");
  write_bytes(dir.file("b.ckpt"), "b");
  std::vector<int64_t> ids;
  for (const char* name : {"victim", "other"}) {
    Result<int64_t> id =
        store->begin_run({.name = name,
                          .sweep_id = ids.empty() ? std::optional<int64_t>(*sw) : std::nullopt,
                          .trial = ids.empty() ? std::optional<int64_t>(0) : std::nullopt});
    REQUIRE(id.ok());
    ids.push_back(*id);
    REQUIRE(store->log_param(*id, "lr", "0.1").ok());
    for (int64_t s = 1; s <= 50; ++s) store->log_metric("train/loss", s, 1.0 / s);
    REQUIRE(store->set_tag(*id, "keep").ok());
    REQUIRE(store->set_system_info(*id, {{"host", "h"}}).ok());
    REQUIRE(store->put_snapshot(*id, {"mls", "{}"}).ok());
    REQUIRE(store->add_artifact(*id, "checkpoint", ids.size() == 1 ? "a.ckpt" : "b.ckpt").ok());
    REQUIRE(store->end_run(*id, "finished").ok());
  }
  Result<int64_t> child = store->begin_run({.name = "child", .parent_run_id = ids[0]});
  REQUIRE(child.ok());
  REQUIRE(store->end_run(*child, "finished").ok());

  const char* tables[] = {"params",    "metrics",     "metric_summary", "tags",
                          "artifacts", "system_info", "snapshots"};
  std::vector<int64_t> others;
  for (const char* t : tables)
    others.push_back(count_of(path, std::string("SELECT count(*) FROM ") + t +
                                        " WHERE run_id = " + std::to_string(ids[1])));

  // A running run of a live process is refused.
  Result<int64_t> live = store->begin_run({.name = "live"});
  REQUIRE(live.ok());
  CHECK_THAT(error_of(store->delete_run(*live)), Catch::Contains("still training"));

  Result<std::vector<std::string>> paths = store->delete_run(ids[0]);
  REQUIRE(paths.ok());
  CHECK(*paths == std::vector<std::string>{"a.ckpt"});
  CHECK_THAT(error_of(store->get_run(ids[0])), Catch::Contains("no run"));
  for (size_t i = 0; i < std::size(tables); ++i) {
    INFO(tables[i]);
    CHECK(count_of(path, std::string("SELECT count(*) FROM ") + tables[i] +
                             " WHERE run_id = " + std::to_string(ids[0])) == 0);
    CHECK(count_of(path, std::string("SELECT count(*) FROM ") + tables[i] +
                             " WHERE run_id = " + std::to_string(ids[1])) == others[i]);
    CHECK(others[i] > 0);
  }
  CHECK_FALSE(store->get_run(*child)->parent_run_id.has_value());
  Result<std::vector<TrialInfo>> trials = store->trials(*sw);
  REQUIRE(trials.ok());
  CHECK_FALSE(trials->at(0).run_id.has_value());
  CHECK(trials->at(0).attempts == 1);
  CHECK(store->metrics(ids[1], "train/loss")->size() == 50);
  CHECK(std::filesystem::exists(dir.file("a.ckpt")));  // files are run_files.h's business
  CHECK(rows_of(path, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
  CHECK_THAT(error_of(store->delete_run(ids[0])), Catch::Contains("no run"));
}

TEST_CASE("run store 4: a read-only store does every new read and refuses every write",
          "[store][schema4]") {
  TempDir dir;
  const std::string path = dir.file("runs.db");
  int64_t run = 0, sweep = 0;
  {
    auto w = open_store(path);
    sweep = *w->create_sweep({.name = "s"});
    REQUIRE(w->add_trial(sweep, 0, "{\"lr\":1}").ok());
    run = *w->begin_run({.name = "r", .experiment = "e", .sweep_id = sweep, .trial = 0});
    w->log_metric("val/accuracy", 1, 0.5);
    REQUIRE(w->set_tag(run, "t", "v").ok());
    REQUIRE(w->set_note(run, "n").ok());
    REQUIRE(w->set_system_info(run, {{"os", "Linux"}}).ok());
    write_bytes(dir.file("x.onnx"), "x");
    REQUIRE(w->add_artifact(run, "onnx", "x.onnx").ok());
    REQUIRE(w->end_run(run, "finished").ok());
  }
  const std::string before = read_bytes(path);
  Result<std::unique_ptr<RunStore>> opened = RunStore::open_read_only(path);
  REQUIRE(opened.ok());
  RunStore& ro = **opened;
  CHECK(ro.get_run(run)->note == "n");
  CHECK(ro.metric_summaries(run)->at(0).best == std::optional<double>(0.5));
  CHECK(*ro.tags(run) == Pairs{{"t", "v"}});
  CHECK(*ro.system_info(run) == Pairs{{"os", "Linux"}});
  CHECK(ro.list_experiments()->size() == 2);
  CHECK(ro.artifacts(run)->at(0).path == "x.onnx");
  CHECK_FALSE(*ro.artifact_shared("x.onnx", run));
  CHECK(ro.get_sweep(sweep)->name == "s");
  CHECK(ro.list_sweeps()->size() == 1);
  CHECK(ro.trials(sweep)->at(0).run_id == std::optional<int64_t>(run));
  const std::string refused = "opened read-only";
  CHECK_THAT(error_of(ro.set_tag(run, "a")), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.remove_tag(run, "t")), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.set_note(run, "x")), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.set_system_info(run, {})), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.add_artifact(run, "onnx", "x.onnx")), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.copy_metrics(run, run, 1, 1)), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.delete_run(run)), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.create_sweep({})), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.end_sweep(sweep, "failed")), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.reopen_sweep(sweep)), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.set_sweep_owner(sweep)), Catch::Contains(refused));
  CHECK_THAT(error_of(ro.add_trial(sweep, 1, "{}")), Catch::Contains(refused));
  opened->reset();
  CHECK(read_bytes(path) == before);
}

}  // namespace
}  // namespace mls::store
