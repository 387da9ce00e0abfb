// `mlstudio sweep` end to end: a sweep killed with kill -9 mid-way and resumed (no trial run
// twice from scratch, interrupted trials continued from their checkpoints, the database
// whole), median pruning, and --retry-failed re-running only the failed trials.
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_util.h"
#include "db_query.h"
#include "spirals_project.h"
#include "store/run_store.h"
#include "store/sqlite.h"

using namespace mls::e2e;
using json = nlohmann::json;

namespace {

struct TrialState {
  int64_t run_id = 0;
  int64_t attempts = 0;
  std::string status;  // the run's ("" none)
  std::string owner;
};

// Every trial of sweep 1 in `db`, read with SQL (what `runs` and the browser see). While the
// sweep starts (`polling`), a file without its tables yet reads as no trials.
std::map<int64_t, TrialState> trials(const std::string& db, bool polling = false) {
  std::map<int64_t, TrialState> out;
  auto d = mls::store::Db::open_read_only(db, false);
  if (polling && !d.ok()) return out;
  REQUIRE(d.ok());
  auto st = d->prepare(
      "SELECT t.trial, t.run_id, t.attempts, r.status, r.owner FROM sweep_trials t "
      "LEFT JOIN runs r ON r.id = t.run_id WHERE t.sweep_id = 1 ORDER BY t.trial");
  if (polling && !st.ok()) return out;
  REQUIRE(st.ok());
  auto scope = st->scoped();
  for (;;) {
    auto row = st->step();
    if (polling && !row.ok()) return {};
    REQUIRE(row.ok());
    if (!*row) break;
    out[st->column_int(0)] = {st->column_is_null(1) ? 0 : st->column_int(1), st->column_int(2),
                              st->column_text(3), st->column_text(4)};
  }
  return out;
}

fs::path last_checkpoint(const fs::path& db, int64_t run) {
  return db.parent_path() / (db.stem().string() + ".checkpoints") / ("run-" + std::to_string(run)) /
         "last.ckpt";
}

// The pid in a process owner "host/boot-id/pid/start-ticks".
pid_t owner_pid(const std::string& owner) {
  std::vector<std::string> parts;
  std::stringstream ss(owner);
  std::string part;
  while (std::getline(ss, part, '/')) parts.push_back(part);
  return parts.size() >= 4 ? static_cast<pid_t>(std::stol(parts[parts.size() - 2])) : 0;
}

}  // namespace

