// Deleting a run with its files (runner/run_files.h): never a file another run lists.
#include "runner/run_files.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runner/checkpoints.h"
#include "store/run_store.h"
#include "tests/common/temp_dir.h"

namespace mls::runner {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  REQUIRE(f.good());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Fixture {
  mls::test::TempDir dir{"mls_runner"};
  std::string db = dir.file("runs.db");
  std::unique_ptr<store::RunStore> store;

  Fixture() {
    auto s = store::RunStore::open(db);
    REQUIRE(s.ok());
    store = std::move(*s);
  }
  int64_t finished_run(const std::string& name, std::optional<int64_t> parent = std::nullopt) {
    Result<int64_t> id = store->begin_run({.name = name, .parent_run_id = parent});
    REQUIRE(id.ok());
    store->log_metric("train/loss", 1, 0.5);
    REQUIRE(store->end_run(*id, "finished").ok());
    return *id;
  }
  // A checkpoint file in the run's folder, listed as the run's artifact.
  std::string checkpoint(int64_t run, const std::string& which, const std::string& bytes) {
    std::string path = checkpoint_path(db, run, which);
    write_file(path, bytes);
    Result<int64_t> a = store->add_artifact(run, "checkpoint", path, 1);
    INFO((a ? std::string() : a.error().message));
    REQUIRE(a.ok());
    return path;
  }
};

TEST_CASE("run files: deleting a parent leaves its fork's hard-linked checkpoint",
          "[runner][run_files]") {
  Fixture fx;
  const int64_t parent = fx.finished_run("parent");
  const std::string last = fx.checkpoint(parent, "last", "parent weights");
  const std::string best = fx.checkpoint(parent, "best", "parent best");
  write_file(fs::path(checkpoint_dir(fx.db, parent)) / ".last.ckpt.tmp-0123456789abcdef", "x");
  write_file(fx.dir.file("model.onnx"), "onnx bytes");
  REQUIRE(fx.store->add_artifact(parent, "onnx", "model.onnx").ok());

  // The fork hard-links the parent's checkpoint into its own folder, and lists that.
  const int64_t child = fx.finished_run("child", parent);
  const std::string child_ckpt = checkpoint_path(fx.db, child, "last");
  fs::create_directories(checkpoint_dir(fx.db, child));
  fs::create_hard_link(last, child_ckpt);
  REQUIRE(fx.store->add_artifact(child, "checkpoint", child_ckpt, 1).ok());

  Result<DeleteReport> r = delete_run(fx.db, parent);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->run_id == parent);
  CHECK(r->problems.empty());
  CHECK(r->kept.empty());
  CHECK(r->removed.size() == 4);  // last, best, the onnx file, the unfinished temporary
  CHECK_FALSE(fs::exists(last));
  CHECK_FALSE(fs::exists(best));
  CHECK_FALSE(fs::exists(fx.dir.file("model.onnx")));
  CHECK_FALSE(fs::exists(checkpoint_dir(fx.db, parent)));
  CHECK(r->removed_dir == fs::path(checkpoint_dir(fx.db, parent)).lexically_normal().string());
  CHECK(read_file(child_ckpt) == "parent weights");
  CHECK(fx.store->artifacts(child)->size() == 1);
  CHECK_FALSE(fx.store->get_run(child)->parent_run_id.has_value());
  CHECK_FALSE(fx.store->get_run(parent).ok());
}

TEST_CASE("run files: a file another run lists is never removed, nor its folder",
          "[runner][run_files]") {
  Fixture fx;
  const int64_t a = fx.finished_run("a");
  const std::string a_last = fx.checkpoint(a, "last", "a weights");
  const std::string a_best = fx.checkpoint(a, "best", "a best");
  const int64_t b = fx.finished_run("b");
  // b lists a's file itself (by a relative path, to the same file).
  const std::string rel = fs::relative(a_last, fx.dir.str()).string();
  REQUIRE(fx.store->add_artifact(b, "checkpoint", rel).ok());

  Result<DeleteReport> r = delete_run(fx.db, a);
  REQUIRE(r.ok());
  CHECK(fs::exists(a_last));
  CHECK_FALSE(fs::exists(a_best));
  CHECK(r->kept == std::vector<std::string>{fs::path(a_last).lexically_normal().string()});
  CHECK(r->removed_dir.empty());
  CHECK(fs::is_directory(checkpoint_dir(fx.db, a)));
  CHECK(fx.store->artifacts(b)->size() == 1);

  // A file that is not a checkpoint keeps the folder too.
  const int64_t c = fx.finished_run("c");
  fx.checkpoint(c, "last", "c");
  write_file(fs::path(checkpoint_dir(fx.db, c)) / "notes.txt", "mine");
  Result<DeleteReport> rc = delete_run(fx.db, c);
  REQUIRE(rc.ok());
  CHECK(fs::exists(fs::path(checkpoint_dir(fx.db, c)) / "notes.txt"));
  CHECK_FALSE(fs::exists(checkpoint_path(fx.db, c, "last")));
}

