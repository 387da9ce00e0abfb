// `mlstudio sweep`: the coordinator. It records the sweep and its trials, keeps K worker
// processes busy (each `mlstudio --run ... --sweep-trial S:T`, its JSON line read back through
// a pipe, as the grader reads its children), and prints a line per ended trial and the table.
//
// [SECTION] the spec: what `sweep --resume` rebuilds the sweep from
// [SECTION] workers (app/child_process.h: fork, exec, pipes)
// [SECTION] the coordinator
// [SECTION] the command and its options
#include "app/sweep_command.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/child_process.h"
#include "app/commands.h"
#include "app/sweep_ranks.h"
#include "app/text_out.h"
#include "engine/train/data_source.h"
#include "nodes/setting_path.h"
#include "runner/checkpoints.h"
#include "runner/pruner.h"
#include "runner/ranks.h"
#include "runner/sweep_space.h"
#include "runner/sweep_transfer.h"
#include "store/process_owner.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// [SECTION] the spec: what `sweep --resume` rebuilds the sweep from

struct Spec {
  std::string project;              // absolute
  std::vector<std::string> params;  // the --param texts
  std::string method = "random";
  int64_t trials = 0;  // how many in all
  int64_t workers = 1;
  int64_t grid_points = 3;
  uint64_t seed = 0;
  runner::PruneRule rule;          // its objective and direction are the sweep's
  std::vector<std::string> fixed;  // KEY=VALUE for every trial (the overrides, as --set)
  std::string experiment;

  json to_json() const {
    return {{"version", 1},
            {"project", project},
            {"params", params},
            {"method", method},
            {"trials", trials},
            {"workers", workers},
            {"grid_points", grid_points},
            {"seed", seed},
            {"early_stop", rule.to_json()},
            {"objective", rule.objective},
            {"maximize", rule.maximize},
            {"fixed", fixed},
            {"experiment", experiment}};
  }

  static Result<Spec> from_json(const std::string& text, const std::string& where) {
    const json j = json::parse(text, nullptr, false);
    if (!j.is_object() || j.value("version", 0) != 1)
      return make_error(where + ": its spec is not a version-1 sweep spec");
    Spec s;
    try {
      s.project = j.at("project").get<std::string>();
      s.params = j.at("params").get<std::vector<std::string>>();
      s.method = j.at("method").get<std::string>();
      s.trials = j.at("trials").get<int64_t>();
      s.workers = j.at("workers").get<int64_t>();
      s.grid_points = j.at("grid_points").get<int64_t>();
      s.seed = j.at("seed").get<uint64_t>();
      s.fixed = j.at("fixed").get<std::vector<std::string>>();
      s.experiment = j.value("experiment", "");
    } catch (const json::exception& e) {
      return make_error(where + ": its spec lacks a field (" + std::string(e.what()) + ")");
    }
    // The bounds the command line holds --trials, --workers, --grid-points and --method to: a
    // stranger's database may ask for 100000 worker processes.
    auto bad = [&](const std::string& what, const std::string& range) {
      return make_error(where + ": its spec asks for " + what + " (" + range + ")");
    };
    if (s.trials < 0 || s.trials > 1000000)
      return bad("trials " + std::to_string(s.trials), "0..1000000");
    if (s.workers < 1 || s.workers > 256)
      return bad("workers " + std::to_string(s.workers), "1..256");
    if (s.grid_points < 1 || s.grid_points > 1000)
      return bad("grid_points " + std::to_string(s.grid_points), "1..1000");
    if (s.method != "grid" && s.method != "random" && s.method != "tpe")
      return bad("method '" + s.method + "'", "grid, random or tpe");
    auto rule = runner::PruneRule::from_json(j.value("early_stop", json::object()));
    if (!rule) return make_error(where + ": " + rule.error().message);
    s.rule = *rule;
    return s;
  }
};

// [SECTION] workers (app/child_process.h: fork, exec, pipes)

std::atomic<int> g_stop{0};
std::atomic<bool> g_stopped{false};  // the same, for a collective's waits (sweep_stop_flag)
extern "C" void on_sweep_signal(int sig) {
  g_stop.store(sig);
  g_stopped.store(true);
}

struct Job {
  int64_t trial = 0;
  json params;
  std::optional<int64_t> resume_run;  // continue this run from its checkpoint
};

struct Worker {
  ChildProcess proc;
  Job job;
  // The trial's latest attempt before this worker started: a run recorded by the worker
  // changes it (a resumed one keeps it).
  std::optional<int64_t> run_before;
  int64_t attempts_before = 0;
};

std::string without_prefix(std::string line) {
  if (line.rfind("mlstudio: ", 0) == 0) line.erase(0, 10);
  if (line.rfind("error: ", 0) == 0) line.erase(0, 7);
  return line;
}

// [SECTION] the coordinator