TEST_CASE(
    "sweep: kill -9 of the coordinator mid-way, then --resume: 8 trials finished, none "
    "run twice from scratch, the database whole",
    "[e2e][sweep]") {
  const std::string project = spirals_project("sweep_kill.mls", 12000, 14);
  const fs::path db = temp_dir() / "sweep_kill.db";
  const fs::path err = temp_dir() / "sweep_kill.err";
  const pid_t pid = spawn(
      {"sweep", project, "--param", "lr=1e-3:3e-2:log", "--param", "fc1.out_features=16,32",
       "--method", "random", "--trials", "8", "--workers", "2", "--seed", "5", "--db", db.string()},
      err);
  // Kill once at least two trials finished and every running trial has a checkpoint.
  std::map<int64_t, TrialState> before;
  bool killed = false;
  for (int i = 0; i < 1200 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!fs::exists(db)) continue;
    before = trials(db.string(), true);
    int finished = 0, running = 0, with_checkpoint = 0;
    for (const auto& [t, s] : before) {
      finished += s.status == "finished";
      if (s.status == "running") {
        ++running;
        with_checkpoint += fs::exists(last_checkpoint(db, s.run_id));
      }
    }
    if (finished >= 2 && running >= 1 && with_checkpoint == running) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  INFO(read_file(err.string()));
  REQUIRE(killed);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  // The workers die with their coordinator (PR_SET_PDEATHSIG).
  for (const auto& [t, s] : before) {
    if (s.status != "running") continue;
    const pid_t w = owner_pid(s.owner);
    REQUIRE(w > 0);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      gone = ::kill(w, 0) != 0;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(gone);
  }
  // The state at the kill, now that nothing runs: what finished, what was interrupted.
  before = trials(db.string());
  std::map<int64_t, int64_t> finished_runs, interrupted_runs;
  for (const auto& [t, s] : before) {
    if (s.status == "finished") finished_runs[t] = s.run_id;
    if (s.status == "running" || s.status == "interrupted") {
      REQUIRE(fs::exists(last_checkpoint(db, s.run_id)));
      interrupted_runs[t] = s.run_id;
    }
  }
  CHECK(finished_runs.size() >= 2);
  CHECK(interrupted_runs.size() >= 1);
  WARN("at the kill: " << finished_runs.size() << " trials finished, " << interrupted_runs.size()
                       << " interrupted with a checkpoint, "
                       << 8 - finished_runs.size() - interrupted_runs.size() << " not begun");

  // A second coordinator may not take over a sweep that still runs: this one is dead, so
  // the resume goes ahead.
  Output o = run("sweep --resume 1 --db " + db.string(), 120);
  INFO(o.err);
  INFO(o.out);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("8 trials: 8 finished") != std::string::npos);
  CHECK(o.err.find("continue from checkpoints") != std::string::npos);

  const std::map<int64_t, TrialState> after = trials(db.string());
  REQUIRE(after.size() == 8);
  for (const auto& [t, s] : after) {
    INFO("trial " << t);
    CHECK(s.status == "finished");
    CHECK(s.attempts == 1);  // none begun twice
  }
  for (const auto& [t, run] : finished_runs) CHECK(after.at(t).run_id == run);
  // Every trial trains on the same data with the same batch size: the same steps.
  const std::string reference = std::to_string(finished_runs.begin()->second);
  const int64_t steps =
      scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + reference +
                              " AND key = 'train/loss'");
  CHECK(steps >= 14);
  for (const auto& [t, run] : interrupted_runs) {
    INFO("trial " << t << ", run " << run);
    CHECK(after.at(t).run_id == run);  // continued, not started anew
    const std::string r = std::to_string(run);
    // Every step recorded once, and every epoch.
    CHECK(scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'train/loss'") == steps);
    CHECK(scalar(db.string(), "SELECT count(DISTINCT step) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'train/loss'") == steps);
    CHECK(scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " + r +
                                  " AND key = 'val/loss'") == 14);
  }
  CHECK(scalar(db.string(), "SELECT count(*) FROM runs") == 8);
  CHECK(text(db.string(), "SELECT status FROM sweeps WHERE id = 1") == "finished");
  CHECK(text(db.string(), "PRAGMA integrity_check") == "ok");
}

TEST_CASE("sweep: the median rule records the trials it stops as pruned", "[e2e][sweep]") {
  const std::string project = spirals_project("sweep_median.mls", 3000, 12);
  const fs::path db = temp_dir() / "sweep_median.db";
  // The good learning rates come first (two at once: neither has the two others the rule
  // needs); the three tiny ones trail the median from epoch 2.
  Output o = run("sweep " + project +
                     " --param lr=0.02,0.01,1e-6,2e-6,3e-6 --method grid --workers 2"
                     " --early-stop median --warmup 2 --min-trials 2 --db " +
                     db.string(),
                 120);
  INFO(o.err);
  INFO(o.out);
  REQUIRE(o.code == 0);
  const auto t = trials(db.string());
  REQUIRE(t.size() == 5);
  int pruned = 0;
  for (const auto& [trial, s] : t) {
    INFO("trial " << trial);
    CHECK((s.status == "finished" || s.status == "pruned"));
    if (s.status != "pruned") continue;
    ++pruned;
    CHECK(trial >= 2);  // only the tiny learning rates
    // Stopped before its 12 epochs.
    CHECK(scalar(db.string(), "SELECT count(*) FROM metrics WHERE run_id = " +
                                  std::to_string(s.run_id) + " AND key = 'val/loss'") < 12);
  }
  CHECK(pruned >= 1);
  CHECK(o.out.find(std::to_string(pruned) + " pruned") != std::string::npos);
  CHECK(o.err.find("is worse than the median") != std::string::npos);

  // --json: the same sweep read back as one line (a plain resume of a finished sweep runs
  // nothing and reports it).
  Output j = run("sweep --resume 1 --json -q --db " + db.string(), 60);
  INFO(j.err);
  REQUIRE(j.code == 0);
  const json report = json::parse(last_line(j.out));
  CHECK(report["sweep"] == 1);
  CHECK(report["counts"]["pruned"] == pruned);
  CHECK(report["counts"]["finished"] == 5 - pruned);
  REQUIRE(report["trials"].size() == 5);
  CHECK(report["best"]["status"] == "finished");
  CHECK(report["best"]["trial"].get<int64_t>() <= 1);
  CHECK(report["best"]["run_id"] == t.at(report["best"]["trial"].get<int64_t>()).run_id);
  // Best first: the finished trials' objectives ascend.
  CHECK(report["trials"][0]["objective"].get<double>() <=
        report["trials"][1]["objective"].get<double>());
}