TEST_CASE("run files: a missing run or a run still training is refused, nothing removed",
          "[runner][run_files]") {
  Fixture fx;
  Result<int64_t> live = fx.store->begin_run({.name = "live"});
  REQUIRE(live.ok());
  const std::string ck = fx.checkpoint(*live, "last", "w");
  Result<DeleteReport> r = delete_run(fx.db, *live);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("still training"));
  CHECK(fs::exists(ck));
  Result<DeleteReport> none = delete_run(fx.db, 42);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("no run 42 in " + fx.db));
  // A run without a checkpoint folder deletes cleanly.
  const int64_t bare = fx.finished_run("bare");
  Result<DeleteReport> rb = delete_run(fx.db, bare);
  REQUIRE(rb.ok());
  CHECK(rb->removed.empty());
  CHECK(rb->removed_dir.empty());
}

}  // namespace
}  // namespace mls::runner

namespace mls::runner {
namespace {

TEST_CASE(
    "run files: a database that lists files outside its folder, or a folder linked elsewhere, "
    "removes neither",
    "[run_files]") {
  Fixture fx;
  mls::test::TempDir elsewhere{"mls_runner_elsewhere"};
  const std::string thesis = elsewhere.file("thesis.tex");
  write_file(thesis, "chapter 1");
  const int64_t a = fx.finished_run("hostile");
  // As a database from a stranger could say: the run's ONNX export is the user's thesis.
  REQUIRE(fx.store->add_artifact(a, "onnx", thesis).ok());
  // A file inside whose bytes changed after the run recorded it is not the run's either.
  const std::string ckpt = fx.checkpoint(a, "last", "state");
  write_file(ckpt, "a user's other file now");
  fx.store.reset();
  Result<DeleteReport> r = delete_run(fx.db, a);
  REQUIRE(r.ok());
  CHECK(read_file(thesis) == "chapter 1");
  CHECK(fs::exists(ckpt));
  bool outside = false, changed = false;
  for (const std::string& p : r->problems) {
    outside = outside || p.find("outside") != std::string::npos;
    changed = changed || p.find("bytes changed") != std::string::npos;
  }
  CHECK(outside);
  CHECK(changed);

  // The run's checkpoint folder replaced by a link to another folder: not descended into.
  auto s = store::RunStore::open(fx.db);
  REQUIRE(s.ok());
  Result<int64_t> b = (*s)->begin_run({.name = "linked"});
  REQUIRE(b.ok());
  REQUIRE((*s)->end_run(*b, "finished").ok());
  s->reset();
  const std::string victim = elsewhere.file("keep/best.ckpt");
  write_file(victim, "precious");
  fs::create_directories(fs::path(checkpoint_dir(fx.db, *b)).parent_path());
  fs::create_directory_symlink(fs::path(victim).parent_path(), checkpoint_dir(fx.db, *b));
  Result<DeleteReport> r2 = delete_run(fx.db, *b);
  REQUIRE(r2.ok());
  CHECK(read_file(victim) == "precious");
}

TEST_CASE(
    "run files: a checkpoints folder linked elsewhere, or a FIFO listed as an artifact, is "
    "neither followed nor read",
    "[run_files]") {
  Fixture fx;
  mls::test::TempDir elsewhere{"mls_runner_elsewhere2"};
  const int64_t a = fx.finished_run("linked parent");
  // The stranger's folder: runs.checkpoints is a link to the user's folder of other work,
  // whose run-1 holds the user's own checkpoints.
  const std::string run_folder = checkpoint_dir(fx.db, a);
  const fs::path checkpoints = fs::path(run_folder).parent_path();
  const std::string victim =
      elsewhere.file(fs::path(run_folder).filename().string() + "/best.ckpt");
  write_file(victim, "precious");
  fs::create_directory_symlink(elsewhere.str(), checkpoints);
  // And a FIFO inside the folder, listed as the run's export (as a stranger's database can
  // say: written here by hand): hashing it to compare its bytes would block forever.
  const std::string fifo = fx.dir.file("model.onnx");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fx.store.reset();
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(fx.db.c_str(), &raw) == SQLITE_OK);
  const std::string insert =
      "INSERT INTO artifacts(run_id, kind, path, hash, bytes, created) VALUES (" +
      std::to_string(a) + ", 'onnx', '" + fifo + "', '0123456789abcdef', 4, 'now')";
  CHECK(sqlite3_exec(raw, insert.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(raw);
  Result<DeleteReport> r = delete_run(fx.db, a);
  REQUIRE(r.ok());
  CHECK(read_file(victim) == "precious");
  CHECK(fs::exists(fs::symlink_status(fifo)));
}

}  // namespace
}  // namespace mls::runner