std::string num(double v) {
  if (std::isnan(v)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

struct TrialRow {
  int64_t trial = 0;
  json params;
  std::optional<int64_t> run_id;
  int64_t attempts = 0;
  std::string status;  // the run's, "pending" without one
  double value = std::nan("");
};

class Coordinator {
 public:
  Coordinator(store::RunStore& store, int64_t sweep, Spec spec,
              std::vector<runner::SweepParam> space, std::vector<json> grid, bool quiet,
              Collective* job = nullptr)
      : store_(store),
        sweep_(sweep),
        spec_(std::move(spec)),
        space_(std::move(space)),
        grid_(std::move(grid)),
        quiet_(quiet),
        exe_(self_exe()),
        job_(job) {
    if (job_) {
      // Under MPI: the other ranks train trials too, and rank 0's worker must not take
      // itself for a rank of the job.
      ranks_ = std::make_unique<RankTrials>(*job_, store_.path(), sweep_, spec_.rule, &g_stopped);
      env_ = environment_without_launcher();
    }
  }

  // Ranks found dead during the sweep (their trials failed).
  std::vector<int> dead_ranks() const { return ranks_ ? ranks_->dead() : std::vector<int>{}; }

  // The trials that must run (a resume's); new trials follow up to spec.trials.
  void queue(Job j) { queue_.push_back(std::move(j)); }
  void set_next_trial(int64_t n) { next_trial_ = n; }

  // Runs every job; false when stopped by a signal.
  Result<bool> run() {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Under MPI rank 0 trains one trial at a time beside coordinating, and shares its host's
    // cores with the ranks there; a local sweep's K workers share them.
    const int64_t local = ranks_ ? 1 : spec_.workers;
    const int64_t sharing = ranks_ ? ranks_on_my_host(*job_) : spec_.workers;
    threads_ = std::max<int64_t>(1, cores / std::max<int64_t>(1, sharing));
    bool forwarded = false;
    for (;;) {
      const bool stopping = g_stop.load() != 0;
      while (!stopping && static_cast<int64_t>(workers_.size()) < local) {
        auto job = next_job(false);
        if (!job) return job.error();
        if (!*job) break;
        if (auto r = start(std::move(**job)); !r) return r.error();
      }
      // The ranks that asked for a trial get one, or are let go.
      while (ranks_) {
        const std::optional<int> rank = ranks_->idle_rank();
        if (!rank) break;
        std::optional<Job> job;
        if (!stopping) {
          auto j = next_job(true);
          if (!j) return j.error();
          job = std::move(*j);
        }
        if (!job) {
          ranks_->release(*rank);
          continue;
        }
        if (auto r = hand_out(*rank, std::move(*job)); !r) return r.error();
      }
      const bool remote = ranks_ && ranks_->busy() > 0;
      if (workers_.empty() && !remote) break;
      if (stopping && !forwarded) {
        // The workers stop after their current step, keep their checkpoints, and record
        // their runs as interrupted (a terminal's Ctrl-C reached them too); the ranks' runs
        // end after their epoch.
        for (const Worker& w : workers_) ::kill(w.proc.pid(), SIGINT);
        if (ranks_) ranks_->interrupt();
        forwarded = true;
      }
      if (remote) {
        // A training rank speaks at least every second: the worker beside is reaped after.
        auto ended = ranks_->wait();
        if (!ended) return ended.error();
        for (const RankEnded& e : *ended)
          if (auto r = finish_on_rank(e); !r) return r.error();
      } else {
        std::vector<pollfd> fds;
        for (const Worker& w : workers_)
          for (int fd : w.proc.fds()) fds.push_back({fd, POLLIN, 0});
        if (!fds.empty())
          ::poll(fds.data(), fds.size(), 200);
        else
          ::usleep(50 * 1000);
      }
      for (size_t i = 0; i < workers_.size();) {
        const std::optional<int> status = workers_[i].proc.reap();
        if (!status) {
          ++i;
          continue;
        }
        Worker ended = std::move(workers_[i]);
        workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));
        if (auto r = finish(ended, *status); !r) return r.error();
      }
    }
    return g_stop.load() == 0;
  }

  // Every trial as the store has it, with its objective.
  Result<std::vector<TrialRow>> rows() {
    auto trials = store_.trials(sweep_);
    if (!trials) return trials.error();
    std::vector<TrialRow> out;
    for (const store::TrialInfo& t : *trials) {
      TrialRow r;
      r.trial = t.trial;
      r.params = json::parse(t.params_json, nullptr, false);
      r.run_id = t.run_id;
      r.attempts = t.attempts;
      r.status = t.run_id ? t.run_status : "pending";
      if (t.run_id) {
        auto v = objective_of(*t.run_id);
        if (!v) return v.error();
        r.value = *v;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  // Lower is better; NaN last.
  bool better(double a, double b) const {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return spec_.rule.maximize ? a > b : a < b;
  }

 private:
  // The objective's last recorded value (NaN when none).
  Result<double> objective_of(int64_t run_id) {
    auto sums = store_.metric_summaries(run_id);
    if (!sums) return sums.error();
    for (const store::MetricSummary& s : *sums)
      if (s.key == spec_.rule.objective) return s.latest;
    return std::nan("");
  }

  // The next trial to run; `fresh`: not one that continues from a checkpoint (another rank
  // cannot read rank 0's checkpoints).
  Result<std::optional<Job>> next_job(bool fresh) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (fresh && it->resume_run) continue;
      Job j = std::move(*it);
      queue_.erase(it);
      return std::optional<Job>(std::move(j));
    }
    if (next_trial_ >= spec_.trials) return std::optional<Job>{};
    Job j;
    j.trial = next_trial_++;
    if (spec_.method == "grid") {
      j.params = grid_[static_cast<size_t>(j.trial)];
    } else if (spec_.method == "random") {
      j.params = runner::random_trial(space_, spec_.seed, j.trial);
    } else {
      // TPE asks now, with every trial that has ended.
      auto all = rows();
      if (!all) return all.error();
      std::vector<runner::Observation> ended;
      for (const TrialRow& r : *all)
        if (r.status == "finished" || r.status == "pruned")
          ended.push_back(
              {r.params, spec_.rule.maximize ? -r.value : r.value, r.status == "pruned"});
      j.params = runner::tpe_trial(space_, ended, spec_.seed, j.trial);
    }
    if (auto r = store_.add_trial(sweep_, j.trial, j.params.dump()); !r) return r.error();
    return std::optional<Job>(std::move(j));
  }

  std::vector<std::string> args_for(const Job& j) const {
    std::vector<std::string> a = {
        "--run",         spec_.project,
        "--db",          store_.path(),
        "--quiet",       "--json",
        "--threads",     std::to_string(threads_),
        "--sweep-trial", std::to_string(sweep_) + ":" + std::to_string(j.trial)};
    if (j.resume_run) {
      // The recorded settings (the --set list, the limits) come back with the run.
      a.insert(a.end(), {"--resume", std::to_string(*j.resume_run)});
      return a;
    }
    if (!spec_.experiment.empty()) a.insert(a.end(), {"--experiment", spec_.experiment});
    for (const std::string& s : spec_.fixed) a.insert(a.end(), {"--set", s});
    for (const runner::SweepParam& p : space_)
      if (j.params.contains(p.name))
        a.insert(a.end(), {"--set", runner::sweep_setting(p.name, j.params[p.name])});
    return a;
  }

  Result<void> start(Job j) {
    auto trials = store_.trials(sweep_);
    if (!trials) return trials.error();
    std::optional<int64_t> run_before;
    int64_t attempts_before = 0;
    for (const store::TrialInfo& t : *trials)
      if (t.trial == j.trial) run_before = t.run_id, attempts_before = t.attempts;
    auto proc = ChildProcess::start(exe_, args_for(j), ranks_ ? &env_ : nullptr);
    if (!proc) return make_error("sweep: " + proc.error().message);
    workers_.push_back(Worker{std::move(*proc), std::move(j), run_before, attempts_before});
    return {};
  }

  Result<void> finish(const Worker& w, int wait_status) {
    const json line = json::parse(last_line(w.proc.out()), nullptr, false);
    std::string why;
    if (line.is_object() && line.contains("error") && line["error"].is_string())
      why = line["error"].get<std::string>();
    if (why.empty()) why = without_prefix(last_line(w.proc.err()));
    const bool signalled = WIFSIGNALED(wait_status);
    const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    if (signalled)
      why = "the worker was killed by signal " + std::to_string(WTERMSIG(wait_status)) +
            (why.empty() ? "" : " (" + why + ")");
    else if (why.empty() && code != 0)
      why = "the worker exited with code " + std::to_string(code);

    auto trials = store_.trials(sweep_);
    if (!trials) return trials.error();
    const store::TrialInfo* t = nullptr;
    for (const store::TrialInfo& x : *trials)
      if (x.trial == w.job.trial) t = &x;
    if (!t)
      return make_error("sweep " + std::to_string(sweep_) + ": trial " +
                        std::to_string(w.job.trial) + " is gone from " + store_.path());
    const bool recorded =
        w.job.resume_run || t->attempts != w.attempts_before || t->run_id != w.run_before;
    std::string status;
    std::optional<int64_t> run_id = t->run_id;
    if (!recorded) {
      if (g_stop.load()) {
        say("trial " + std::to_string(w.job.trial) +
            " stopped before its run began (it stays pending)");
        return {};
      }
      // Refused before the session recorded it (a setting the project does not take, a
      // missing file): the coordinator records the attempt as a failed run of the trial.
      if (why.empty())
        why = "the worker recorded no run for sweep " + std::to_string(sweep_) + " trial " +
              std::to_string(w.job.trial);
      std::vector<std::pair<std::string, std::string>> params;
      for (const runner::SweepParam& p : space_)
        if (w.job.params.contains(p.name))
          params.emplace_back(p.name, nodes::setting_text(w.job.params[p.name]));
      auto id = runner::TrialRecorder::record_refused(
          store_.path(), sweep_, w.job.trial,
          fs::path(spec_.project).stem().string() + " trial " + std::to_string(w.job.trial),
          spec_.project, spec_.experiment, params, why);
      if (!id) return id.error();
      run_id = *id;
      status = "failed";
    } else {
      auto info = store_.get_run(*run_id);
      if (!info) return info.error();
      status = info->status;
      if (status == "running") {
        // The worker died without closing its run (a crash): it failed, unless we stopped it.
        status = g_stop.load() ? "interrupted" : "failed";
        if (status == "failed" && !why.empty())
          if (auto r = store_.set_note(*run_id, why); !r) return r.error();
        if (auto r = store_.end_run(*run_id, status); !r) return r.error();
      } else if (status == "failed" && !why.empty() && info->note.empty()) {
        if (auto r = store_.set_note(*run_id, why); !r) return r.error();
      }
    }
    // Under MPI the runs say which rank trained them (rank 0's worker here).
    if (ranks_ && run_id)
      if (auto r = store_.set_system_info(*run_id, {{"sweep_rank", "0"}}); !r) return r.error();
    std::string pruned_because;
    if (status == "pruned" && line.is_object() && line.contains("pruned_because") &&
        line["pruned_because"].is_string())
      pruned_because = line["pruned_because"].get<std::string>();
    return announce(w.job, run_id, status, why, pruned_because);
  }

  // A trial another rank trained, recorded by RankTrials.
  Result<void> finish_on_rank(const RankEnded& e) {
    Job job;
    job.trial = e.trial;
    if (auto it = on_ranks_.find(e.trial); it != on_ranks_.end()) {
      job = std::move(it->second);
      on_ranks_.erase(it);
    }
    // The line names the rank that failed it (a dead rank's note does already).
    const std::string why = e.why.empty() || e.status != "failed" || e.why.rfind("rank ", 0) == 0
                                ? e.why
                                : "rank " + std::to_string(e.rank) + ": " + e.why;
    return announce(job, e.run_id, e.status, why, e.pruned_because);
  }

  Result<void> hand_out(int rank, Job j) {
    RankTask t;
    t.trial = j.trial;
    t.project = spec_.project;
    t.sets = spec_.fixed;
    for (const runner::SweepParam& p : space_)
      if (j.params.contains(p.name)) {
        t.sets.push_back(runner::sweep_setting(p.name, j.params[p.name]));
        t.params.emplace_back(p.name, nodes::setting_text(j.params[p.name]));
      }
    t.experiment = spec_.experiment;
    t.name = fs::path(spec_.project).stem().string() + " trial " + std::to_string(j.trial);
    on_ranks_[j.trial] = std::move(j);
    return ranks_->assign(rank, t);
  }

  // The line for an ended trial, and the best so far.
  Result<void> announce(const Job& job, std::optional<int64_t> run_id, const std::string& status,
                        const std::string& why, const std::string& pruned_because) {
    double value = std::nan("");
    if (run_id) {
      auto v = objective_of(*run_id);
      if (!v) return v.error();
      value = *v;
    }
    // A pruned trial's value is an early epoch's: not a result to hold against finished ones.
    if (status == "finished" && (!best_trial_ || better(value, best_))) {
      best_ = value;
      best_trial_ = job.trial;
    }
    ++ended_;
    std::string text = "trial " + std::to_string(job.trial) + " " + status;
    if (run_id) text += " (run " + std::to_string(*run_id) + ")";
    text += "  " + runner::params_text(space_, job.params) + "  " + spec_.rule.objective + " " +
            num(value);
    if (best_trial_)
      text += "  best " + num(best_) + " (trial " + std::to_string(*best_trial_) + ")";
    if (status == "pruned" && !pruned_because.empty()) text += "\n  pruned: " + pruned_because;
    if (status == "failed" && !why.empty()) text += "\n  " + why;
    say(text);
    return {};
  }

  void say(const std::string& line) const {
    if (quiet_) return;
    std::fprintf(stderr, "mlstudio: sweep %lld: %s\n", static_cast<long long>(sweep_),
                 terminal_safe(line).c_str());
    std::fflush(stderr);
  }

  store::RunStore& store_;
  int64_t sweep_;
  Spec spec_;
  std::vector<runner::SweepParam> space_;
  std::vector<json> grid_;
  bool quiet_;
  std::string exe_;
  int64_t threads_ = 1;
  std::vector<Job> queue_;
  int64_t next_trial_ = 0;
  std::vector<Worker> workers_;
  Collective* job_ = nullptr;
  std::unique_ptr<RankTrials> ranks_;  // under MPI: the other ranks
  std::vector<std::string> env_;       // rank 0's worker's environment (no launcher)
  std::map<int64_t, Job> on_ranks_;    // trials the other ranks train
  int64_t ended_ = 0;
  double best_ = std::nan("");
  std::optional<int64_t> best_trial_;
};

// The final table, best first; the counts; the exit code.
int report(Coordinator& c, const Spec& spec, const std::vector<runner::SweepParam>& space,
           int64_t sweep, const std::string& db, bool stopped, bool as_json) {
  auto rows = c.rows();
  if (!rows) return fail(rows.error().message);
  std::vector<TrialRow> sorted = *rows;
  // Finished trials by the objective, then pruned ones (their values are early epochs'),
  // then the rest.
  auto group = [](const TrialRow& r) {
    return r.status == "finished" ? 0 : r.status == "pruned" ? 1 : 2;
  };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const TrialRow& a, const TrialRow& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    return c.better(a.value, b.value);
  });
  std::map<std::string, int> count;
  for (const TrialRow& r : sorted) ++count[r.status];
  const int64_t ended = count["finished"] + count["pruned"] + count["failed"];
  const bool all_ended = ended == static_cast<int64_t>(sorted.size()) &&
                         static_cast<int64_t>(sorted.size()) >= spec.trials;
  const int code = stopped ? 130 : all_ended ? 0 : 1;
  if (as_json) {
    // One line: the trials best first, as the table has them.
    auto number = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
    json rows_json = json::array();
    for (const TrialRow& r : sorted)
      rows_json.push_back({{"trial", r.trial},
                           {"run_id", r.run_id ? json(*r.run_id) : json(nullptr)},
                           {"status", r.status},
                           {"objective", number(r.value)},
                           {"attempts", r.attempts},
                           {"params", r.params}});
    json counts_json = json::object();
    for (const char* k : {"finished", "pruned", "failed", "interrupted", "pending"})
      counts_json[k] = count[k];
    counts_json["not_begun"] =
        std::max<int64_t>(0, spec.trials - static_cast<int64_t>(sorted.size()));
    json all = {{"sweep", sweep},
                {"status", stopped ? "interrupted" : "finished"},
                {"method", spec.method},
                {"objective", spec.rule.objective},
                {"maximize", spec.rule.maximize},
                {"counts", counts_json},
                {"trials", rows_json},
                {"db", db}};
    if (!sorted.empty() && sorted[0].status == "finished") all["best"] = rows_json[0];
    std::printf("%s\n", terminal_json(all).c_str());
    if (code)
      std::fprintf(
          stderr,
          "mlstudio: sweep %lld %s; continue it with: mlstudio sweep --resume %lld --db %s\n",
          static_cast<long long>(sweep), stopped ? "interrupted" : "has trials left",
          static_cast<long long>(sweep), db.c_str());
    return code;
  }
  std::printf(
      "sweep %lld: %s, %s over %zu param%s, objective %s (%s)\n", static_cast<long long>(sweep),
      terminal_safe(fs::path(spec.project).filename().string()).c_str(), spec.method.c_str(),
      space.size(), space.size() == 1 ? "" : "s", terminal_safe(spec.rule.objective).c_str(),
      spec.rule.maximize ? "higher is better" : "lower is better");
  std::printf("%6s %6s  %-11s %12s  %s\n", "trial", "run", "status", "objective", "params");
  for (const TrialRow& r : sorted) {
    std::printf("%6lld %6s  %-11s %12s  %s\n", static_cast<long long>(r.trial),
                r.run_id ? std::to_string(*r.run_id).c_str() : "-", r.status.c_str(),
                num(r.value).c_str(), terminal_safe(runner::params_text(space, r.params)).c_str());
  }
  std::string counts;
  for (const char* s : {"finished", "pruned", "failed", "interrupted", "pending"})
    if (count[s]) counts += (counts.empty() ? "" : ", ") + std::to_string(count[s]) + " " + s;
  if (const int64_t left = spec.trials - static_cast<int64_t>(sorted.size()); left > 0)
    counts += (counts.empty() ? "" : ", ") + std::to_string(left) + " not begun";
  std::printf("%lld trial%s: %s\n", static_cast<long long>(spec.trials),
              spec.trials == 1 ? "" : "s", counts.c_str());
  if (!sorted.empty() && sorted[0].status == "finished" && !std::isnan(sorted[0].value))
    std::printf("best: trial %lld (run %lld) %s %s with %s\n",
                static_cast<long long>(sorted[0].trial), static_cast<long long>(*sorted[0].run_id),
                terminal_safe(spec.rule.objective).c_str(), num(sorted[0].value).c_str(),
                terminal_safe(runner::params_text(space, sorted[0].params)).c_str());
  if (code) {
    std::fprintf(
        stderr, "mlstudio: sweep %lld %s; continue it with: mlstudio sweep --resume %lld --db %s\n",
        static_cast<long long>(sweep), stopped ? "interrupted" : "has trials left",
        static_cast<long long>(sweep), db.c_str());
  }
  return code;
}

