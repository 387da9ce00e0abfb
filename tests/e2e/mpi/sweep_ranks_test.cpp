// `mpirun -np 2 mlstudio sweep` (app/sweep_ranks.h): the trials shared between the ranks, every
// one recorded by rank 0 alone in the one database, each with its params, its metrics as a
// local sweep records them and its checkpoint beside the database; the database whole. kill -9
// of rank 1 mid-trial: mpirun stops the job, rank 0 records what it can, and `sweep --resume`
// under mpirun finishes every trial. Built only where MPI is found (tests/CMakeLists.txt).
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "mpi_util.h"
#include "../db_query.h"
#include "../spirals_project.h"
#include "store/run_store.h"
#include "store/sqlite.h"

using namespace mls::e2e;
using json = nlohmann::json;

namespace {

// The run of rank 1's trial once rank 0 has recorded its first epoch (0: none within 12 s).
int64_t running_on_rank1(const fs::path& db) {
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!fs::exists(db)) continue;
    auto d = mls::store::Db::open_read_only(db.string(), false);
    if (!d.ok()) continue;
    auto st = d->prepare(
        "SELECT r.id FROM runs r JOIN system_info s ON s.run_id = r.id AND s.key = 'sweep_rank' "
        "AND s.value = '1' WHERE r.status = 'running'");
    if (!st.ok()) continue;
    auto scope = st->scoped();
    auto row = st->step();
    if (row.ok() && *row) return st->column_int(0);
  }
  return 0;
}

}  // namespace

TEST_CASE(
    "sweep under mpirun -np 2: 4 trials shared by the ranks, recorded by rank 0 in one database",
    "[e2e][sweep][mpi]") {
  const std::string project = spirals_project("sweep_mpi.mls", 1500, 3);
  const fs::path db = temp_dir() / "sweep_mpi.db";
  Output o =
      run_mpi(2,
              "sweep " + project +
                  " --param lr=1e-3:3e-2:log --method random --trials 4 --seed 3 --json --db " +
                  db.string(),
              120);
  INFO(o.err);
  INFO(o.out);
  REQUIRE(o.code == 0);
  const json result = json::parse(last_line(o.out));
  CHECK(result["counts"]["finished"] == 4);
  CHECK(o.err.find("over 2 ranks") != std::string::npos);

  auto store = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(store.ok());
  auto sweeps = (*store)->list_sweeps();
  REQUIRE(sweeps.ok());
  REQUIRE(sweeps->size() == 1);
  CHECK((*sweeps)[0].status == "finished");
  auto trials = (*store)->trials((*sweeps)[0].id);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 4);
  auto runs = (*store)->list_runs();
  REQUIRE(runs.ok());
  CHECK(runs->size() == 4);  // one attempt each: nothing recorded twice

  std::map<std::string, int> by_rank;
  std::set<std::set<std::string>> key_sets;
  int64_t steps = -1;
  for (const mls::store::TrialInfo& t : *trials) {
    INFO("trial " << t.trial);
    REQUIRE(t.run_id);
    CHECK(t.attempts == 1);
    CHECK(t.run_status == "finished");
    auto info = (*store)->get_run(*t.run_id);
    REQUIRE(info.ok());
    CHECK(info->world_size == 1);  // each trial trained by one rank
    CHECK(info->owner.empty() == false);
    // Its params: the swept lr, as the trial drew it (recorded to 6 decimals, as every run
    // records its lr), and the checkpoint folder beside the db.
    const json drawn = json::parse(t.params_json);
    auto params = (*store)->params(*t.run_id);
    REQUIRE(params.ok());
    std::map<std::string, std::string> p(params->begin(), params->end());
    REQUIRE(p.count("lr"));
    CHECK(std::stod(p["lr"]) == Approx(drawn["lr"].get<double>()).margin(1e-6));
    CHECK(p["checkpoint_dir"].find((db.stem().string() + ".checkpoints")) != std::string::npos);
    // Which rank trained it.
    auto sys = (*store)->system_info(*t.run_id);
    REQUIRE(sys.ok());
    std::map<std::string, std::string> s(sys->begin(), sys->end());
    REQUIRE(s.count("sweep_rank"));
    ++by_rank[s["sweep_rank"]];
    CHECK(s.count("host"));
    // Its metrics: every step's loss once, every epoch's, the same keys whoever trained it.
    auto keys = (*store)->metric_keys(*t.run_id);
    REQUIRE(keys.ok());
    key_sets.insert(std::set<std::string>(keys->begin(), keys->end()));
    const std::string r = std::to_string(*t.run_id);
    const int64_t n = scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + r +
                                              " AND key = 'train/loss'");
    CHECK(n > 3);
    CHECK(scalar(db.string(), "SELECT count(DISTINCT step) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'train/loss'") == n);
    if (steps < 0) steps = n;
    CHECK(n == steps);  // same data, same batch: the same steps
    CHECK(scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'val/loss'") == 3);
    CHECK(scalar(db.string(), "SELECT count(*) FROM metric_summary WHERE run_id = " + r) ==
          static_cast<int64_t>(keys->size()));
    // Its checkpoint, beside rank 0's database, listed as the run's artifact.
    const fs::path last =
        db.parent_path() / (db.stem().string() + ".checkpoints") / ("run-" + r) / "last.ckpt";
    CHECK(fs::exists(last));
    auto arts = (*store)->artifacts(*t.run_id);
    REQUIRE(arts.ok());
    bool listed = false;
    for (const auto& a : *arts) listed |= fs::path(a.path) == last;
    CHECK(listed);
    auto snap = (*store)->snapshot(*t.run_id);
    REQUIRE(snap.ok());
    CHECK(snap->has_value());
  }
  INFO("trials by rank: rank 0 " << by_rank["0"] << ", rank 1 " << by_rank["1"]);
  CHECK(by_rank["0"] >= 1);
  CHECK(by_rank["1"] >= 1);
  CHECK(by_rank["0"] + by_rank["1"] == 4);
  CHECK(key_sets.size() == 1);
  CHECK(text(db.string(), "PRAGMA integrity_check") == "ok");
}