TEST_CASE("sweep: --retry-failed runs only the failed trials again, afresh", "[e2e][sweep]") {
  // A CSV project; one trial reads a file that is not there yet.
  const fs::path dir = temp_dir() / "retry";
  fs::create_directories(dir);
  fs::copy_file(std::string(MLS_SOURCE_DIR) + "/resources/examples/data/houses.csv",
                dir / "houses.csv", fs::copy_options::overwrite_existing);
  json doc = json::parse(
      read_file(std::string(MLS_SOURCE_DIR) + "/resources/examples/house-prices-csv.mls"));
  doc["dataset"]["path"] = "houses.csv";
  doc["training"]["epochs"] = 3;
  std::ofstream(dir / "houses.mls") << doc.dump(1);
  const fs::path db = dir / "retry.db";
  Output o =
      run("sweep " + (dir / "houses.mls").string() +
              " --param dataset.path=houses.csv,later.csv --param lr=0.01,0.001 --method grid"
              " --workers 2 --db " +
              db.string(),
          120);
  INFO(o.err);
  INFO(o.out);
  REQUIRE(o.code == 0);  // every trial ended, two of them failed
  CHECK(o.out.find("4 trials: 2 finished, 2 failed") != std::string::npos);
  CHECK(o.err.find("later.csv") != std::string::npos);  // the reason, in the trial's line
  const auto first = trials(db.string());
  REQUIRE(first.size() == 4);
  for (int64_t t : {0, 1}) CHECK(first.at(t).status == "finished");
  for (int64_t t : {2, 3}) CHECK(first.at(t).status == "failed");
  // The failed runs keep why.
  CHECK(text(db.string(), "SELECT note FROM runs WHERE id = " + std::to_string(first.at(2).run_id))
            .find("later.csv") != std::string::npos);

  // A plain resume leaves failed trials failed.
  Output again = run("sweep --resume 1 --db " + db.string(), 60);
  INFO(again.err);
  CHECK(again.code == 0);
  CHECK(trials(db.string()).at(2).attempts == 1);

  fs::copy_file(dir / "houses.csv", dir / "later.csv");
  Output retry = run("sweep --resume 1 --retry-failed --db " + db.string(), 60);
  INFO(retry.err);
  INFO(retry.out);
  REQUIRE(retry.code == 0);
  CHECK(retry.out.find("4 trials: 4 finished") != std::string::npos);
  const auto second = trials(db.string());
  for (int64_t t : {0, 1}) {
    CHECK(second.at(t).run_id == first.at(t).run_id);  // not run again
    CHECK(second.at(t).attempts == 1);
  }
  for (int64_t t : {2, 3}) {
    CHECK(second.at(t).status == "finished");
    CHECK(second.at(t).run_id != first.at(t).run_id);  // a fresh run
    CHECK(second.at(t).attempts == 2);
  }
  CHECK(text(db.string(), "PRAGMA integrity_check") == "ok");
}

