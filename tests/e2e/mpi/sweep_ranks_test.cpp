// `mpirun -np 2 mlstudio sweep` (app/sweep_ranks.h): the trials shared between the ranks, every
// one recorded by rank 0 alone in the one database, each with its params, its metrics as a
// local sweep records them and its checkpoint beside the database; the database whole. Built
// only where MPI is found (tests/CMakeLists.txt).
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "../cli_util.h"
#include "store/run_store.h"
#include "store/sqlite.h"

using namespace mls::e2e;
using json = nlohmann::json;

namespace {

// The two-spirals example, small: a few tens of milliseconds an epoch.
std::string small_spirals(const std::string& name, int64_t samples, int64_t epochs) {
  json doc = json::parse(
      read_file(std::string(MLS_SOURCE_DIR) + "/resources/examples/two-spirals-mlp.mls"));
  doc["dataset"]["synthetic"]["samples"] = samples;
  doc["dataset"]["validation"] = 0.2;
  doc["training"]["epochs"] = epochs;
  const fs::path p = temp_dir() / name;
  std::ofstream(p) << doc.dump(1);
  return p.string();
}

// `mpirun -np N` as the tests run it: --oversubscribe (2 ranks on fewer cores), and
// --allow-run-as-root where the tests run as root (OpenMPI refuses root without it).
std::string mpirun(int ranks) {
  return std::string(MLS_MPIEXEC) + " -np " + std::to_string(ranks) + " --oversubscribe" +
         (::getuid() == 0 ? " --allow-run-as-root" : "");
}

Output run_mpi(int ranks, const std::string& args, int kill_after_s) {
  fs::path err = temp_dir() / "mpi_stderr.txt";
  const std::string cmd = "timeout -s KILL " + std::to_string(kill_after_s) + " " + mpirun(ranks) +
                          " " + MLS_EXE + " " + args + " 2>" + err.string();
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = read_file(err.string());
  return o;
}

int64_t scalar(const std::string& db, const std::string& sql) {
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

std::string text(const std::string& db, const std::string& sql) {
  auto d = mls::store::Db::open(db);
  REQUIRE(d.ok());
  auto st = d->prepare(sql);
  REQUIRE(st.ok());
  auto scope = st->scoped();
  auto row = st->step();
  REQUIRE(row.ok());
  return *row ? st->column_text(0) : "(no row)";
}

}  // namespace

TEST_CASE(
    "sweep under mpirun -np 2: 4 trials shared by the ranks, recorded by rank 0 in one database",
    "[e2e][sweep][mpi]") {
  const std::string project = small_spirals("sweep_mpi.mls", 1500, 3);
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
