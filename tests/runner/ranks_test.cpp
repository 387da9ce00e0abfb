// A run session over a job's ranks (runner/ranks.h, RunOptions::collective), with the ranks as
// threads of this process (tests/engine/thread_collective.h): rank 0 alone records the run, the
// other ranks start from what it read, a rank that cannot start stops the job at once, and a
// resume on another number of ranks keeps the global batch. The MPI runs themselves are
// tests/e2e/mpi_run_test.cpp.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "../engine/blobs_source.h"
#include "../engine/graph_fixtures.h"
#include "../engine/thread_collective.h"
#include "engine/cpu/cpu_backend.h"
#include "runner/ranks.h"
#include "runner/run_session.h"
#include "store/run_store.h"

using namespace mls;
using namespace mls::runner;
namespace fs = std::filesystem;

TEST_CASE("ranks: rank r takes device (first + r) mod count of the kind asked for", "[ranks]") {
  CHECK(rank_device("cuda", 0, 2) == "cuda");
  CHECK(rank_device("cuda", 1, 2) == "cuda:1");
  CHECK(rank_device("cuda", 2, 2) == "cuda");
  CHECK(rank_device("cuda", 3, 2) == "cuda:1");
  CHECK(rank_device("cuda", 5, 4) == "cuda:1");
  CHECK(rank_device("vulkan:1", 0, 3) == "vulkan:1");
  CHECK(rank_device("vulkan:1", 1, 3) == "vulkan:2");
  CHECK(rank_device("vulkan:1", 2, 3) == "vulkan");
  // One device (or none listed), or the CPU: every rank keeps what was asked for.
  CHECK(rank_device("cuda", 1, 1) == "cuda");
  CHECK(rank_device("cuda:1", 3, 0) == "cuda:1");
  CHECK(rank_device("cpu", 1, 4) == "cpu");
  CHECK(rank_device("vulkan:x", 1, 4) == "vulkan:x");  // not a device: open() says why
}

TEST_CASE("ranks: a build without MPI names the launcher, the ranks and the way out", "[ranks]") {
  CHECK(no_mpi_message({.size = 2, .rank = 0, .launcher = "OpenMPI"}) ==
        "this mlstudio was built without MPI but OpenMPI launched it as one of 2 ranks: install "
        "libopenmpi-dev (scripts/setup) and rebuild, or run it without mpirun");
  CHECK(no_mpi_message({.size = 8, .rank = 3, .launcher = ""})
            .find("an MPI launcher launched it as one of 8 ranks") != std::string::npos);
}

namespace {

// Runs `body(rank)` on `n` threads, rank 0 on this one.
void on_ranks(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(body, r);
  body(0);
  for (std::thread& t : threads) t.join();
}

}  // namespace