// The space, the grid and the objective checked against the project; errors name the param.
Result<std::vector<json>> check_against_project(const Spec& spec,
                                                const std::vector<runner::SweepParam>& space,
                                                bool* has_validation) {
  runner::ProjectOptions po;
  po.path = spec.project;
  po.sets = spec.fixed;
  po.load_data = false;
  auto p = runner::open_project(po);
  if (!p) return p.error();
  *has_validation = p->validation != nullptr;
  for (const runner::SweepParam& sp : space) {
    std::vector<json> values = sp.choices;
    if (!sp.is_choice()) {
      values = {sp.integer ? json(static_cast<int64_t>(sp.lo)) : json(sp.lo),
                sp.integer ? json(static_cast<int64_t>(sp.hi)) : json(sp.hi)};
    }
    for (const json& v : values) {
      nodes::Document doc = p->doc;
      if (auto r = nodes::apply_setting(doc, sp.name, v); !r)
        return make_error("--param '" + sp.name + "=" + sp.spec + "': " + r.error().message);
    }
    for (const std::string& f : spec.fixed)
      if (f.substr(0, f.find('=')) == sp.name)
        return make_error("--param '" + sp.name + "=" + sp.spec + "': " + sp.name +
                          " is also held fixed (" + f + "); sweep it or fix it, not both");
  }
  if (spec.method == "grid") return runner::grid_trials(space, static_cast<int>(spec.grid_points));
  return std::vector<json>{};
}

}  // namespace