TEST_CASE("sweep: bad input exits 1 naming the param, and a live sweep is not resumed twice",
          "[e2e][sweep]") {
  const std::string project = spirals_project("sweep_bad.mls", 400, 1);
  const fs::path db = temp_dir() / "sweep_bad.db";
  Output o = run("sweep " + project + " --param lr=1e-3:x:log --db " + db.string(), 30);
  CHECK(o.code == 1);
  CHECK(o.err.find("--param 'lr=1e-3:x:log': 'x' is not a number") != std::string::npos);
  o = run("sweep " + project + " --param nosuchnode.width=1,2 --db " + db.string(), 30);
  CHECK(o.code == 1);
  CHECK(o.err.find("--param 'nosuchnode.width=1,2'") != std::string::npos);
  o = run("sweep " + project +
              " --param lr=0.1,0.2 --early-stop median --objective test/loss --db " + db.string(),
          30);
  CHECK(o.code == 1);
  CHECK(o.err.find("not recorded per epoch") != std::string::npos);
  CHECK_FALSE(fs::exists(db));  // refused before the database was made
  o = run("sweep --resume 7 --db " + db.string(), 30);
  CHECK(o.code == 1);
  CHECK(o.err.find("no sweep 7") != std::string::npos);

  // A sweep whose coordinator is alive is not taken over; Ctrl-C stops it with 130, its
  // trials interrupted, and it can be resumed.
  const std::string slow = spirals_project("sweep_slow.mls", 4000, 500);
  const fs::path live = temp_dir() / "sweep_live.db";
  const fs::path err = temp_dir() / "sweep_live.err";
  const pid_t pid = spawn({"sweep", slow, "--param", "lr=0.01,0.02", "--method", "grid",
                           "--workers", "2", "--db", live.string()},
                          err);
  bool started = false;
  for (int i = 0; i < 400 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!fs::exists(live)) continue;
    const auto t = trials(live.string(), true);
    started = t.size() == 2 && t.at(0).status == "running" && t.at(1).status == "running";
  }
  REQUIRE(started);
  o = run("sweep --resume 1 --db " + live.string(), 30);
  CHECK(o.code == 1);
  CHECK(o.err.find("is still running") != std::string::npos);
  ::kill(pid, SIGINT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO(read_file(err.string()));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(text(live.string(), "SELECT status FROM sweeps WHERE id = 1") == "interrupted");
  for (const auto& [t, s] : trials(live.string())) CHECK(s.status == "interrupted");
  CHECK(read_file(err.string()).find("sweep --resume 1") != std::string::npos);
}

TEST_CASE("sweep --resume: a stranger's spec asking for 100000 workers or -5 trials is refused",
          "[e2e][sweep]") {
  const std::string project = spirals_project("sweep_hostile.mls", 400, 1);
  struct Case {
    std::string field, value, says;
  };
  const Case cases[] = {{"trials", "-5", "trials -5"},
                        {"workers", "100000", "workers 100000"},
                        {"grid_points", "1000000000", "grid_points 1000000000"},
                        {"method", "\"bogus\"", "method 'bogus'"}};
  int i = 0;
  for (const Case& c : cases) {
    INFO(c.field);
    const fs::path db = temp_dir() / ("sweep_hostile" + std::to_string(i++) + ".db");
    nlohmann::json spec = {
        {"version", 1},     {"project", project}, {"params", {"lr=0.1,0.2"}},
        {"method", "grid"}, {"trials", 2},        {"workers", 1},
        {"grid_points", 3}, {"seed", 0},          {"fixed", nlohmann::json::array()},
        {"experiment", ""}};
    spec[c.field] = nlohmann::json::parse(c.value);
    {
      auto st = mls::store::RunStore::open(db.string());
      REQUIRE(st.ok());
      auto id = (*st)->create_sweep(
          {.name = "hostile", .project_path = project, .spec_json = spec.dump()});
      REQUIRE(id.ok());
      REQUIRE((*st)->end_sweep(*id, "interrupted").ok());
    }
    Output o = run("sweep --resume 1 --db " + db.string(), 30);
    INFO(o.out << o.err);
    CHECK(o.code == 1);
    CHECK(o.err.find(c.says) != std::string::npos);
    CHECK(o.err.find("sweep 1 in") != std::string::npos);
  }
}