TEST_CASE("ranks: rank 0's text reaches every rank, and a rank not ready is named", "[ranks]") {
  test::ThreadWorld world(3, 5.0);
  std::vector<std::string> got(3);
  std::vector<std::vector<int>> late(3);
  std::string big(100000, 'x');
  big[99999] = 'y';
  on_ranks(3, [&](int r) {
    auto t = share_text(world.rank(r), r == 0 ? big : "ignored");
    if (t) got[static_cast<size_t>(r)] = *t;
    auto l = ranks_not_ready(world.rank(r), r != 2);
    if (l) late[static_cast<size_t>(r)] = *l;
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(got[static_cast<size_t>(r)] == big);
    CHECK(late[static_cast<size_t>(r)] == std::vector<int>{2});
  }
  CHECK(rank_prefix(world.rank(1)) == "rank 1 (thread1): ");
  CHECK(hosts_text(world.rank(0)) == "thread0, thread1, thread2");
}

namespace {

// One rank's session on its own CPU backend: the 20 -> 32 -> 4 MLP on blobs.
struct RankRun {
  Result<RunOutcome> out = make_error("not run");
  std::vector<std::string> warnings, messages;
  std::vector<std::vector<float>> params;
  const Resumed* saw = nullptr;  // what the factory was given (non-null: a resume)
  bool had_resume = false;
};

struct Job {
  std::string db;
  int64_t batch = 32;
  int64_t epochs = 2;
  std::optional<int64_t> resume;
  int fail_rank = -1;  // this rank's factory fails
  bool nan_break = false;
};

std::vector<RankRun> run_job(int ranks, const Job& j) {
  test::ThreadWorld world(ranks, 5.0);
  std::vector<RankRun> runs(static_cast<size_t>(ranks));
  on_ranks(ranks, [&](int r) {
    RankRun& mine = runs[static_cast<size_t>(r)];
    cpu::CpuBackend be(1);
    test::Blobs data(1024, 20, 4, 5), test_data(256, 20, 4, 6);
    RunOptions o;
    o.db = j.db;
    o.resume = j.resume;
    o.breaks.nan = j.nan_break;
    if (ranks > 1) o.collective = &world.rank(r);
    RunEvents ev;
    ev.warning = [&](const std::string& w) { mine.warnings.push_back(w); };
    ev.message = [&](const std::string& m) { mine.messages.push_back(m); };
    mine.out = run_session(
        o,
        [&](const Resumed* was) -> Result<RunModel> {
          mine.had_resume = was != nullptr;
          if (r == j.fail_rank) return make_error("blobs.csv: no such file on this host");
          RunModel m;
          m.name = "blobs";
          m.source = "blobs.mls";
          m.backend = &be;
          m.builder = test::mlp_builder(20, {32}, 4);
          m.train = &data;
          m.test = &test_data;
          m.config.epochs = j.epochs;
          m.config.batch_size = j.batch;
          m.config.seed = 7;
          m.config.opt = {.type = "sgd", .lr = 0.1};
          m.mode = "static";
          m.epochs_asked = false;
          m.resume_command = "mlstudio --run blobs.mls --resume {id}";
          m.after = [&](Trainer& t, RunOutcome&) {
            for (const Tensor& p : t.params()) mine.params.push_back(p.to_f32());
          };
          return m;
        },
        ev);
  });
  return runs;
}

std::string fresh_db(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mls-ranks-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path db = dir / name;
  fs::remove(db);
  return db.string();
}

std::map<std::string, std::string> params_of(store::RunStore& s, int64_t run) {
  std::map<std::string, std::string> out;
  auto ps = s.params(run);
  REQUIRE(ps);
  for (const auto& [k, v] : *ps) out[k] = v;
  return out;
}

}  // namespace

TEST_CASE("ranks: rank 0 alone records the job's run, once, with its world size and hosts",
          "[ranks]") {
  const std::string db = fresh_db("two.db");
  auto runs = run_job(2, {.db = db});
  REQUIRE(runs[0].out);
  REQUIRE(runs[1].out);
  CHECK(runs[0].out->run_id == 1);
  CHECK(runs[0].out->status == "finished");
  CHECK(runs[1].out->status == "finished");
  CHECK(runs[0].out->result.world_size == 2);
  // Rank 0 speaks for the job; the other rank said nothing.
  REQUIRE_FALSE(runs[0].messages.empty());
  CHECK(runs[0].messages[0].find("batch 32 per rank (64 an update), sgd static on cpu") !=
        std::string::npos);
  CHECK(runs[0].messages[0].find("2 ranks on thread0, thread1") != std::string::npos);
  CHECK(runs[1].messages.empty());
  CHECK(runs[1].warnings.empty());
  // Both ranks end with the same parameters.
  REQUIRE(runs[0].params.size() == runs[1].params.size());
  for (size_t i = 0; i < runs[0].params.size(); ++i) CHECK(runs[0].params[i] == runs[1].params[i]);

  auto st = store::RunStore::open(db);
  REQUIRE(st);
  auto list = (*st)->list_runs();
  REQUIRE(list);
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].world_size == 2);
  CHECK((*list)[0].status == "finished");
  auto ps = params_of(**st, 1);
  CHECK(ps["world_size"] == "2");
  CHECK(ps["hosts"] == "thread0, thread1");
  CHECK(ps["global_batch_size"] == "64");
  CHECK(ps["batch_size"] == "32");
  // Each step's loss once: 1024 samples / 64 an update = 16 steps an epoch, 2 epochs.
  auto loss = (*st)->metrics(1, "train/loss");
  REQUIRE(loss);
  CHECK(loss->size() == 32);
  CHECK(runs[0].out->result.steps == 32);
  CHECK(fs::exists(runs[0].out->last_checkpoint));
}