TEST_CASE(
    "sweep under mpirun -np 2: kill -9 of rank 1 mid-trial, then sweep --resume finishes every "
    "trial",
    "[e2e][sweep][mpi]") {
  // About a second a trial: rank 1 is killed once its trial's first epoch is recorded.
  const std::string project = spirals_project("sweep_mpi_kill.mls", 20000, 8);
  const fs::path db = temp_dir() / "sweep_mpi_kill.db";
  const std::string args = "sweep " + project +
                           " --param lr=1e-3:3e-2:log --method random --trials 3 --seed 4 --db " +
                           db.string();
  Job job = start_mpi(2, args, "sweep_mpi_kill");
  // The run rank 1 trains appears in rank 0's database after its first epoch.
  const int64_t on_rank1 = running_on_rank1(db);
  INFO(read_file(job.err.string()));
  REQUIRE(on_rank1 > 0);
  const pid_t rank1 = rank_pid(db.string(), 1);
  REQUIRE(rank1 > 0);
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  // mpirun ends the job (SIGTERM to rank 0 a second later, SIGKILL a second after that).
  const int code = job.wait(60);
  CHECK(code != 0);
  CHECK(code != -2);  // not hung

  // Rank 0 recorded rank 1's trial as interrupted, naming the rank, unless mpirun's SIGKILL
  // came first (then the next open closes it as interrupted).
  auto store = mls::store::RunStore::open(db.string());
  REQUIRE(store.ok());
  auto killed = (*store)->get_run(on_rank1);
  REQUIRE(killed.ok());
  CHECK(killed->status == "interrupted");
  if (!killed->note.empty()) CHECK(killed->note.find("rank 1") != std::string::npos);
  store->reset();

  Output o = run_mpi(2, "sweep --resume 1 --db " + db.string(), 120);
  INFO(o.err);
  INFO(o.out);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("3 trials: 3 finished") != std::string::npos);
  auto again = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(again.ok());
  auto trials = (*again)->trials(1);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 3);
  for (const auto& t : *trials) {
    INFO("trial " << t.trial);
    CHECK(t.run_status == "finished");
    const std::string r = std::to_string(*t.run_id);
    // Every step once, however many attempts it took.
    CHECK(scalar(db.string(),
                 "SELECT count(*) FROM metrics WHERE run_id = " + r + " AND key = 'train/loss'") ==
          scalar(db.string(), "SELECT count(DISTINCT step) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'train/loss'"));
    CHECK(scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'val/loss'") == 8);
  }
  CHECK(text(db.string(), "PRAGMA integrity_check") == "ok");
}

TEST_CASE(
    "sweep under mpirun -np 2 with survivors left alone: a dead rank's trial fails, naming it, and "
    "the sweep goes on",
    "[e2e][sweep][mpi]") {
  const std::string project = spirals_project("sweep_mpi_dead.mls", 20000, 8);
  const fs::path db = temp_dir() / "sweep_mpi_dead.db";
  // OpenMPI leaves the other ranks alone when one dies (`--mca orte_abort_on_non_zero_status
  // 0`, from the environment); the collective's timeout (3 s) finds it.
  ::setenv("OMPI_MCA_orte_abort_on_non_zero_status", "0", 1);
  Job job = start_mpi(2,
                      "--dist-timeout 3 sweep " + project +
                          " --param lr=1e-3:3e-2:log --method random --trials 3 --seed 4 --db " +
                          db.string(),
                      "sweep_mpi_dead");
  ::unsetenv("OMPI_MCA_orte_abort_on_non_zero_status");
  const int64_t on_rank1 = running_on_rank1(db);
  INFO(read_file(job.err.string()));
  REQUIRE(on_rank1 > 0);
  const pid_t rank1 = rank_pid(db.string(), 1);
  REQUIRE(rank1 > 0);
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  // The table is printed, then the job ends with MPI_Abort (the dead rank cannot finalise).
  const int code = job.wait(90);
  CHECK(code != -2);
  const std::string err = read_file(job.err.string());
  INFO(err);
  CHECK(err.find("rank 1 (") != std::string::npos);
  CHECK(read_file(job.out.string()).find("3 trials: 2 finished, 1 failed") != std::string::npos);

  auto store = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(store.ok());
  auto dead = (*store)->get_run(on_rank1);
  REQUIRE(dead.ok());
  CHECK(dead->status == "failed");
  CHECK(dead->note.find("rank 1 (") != std::string::npos);
  CHECK(dead->note.find("stopped answering") != std::string::npos);
  auto sweeps = (*store)->list_sweeps();
  REQUIRE(sweeps.ok());
  REQUIRE(sweeps->size() == 1);
  CHECK((*sweeps)[0].status == "finished");
  auto trials = (*store)->trials(1);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 3);
  int finished = 0;
  for (const auto& t : *trials) finished += t.run_status == "finished";
  CHECK(finished == 2);
  CHECK(text(db.string(), "PRAGMA integrity_check") == "ok");
}