// [SECTION] the command and its options

const std::atomic<bool>& sweep_stop_flag() {
  return g_stopped;
}

namespace {

// Rank 0's sweep (or the only process's). `*served`: the other ranks were taken in hand (the
// coordinator releases them); until then an early return must let them go.
int sweep_main(const SweepOptions& o, Collective* job, bool* served) {
  g_stop.store(0);
  g_stopped.store(false);
  if (job && o.workers_given)
    return fail(
        "sweep: --workers sets a local sweep's worker processes; under mpirun each of "
        "the " +
        std::to_string(job->size()) +
        " ranks trains one trial at a time (rank 0 too): give the ranks instead (-np N)");
  // A new sweep's input is checked before the database is opened (or made).
  std::unique_ptr<store::RunStore> opened;
  auto open_store = [&]() -> Result<void> {
    auto s = store::RunStore::open(o.db);
    if (!s) return s.error();
    opened = std::move(*s);
    return {};
  };

  Spec spec;
  int64_t sweep = 0;
  std::vector<Job> resume_jobs;
  int64_t next_trial = 0;
  if (o.resume > 0) {
    if (!o.project.empty() || !o.params.empty())
      return fail("sweep --resume " + std::to_string(o.resume) +
                  ": the sweep's project and params are recorded; give neither");
    if (auto r = open_store(); !r) return fail(r.error().message);
    auto info = opened->get_sweep(o.resume);
    if (!info) return fail(info.error().message);
    if (info->status == "running")
      return fail("sweep " + std::to_string(o.resume) + " in " + o.db +
                  " is still running (its coordinator, " + info->owner +
                  ", is alive): stop it first (Ctrl-C), then resume");
    auto s = Spec::from_json(info->spec_json, "sweep " + std::to_string(o.resume) + " in " + o.db);
    if (!s) return fail(s.error().message);
    spec = std::move(*s);
    if (o.workers_given) spec.workers = o.workers;
    sweep = o.resume;
  } else {
    if (o.project.empty()) return fail("sweep: give the project (P.mls), or --resume ID");
    if (o.method != "grid" && o.method != "random" && o.method != "tpe")
      return fail("sweep: --method '" + o.method + "' is not grid, random or tpe");
    if (o.early_stop != "none" && o.early_stop != "median" && o.early_stop != "asha")
      return fail("sweep: --early-stop '" + o.early_stop + "' is not none, median or asha");
    spec.project = fs::absolute(o.project).lexically_normal().string();
    spec.params = o.params;
    spec.method = o.method;
    spec.workers = o.workers;
    spec.grid_points = o.grid_points;
    spec.seed = o.seed;
    spec.experiment = o.experiment;
    spec.rule.method = o.early_stop;
    spec.rule.warmup = o.warmup;
    spec.rule.min_trials = o.min_trials;
    spec.rule.eta = o.eta;
    spec.rule.r_min = o.r_min;
    spec.rule.maximize = o.maximize;
    // The usual overrides, held fixed, as --set (a resumed trial's run restores its sets).
    if (o.epochs) spec.fixed.push_back("epochs=" + std::to_string(*o.epochs));
    if (o.batch_size) spec.fixed.push_back("batch_size=" + std::to_string(*o.batch_size));
    if (o.lr) spec.fixed.push_back("lr=" + json(*o.lr).dump());
    if (o.device) spec.fixed.push_back("device=" + *o.device);
    if (o.mode) spec.fixed.push_back("mode=" + *o.mode);
    if (o.precision) spec.fixed.push_back("precision=" + *o.precision);
    if (o.limit) spec.fixed.push_back("dataset.limit=" + std::to_string(*o.limit));
    if (o.test_limit) spec.fixed.push_back("dataset.test_limit=" + std::to_string(*o.test_limit));
    for (const std::string& s : o.sets) spec.fixed.push_back(s);
  }

  auto space = runner::parse_sweep_space(spec.params);
  if (!space) return fail(space.error().message);
  bool has_validation = false;
  auto grid = check_against_project(spec, *space, &has_validation);
  if (!grid) return fail(grid.error().message);
  if (o.resume == 0) {
    spec.rule.objective =
        o.objective.empty() ? runner::default_objective(has_validation) : o.objective;
    if (spec.rule.objective.rfind("val/", 0) == 0 && !has_validation)
      return fail("sweep: the objective " + spec.rule.objective + " needs a validation split (" +
                  o.project + " has none: --set dataset.validation=0.1)");
    if (spec.rule.method != "none" && !metric_per_epoch(spec.rule.objective))
      return fail("sweep: --early-stop " + spec.rule.method +
                  " compares trials after each epoch; the objective " + spec.rule.objective +
                  " is not recorded per epoch (use val/... or epoch/...)");
    spec.trials = o.method == "grid" ? static_cast<int64_t>(grid->size()) : 10;
    if (o.trials > 0)
      spec.trials = o.method == "grid" ? std::min<int64_t>(o.trials, spec.trials) : o.trials;
    if (auto r = open_store(); !r) return fail(r.error().message);
    store::NewSweep ns;
    ns.experiment = o.experiment;
    ns.name = o.name.empty() ? fs::path(o.project).stem().string() + " " + o.method : o.name;
    ns.project_path = spec.project;
    ns.spec_json = spec.to_json().dump();
    auto id = opened->create_sweep(ns);
    if (!id) return fail(id.error().message);
    sweep = *id;
    if (!o.quiet)
      std::fprintf(stderr,
                   "mlstudio: sweep %lld: %lld trial%s of %s (%s), %lld %s%s, objective %s%s; "
                   "recorded in %s\n",
                   static_cast<long long>(sweep), static_cast<long long>(spec.trials),
                   spec.trials == 1 ? "" : "s", terminal_safe(o.project).c_str(),
                   spec.method.c_str(), static_cast<long long>(job ? job->size() : spec.workers),
                   job ? "rank" : "worker", (job ? job->size() : spec.workers) == 1 ? "" : "s",
                   terminal_safe(spec.rule.objective).c_str(),
                   spec.rule.method == "none" ? "" : (", early stop " + spec.rule.method).c_str(),
                   o.db.c_str());
  }
  store::RunStore& st = *opened;
  if (o.resume > 0) {
    // What each recorded trial needs.
    auto trials = st.trials(sweep);
    if (!trials) return fail(trials.error().message);
    int resumed = 0, fresh = 0, retried = 0;
    for (const store::TrialInfo& t : *trials) {
      next_trial = std::max(next_trial, t.trial + 1);
      Job j;
      j.trial = t.trial;
      j.params = json::parse(t.params_json, nullptr, false);
      std::string status = t.run_id ? t.run_status : "";
      if (status == "running" && t.run_id) {
        // Its worker may still be dying (it goes with its coordinator): wait for it briefly.
        for (int i = 0; i < 100 && status == "running"; ++i) {
          auto run = st.get_run(*t.run_id);
          if (!run) return fail(run.error().message);
          if (store::owner_gone(run->owner)) {
            if (auto r = st.end_run(*t.run_id, "interrupted"); !r) return fail(r.error().message);
            status = "interrupted";
            break;
          }
          ::usleep(50 * 1000);
        }
        if (status == "running")
          return fail("sweep " + std::to_string(sweep) + ": trial " + std::to_string(t.trial) +
                      "'s run " + std::to_string(*t.run_id) +
                      " is still training in another process");
      }
      if (status == "finished" || status == "pruned") continue;
      if (status == "failed") {
        if (!o.retry_failed) continue;
        ++retried;
      } else if (status == "interrupted" &&
                 fs::exists(runner::checkpoint_path(o.db, *t.run_id, "last"))) {
        j.resume_run = t.run_id;
        ++resumed;
      } else {
        ++fresh;
      }
      resume_jobs.push_back(std::move(j));
    }
    if (auto r = st.reopen_sweep(sweep); !r) return fail(r.error().message);
    if (!o.quiet)
      std::fprintf(stderr,
                   "mlstudio: sweep %lld resumed: %d trial%s continue from checkpoints, %d start "
                   "afresh, %d failed retried, %lld new\n",
                   static_cast<long long>(sweep), resumed, resumed == 1 ? "" : "s", fresh, retried,
                   static_cast<long long>(std::max<int64_t>(0, spec.trials - next_trial)));
  }

  Coordinator c(st, sweep, spec, *space, std::move(*grid), o.quiet, job);
  *served = true;
  if (job && !o.quiet)
    std::fprintf(stderr,
                 "mlstudio: sweep %lld over %d ranks (%s): rank 0 records every trial in %s\n",
                 static_cast<long long>(sweep), job->size(),
                 terminal_safe(runner::hosts_text(*job)).c_str(), o.db.c_str());
  for (Job& j : resume_jobs) c.queue(std::move(j));
  c.set_next_trial(next_trial);
  std::signal(SIGINT, on_sweep_signal);
  std::signal(SIGTERM, on_sweep_signal);
  auto done = c.run();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!done) {
    (void)st.end_sweep(sweep, "failed");
    const int code = fail(done.error().message);
    if (job) {
      // Ranks may still train trials nobody will record: end the job.
      std::fflush(nullptr);
      job->abort_job(code);
    }
    return code;
  }
  if (auto r = st.end_sweep(sweep, *done ? "finished" : "interrupted"); !r)
    return fail(r.error().message);
  const int code = report(c, spec, *space, sweep, o.db, !*done, o.json);
  if (const std::vector<int> dead = c.dead_ranks(); !dead.empty()) {
    // A dead rank cannot take part in the job's end (MPI_Finalize would wait for it).
    std::string names;
    for (int r : dead) names += (names.empty() ? "" : ", ") + runner::rank_name(*job, r);
    std::fprintf(stderr, "mlstudio: sweep %lld: %s stopped answering; ending the job\n",
                 static_cast<long long>(sweep), terminal_safe(names).c_str());
    std::fflush(nullptr);
    job->abort_job(code ? code : 1);
  }
  return code;
}

}  // namespace