TEST_CASE("ranks: a rank that cannot start stops the job before anything is recorded", "[ranks]") {
  const std::string db = fresh_db("fail.db");
  // At once: not in the first all-reduce, which would fail after the timeout naming rank 1 as
  // one that did not answer.
  auto runs = run_job(2, {.db = db, .fail_rank = 1});
  REQUIRE_FALSE(runs[0].out);
  REQUIRE_FALSE(runs[1].out);
  CHECK(runs[0].out.error().message ==
        "rank 1 (thread1) could not start the run (its own message says why)");
  CHECK(runs[1].out.error().message == "rank 1 (thread1): blobs.csv: no such file on this host");
  auto st = store::RunStore::open(db);
  REQUIRE(st);
  auto list = (*st)->list_runs();
  REQUIRE(list);
  CHECK(list->empty());

  // Rank 0 failing: the other rank is told, and says which rank stopped it.
  auto again = run_job(2, {.db = db, .resume = 41});
  REQUIRE_FALSE(again[0].out);
  CHECK(again[0].out.error().message.find("no run 41") != std::string::npos);
  REQUIRE_FALSE(again[1].out);
  CHECK(again[1].out.error().message ==
        "rank 1 (thread1): stopped: rank 0 could not start the run");

  // Breakpoints would pause one rank alone: refused on every rank, before the store is opened.
  fs::remove(db);
  auto armed = run_job(2, {.db = db, .nan_break = true});
  REQUIRE_FALSE(armed[0].out);
  CHECK(armed[0].out.error().message.find("breakpoints (--break) stop one process's run; a "
                                          "data-parallel job of 2 ranks cannot pause") == 0);
  REQUIRE_FALSE(armed[1].out);
  CHECK(armed[1].out.error().message.find("rank 1 (thread1): breakpoints") == 0);
  CHECK_FALSE(fs::exists(db));
}

TEST_CASE("ranks: a resume on another number of ranks keeps the global batch", "[ranks]") {
  const std::string db = fresh_db("resume.db");
  // Two ranks of 32 for one epoch of two...
  Job first{.db = db, .batch = 32, .epochs = 2};
  {
    test::ThreadWorld world(2, 5.0);
    std::vector<RankRun> runs(2);
    on_ranks(2, [&](int r) {
      cpu::CpuBackend be(1);
      test::Blobs data(1024, 20, 4, 5);
      RunOptions o;
      o.db = db;
      o.stop_after_epochs = 1;
      o.collective = &world.rank(r);
      runs[static_cast<size_t>(r)].out = run_session(o, [&](const Resumed*) -> Result<RunModel> {
        RunModel m;
        m.name = "blobs";
        m.source = "blobs.mls";
        m.backend = &be;
        m.builder = test::mlp_builder(20, {32}, 4);
        m.train = &data;
        m.config.epochs = 2;
        m.config.batch_size = 32;
        m.config.seed = 7;
        m.config.opt = {.type = "sgd", .lr = 0.1};
        m.mode = "static";
        return m;
      });
    });
    REQUIRE(runs[0].out);
    REQUIRE(runs[1].out);
    CHECK(runs[0].out->status == "interrupted");
    CHECK(runs[0].out->result.steps == 16);
  }
  // ...then one rank alone: 64 samples a step, the rest of the run's 32 steps.
  auto one = run_job(1, {.db = db, .batch = 32, .resume = 1});
  REQUIRE(one[0].out);
  CHECK(one[0].had_resume);
  CHECK(one[0].out->config.batch_size == 64);
  CHECK(one[0].out->result.steps == 32);
  CHECK(one[0].out->status == "finished");
  bool said = false;
  for (const std::string& m : one[0].messages)
    said = said ||
           m.find("each of 1 now takes 64, the same 64 samples an update") != std::string::npos;
  CHECK(said);
  auto st = store::RunStore::open(db);
  REQUIRE(st);
  auto ps = params_of(**st, 1);
  CHECK(ps["world_size"] == "1");
  CHECK(ps["global_batch_size"] == "64");
  auto loss = (*st)->metrics(1, "train/loss");
  REQUIRE(loss);
  CHECK(loss->size() == 32);

  // Three ranks cannot share 64 samples evenly: refused, naming the run and the batch.
  auto three = run_job(3, {.db = db, .batch = 32, .epochs = 3, .resume = 1});
  REQUIRE_FALSE(three[0].out);
  CHECK(three[0].out.error().message ==
        "run 1 trained with a global batch of 64 samples, which 3 ranks cannot share evenly: "
        "resume it on a number of ranks that divides 64");
}