int sweep_command(const SweepOptions& o, Collective* job) {
  if (job && job->size() <= 1) job = nullptr;
  if (job && job->rank() != 0) return serve_sweep_trials(*job);
  bool served = false;
  const int code = sweep_main(o, job, &served);
  if (job && !served)
    for (int r = 1; r < job->size(); ++r) (void)job->send_text(r, "{\"t\": \"stop\"}");
  return code;
}

CLI::App* add_sweep_command(CLI::App& app, SweepOptions& o) {
  auto* c = app.add_subcommand(
      "sweep", "Search hyperparameters: each trial a run of the project, K worker processes");
  c->add_option("project", o.project, "The project (.mls)")->check(CLI::ExistingFile);
  c->add_option("--param", o.params,
                "NAME=SPEC, repeated: lr=1e-3:1e-1:log (log-uniform), dropout=0:0.5 (uniform), "
                "units=32:256:int, units=16:1024:log:int, batch_size=64,128 (a choice); NAME is "
                "a setting or NODE.PARAM as --set takes it")
      ->allow_extra_args(false);
  c->add_option("--method", o.method, "grid, random or tpe (Tree-structured Parzen Estimator)")
      ->capture_default_str();
  c->add_option("--trials", o.trials, "How many trials (default: the whole grid, or 10)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  c->add_option("--workers", o.workers,
                "Worker processes training at once (each gets cores/K threads)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
      ->each([&o](const std::string&) { o.workers_given = true; });
  c->add_option("--grid-points", o.grid_points, "grid: values per range")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  c->add_option("--early-stop", o.early_stop,
                "none, median (stop a trial worse than the others' median at an epoch) or asha "
                "(successive halving at epochs r, r*eta, r*eta^2...)")
      ->capture_default_str();
  c->add_option("--warmup", o.warmup, "median: the first epoch a trial may be stopped at")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  c->add_option("--min-trials", o.min_trials, "median: other trials' values needed at that epoch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  c->add_option("--eta", o.eta, "asha: keep the top 1/eta at each rung")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{100}));
  c->add_option("--min-epochs", o.r_min, "asha: the first rung's epoch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  c->add_option("--objective", o.objective,
                "The metric to optimise: its last value (default val/loss with a validation split, "
                "else epoch/train_loss)");
  c->add_flag("--maximize", o.maximize, "Higher objective is better (val/accuracy)");
  c->add_option("--seed", o.seed,
                "The sampler's seed (random, tpe); the training seed: --set seed=N");
  c->add_option("--db", o.db, "The run database (SQLite)")->capture_default_str();
  c->add_option("--experiment", o.experiment, "File the sweep and its runs under this experiment");
  c->add_option("--name", o.name, "The sweep's name (default: the project's and the method)");
  c->add_option("--epochs", o.epochs, "Every trial: this many epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  c->add_option("--batch-size", o.batch_size, "Every trial: this batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  c->add_option("--lr", o.lr, "Every trial: this learning rate")->check(CLI::PositiveNumber);
  c->add_option("--device", o.device, "Every trial: cpu, vulkan or cuda");
  c->add_option("--mode", o.mode, "Every trial: static or eager");
  c->add_option("--precision", o.precision, "Every trial: f32, bf16 or f16");
  c->add_option("--limit", o.limit, "Every trial: the first N training samples only")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--test-limit", o.test_limit, "Every trial: the first N test samples only")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--set", o.sets, "KEY=VALUE held fixed for every trial (as --run takes it)")
      ->allow_extra_args(false);
  c->add_option("--resume", o.resume,
                "Continue sweep ID: interrupted trials from their checkpoints, pending ones")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  c->add_flag("--retry-failed", o.retry_failed,
              "With --resume: run the failed trials again, afresh");
  c->add_flag("-q,--quiet", o.quiet, "No line per trial");
  c->add_flag("--json", o.json,
              "End with one JSON line on stdout (the trials best first, the counts, the best) "
              "instead of the table");
  c->callback([&o] {
    if (o.retry_failed && o.resume == 0)
      throw CLI::ValidationError("--retry-failed", "needs --resume ID");
  });
  return c;
}

}  // namespace mls::app
