// A sweep over the ranks of an MPI job (app/sweep_ranks.h): the ranks' loop, and rank 0's
// record of their trials.
//
// [SECTION] the messages
// [SECTION] a rank: trains the trials rank 0 hands it
// [SECTION] rank 0: the other ranks' trials
#include "app/sweep_ranks.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "app/commands.h"
#include "engine/cpu/cpu_backend.h"
#include "runner/backends.h"
#include "runner/checkpoints.h"
#include "runner/ranks.h"
#include "runner/sweep_transfer.h"
#include "runner/training_run.h"
#include "store/run_store.h"

extern char** environ;

namespace mls::app {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// [SECTION] the messages
//
// A rank to rank 0:  {"t": "ready"}                      asks for a trial
//                    ""                                   still training (at most every second)
//                    {"t": "epoch", "epoch": E, ...}      run_message: answered go / stop
//                    {"t": "result", "files": [...], ...} run_message (or no "run": refused),
//                                                         then each file's bytes, one text each
// Rank 0 to a rank:  {"t": "trial", ...RankTask}  {"t": "stop"}  (to "ready")
//                    {"t": "go"}  {"t": "stop", "why": W}  {"t": "interrupt"}  (to "epoch")

// Checkpoints larger than this stay on the rank (the run lists none): a message of gigabytes
// would hold rank 0 up.
constexpr int64_t kMaxShippedBytes = 512ll << 20;

// A signal (Ctrl-C reaches every rank through the launcher, a scheduler's SIGTERM) ends the
// trial after its step and the rank after it.
std::atomic<bool> g_rank_cancel{false};
std::atomic<bool> g_rank_signal{false};
extern "C" void on_rank_signal(int) {
  g_rank_signal.store(true);
  g_rank_cancel.store(true);
}

// [SECTION] a rank: trains the trials rank 0 hands it

class RankWorker {
 public:
  explicit RankWorker(Collective& job) : job_(job) {}

  int serve() {
    const char* tmp = std::getenv("TMPDIR");
    dir_ =
        fs::path(tmp && *tmp ? tmp : "/tmp") /
        ("mlstudio-sweep-rank-" + std::to_string(job_.rank()) + "-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::create_directories(dir_, ec);
    db_ = (dir_ / "trials.db").string();
    // This rank's share of its host's cores, as a local sweep gives each worker cores/K.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu::set_default_threads(std::max(1, cores / ranks_on_my_host(job_)));
    g_rank_cancel.store(false);
    g_rank_signal.store(false);
    std::signal(SIGINT, on_rank_signal);
    std::signal(SIGTERM, on_rank_signal);
    int code = 0;
    for (;;) {
      json ready = {{"t", "ready"}};
      if (g_rank_signal.load()) ready["stopping"] = true;
      if (auto r = send(ready); !r) {
        code = lost(r.error().message);
        break;
      }
      auto answer = job_.recv_text(0);
      if (!answer) {
        code = lost(answer.error().message);
        break;
      }
      const json task = json::parse(*answer, nullptr, false);
      if (!task.is_object() || task.value("t", "") != "trial") break;  // "stop"
      if (auto r = train(task); !r) {
        code = lost(r.error().message);
        break;
      }
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    fs::remove_all(dir_, ec);
    return code;
  }

 private:
  Result<void> send(const json& msg) { return job_.send_text(0, runner::message_text(msg)); }

  int lost(const std::string& why) {
    std::fprintf(stderr, "mlstudio: rank %d: rank 0 stopped answering (%s); this rank ends\n",
                 job_.rank(), terminal_safe(why).c_str());
    return 1;
  }

  // Trains one trial; an error only when rank 0 is lost.
  Result<void> train(const json& task) {
    const int64_t trial = task.value("trial", int64_t{0});
    runner::RunRequest req;
    req.project.path = task.value("project", "");
    req.project.sets = task.value("sets", std::vector<std::string>{});
    req.db = db_;
    req.experiment = task.value("experiment", "");
    req.preflight = true;
    // Each rank its own GPU where the host has several (rank r: GPU r mod count), as the ranks
    // of a data-parallel job take theirs; rank 0's worker keeps the device asked for.
    runner::ProjectOptions described = req.project;
    described.load_data = false;
    if (auto p = runner::open_project(described)) {
      const std::string asked = p->doc.training.device;
      const std::string mine = runner::rank_device(asked, job_.rank(), runner::device_count(asked));
      if (mine != asked) req.project.sets.push_back("device=" + mine);
    }
    std::optional<Error> lost;
    runner::SentPoints sent;
    std::unique_ptr<store::RunStore> reader;
    auto last_sent = Clock::now();
    runner::RunEvents ev;
    ev.cancel = &g_rank_cancel;
    ev.progress = [&](const ProgressInfo&) {
      if (lost || Clock::now() - last_sent < std::chrono::seconds(1)) return;
      last_sent = Clock::now();
      if (auto r = job_.send_text(0, ""); !r) {
        lost = r.error();
        g_rank_cancel.store(true);
      }
    };
    req.prune = [&](int64_t run_id, const EpochReport& rep) -> std::optional<std::string> {
      if (lost) return {};
      auto answer = report_epoch(reader, run_id, rep.epoch, sent);
      last_sent = Clock::now();
      if (!answer) {
        lost = answer.error();
        g_rank_cancel.store(true);
        return {};
      }
      if (!*answer) return {};
      const json a = json::parse(**answer, nullptr, false);
      const std::string t = a.is_object() ? a.value("t", "") : "";
      if (t == "stop") return a.value("why", std::string("stopped by the sweep"));
      if (t == "interrupt") g_rank_cancel.store(true);
      return {};
    };
    auto before = run_count();
    Result<runner::RunOutcome> out = runner::run_training(req, ev);
    std::string why = out ? std::string() : out.error().message;
    // The run this trial recorded here, if it got that far.
    std::optional<int64_t> run_id;
    if (out)
      run_id = out->run_id;
    else if (auto after = run_count(); after && before && after->first > before->first)
      run_id = after->second;
    reader.reset();
    json msg = {{"t", "result"}, {"trial", trial}, {"why", why}};
    std::vector<std::pair<fs::path, json>> files;
    if (run_id) {
      auto st = store::RunStore::open(db_);
      Result<json> m = st ? runner::run_message(**st, *run_id, sent) : Result<json>(st.error());
      if (!m) {
        msg["why"] = why.empty() ? m.error().message : why;
      } else {
        m->update(msg);
        msg = std::move(*m);
        if (out && out->status == "pruned") msg["pruned_because"] = out->pruned_because;
        files = checkpoint_files(msg, *run_id);
      }
    }
    json list = json::array();
    for (const auto& [path, entry] : files) list.push_back(entry);
    msg["files"] = list;
    if (auto r = send(msg); !r) return r;
    for (const auto& [path, entry] : files) {
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (auto r = job_.send_text(0, bytes); !r) return r;
    }
    if (run_id) {
      std::error_code ec;
      fs::remove_all(runner::checkpoint_dir(db_, *run_id), ec);
    }
    if (lost) return *lost;
    g_rank_cancel.store(g_rank_signal.load());
    return {};
  }

  // The epoch's report and rank 0's answer; nullopt when this rank could not read its own
  // record (the points go with the next report); an error only when rank 0 is lost.
  Result<std::optional<std::string>> report_epoch(std::unique_ptr<store::RunStore>& reader,
                                                  int64_t run_id, int64_t epoch,
                                                  runner::SentPoints& sent) {
    if (!reader) {
      auto st = store::RunStore::open(db_);
      if (!st) return std::optional<std::string>{};
      reader = std::move(*st);
    }
    auto msg = runner::run_message(*reader, run_id, sent);
    if (!msg) return std::optional<std::string>{};
    (*msg)["t"] = "epoch";
    (*msg)["epoch"] = epoch;
    if (auto r = send(*msg); !r) return r.error();
    auto answer = job_.recv_text(0);
    if (!answer) return answer.error();
    return std::optional<std::string>(std::move(*answer));
  }

  // The run's checkpoint files in its folder here, as the result's "files" list.
  std::vector<std::pair<fs::path, json>> checkpoint_files(const json& msg, int64_t run_id) const {
    std::vector<std::pair<fs::path, json>> out;
    const fs::path dir = fs::absolute(runner::checkpoint_dir(db_, run_id)).lexically_normal();
    int64_t total = 0;
    for (const json& a : msg.value("artifacts", json::array())) {
      const fs::path p = fs::path(a.value("path", "")).lexically_normal();
      std::error_code ec;
      if (p.parent_path() != dir || !fs::is_regular_file(p, ec)) continue;
      const auto bytes = static_cast<int64_t>(fs::file_size(p, ec));
      if (ec || total + bytes > kMaxShippedBytes) continue;
      total += bytes;
      json e = {{"name", p.filename().string()}, {"kind", a.value("kind", "checkpoint")}};
      if (a.contains("step")) e["step"] = a["step"];
      out.emplace_back(p, std::move(e));
    }
    return out;
  }

  // How many runs the rank's database holds, and the newest one's id.
  std::optional<std::pair<size_t, int64_t>> run_count() const {
    if (!fs::exists(db_)) return std::pair<size_t, int64_t>{0, 0};
    auto st = store::RunStore::open(db_);
    if (!st) return {};
    auto runs = (*st)->list_runs();
    if (!runs) return {};
    return std::pair<size_t, int64_t>{runs->size(), runs->empty() ? 0 : runs->back().id};
  }

  Collective& job_;
  fs::path dir_;
  std::string db_;
};

}  // namespace

int serve_sweep_trials(Collective& job) {
  return RankWorker(job).serve();
}

int ranks_on_my_host(const Collective& job) {
  const auto& hosts = job.hosts();
  if (hosts.empty() || job.rank() >= static_cast<int>(hosts.size())) return 1;
  int n = 0;
  for (const std::string& h : hosts) n += h == hosts[static_cast<size_t>(job.rank())];
  return std::max(1, n);
}

std::vector<std::string> environment_without_launcher() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string v = *e;
    const std::string key = v.substr(0, v.find('='));
    if (key.rfind("OMPI_", 0) == 0 || key.rfind("PMIX_", 0) == 0 || key.rfind("PMI_", 0) == 0 ||
        key == "SLURM_STEP_ID" || key == "SLURM_PROCID")
      continue;
    out.push_back(v);
  }
  return out;
}

// [SECTION] rank 0: the other ranks' trials

struct RankTrials::Rank {
  enum class State { Starting, Idle, Training, Released, Dead } state = State::Starting;
  Clock::time_point heard = Clock::now();
  std::optional<RankTask> task;
  std::unique_ptr<runner::TrialRecorder> rec;
};

RankTrials::RankTrials(Collective& job, std::string db, int64_t sweep, runner::PruneRule rule,
                       const std::atomic<bool>* stopped)
    : job_(job), db_(std::move(db)), sweep_(sweep), rule_(std::move(rule)), stopped_(stopped) {
  ranks_.resize(static_cast<size_t>(std::max(1, job.size())));
  ranks_[0].state = Rank::State::Released;  // rank 0 is this process
}

RankTrials::~RankTrials() = default;

std::string RankTrials::name(int rank) const {
  return runner::rank_name(job_, rank);
}

std::optional<int> RankTrials::idle_rank() const {
  for (size_t r = 1; r < ranks_.size(); ++r)
    if (ranks_[r].state == Rank::State::Idle) return static_cast<int>(r);
  return {};
}

int RankTrials::busy() const {
  int n = 0;
  for (const Rank& r : ranks_)
    n += r.state == Rank::State::Starting || r.state == Rank::State::Training;
  return n;
}

Result<void> RankTrials::assign(int rank, const RankTask& task) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  json msg = {{"t", "trial"},
              {"trial", task.trial},
              {"project", task.project},
              {"sets", task.sets},
              {"experiment", task.experiment}};
  r.task = task;
  r.rec.reset();
  r.state = Rank::State::Training;
  r.heard = Clock::now();
  // A rank that cannot be reached: its trial fails, and wait() reports it.
  if (auto e = job_.send_text(rank, runner::message_text(msg)); !e)
    bury(rank, e.error().message, pending_);
  return {};
}

void RankTrials::release(int rank) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  (void)job_.send_text(rank, runner::message_text(json{{"t", "stop"}}));
  r.state = Rank::State::Released;
}

void RankTrials::bury(int rank, const std::string& why, std::vector<RankEnded>& ended,
                      const std::string& status) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  const bool had_trial = r.state == Rank::State::Training && r.task;
  r.state = Rank::State::Dead;
  dead_.push_back(rank);
  const bool failed = status == "failed";
  const std::string note =
      name(rank) + (failed ? " stopped answering" : " was stopped with the job") +
      (had_trial ? " while training trial " + std::to_string(r.task->trial) : std::string()) +
      ": " + why;
  std::fprintf(stderr, "mlstudio: sweep %lld: %s\n", static_cast<long long>(sweep_),
               terminal_safe(note).c_str());
  if (!had_trial) return;
  RankEnded e{.trial = r.task->trial, .rank = rank, .status = status, .why = note};
  if (r.rec) {
    (void)r.rec->store().set_note(r.rec->run_id(), note);
    (void)r.rec->end(status);
    e.run_id = r.rec->run_id();
  } else if (!failed) {
    // Stopped before its run began: the trial stays pending, as in a local sweep.
  } else if (auto id = runner::TrialRecorder::record_refused(
                 db_, sweep_, r.task->trial, r.task->name, r.task->project, r.task->experiment,
                 r.task->params, note)) {
    e.run_id = *id;
  }
  r.rec.reset();
  r.task.reset();
  ended.push_back(std::move(e));
}

Result<std::vector<RankEnded>> RankTrials::wait() {
  std::vector<RankEnded> ended = std::move(pending_);
  pending_.clear();
  if (busy() > 0) {
    int from = -1;
    auto text = job_.recv_text_any(&from);
    if (text && from > 0 && from < static_cast<int>(ranks_.size())) {
      ranks_[static_cast<size_t>(from)].heard = Clock::now();
      if (auto r = on_message(from, *text, ended); !r) return r.error();
    } else if (!text && stopped_ && stopped_->load()) {
      // A signal cut the wait short: mpirun stops every rank (SIGTERM, then SIGKILL a second
      // later), so no result is coming; what the ranks trained is recorded as interrupted.
      for (size_t r = 1; r < ranks_.size(); ++r)
        if (ranks_[r].state == Rank::State::Starting || ranks_[r].state == Rank::State::Training)
          bury(static_cast<int>(r), text.error().message, ended, "interrupted");
    } else if (!text) {
      // No rank said anything for the whole timeout: the busy ones heard from longest ago
      // are dead (the collective's message names who did not answer).
      Clock::time_point oldest = Clock::now();
      for (const Rank& r : ranks_)
        if (r.state == Rank::State::Starting || r.state == Rank::State::Training)
          oldest = std::min(oldest, r.heard);
      for (size_t r = 1; r < ranks_.size(); ++r)
        if ((ranks_[r].state == Rank::State::Starting ||
             ranks_[r].state == Rank::State::Training) &&
            ranks_[r].heard - oldest < std::chrono::seconds(1))
          bury(static_cast<int>(r), text.error().message, ended);
    }
  }
  // A busy rank silent for the timeout while others talk is dead too.
  const auto limit = std::chrono::duration<double>(job_.timeout_seconds());
  for (size_t r = 1; r < ranks_.size(); ++r)
    if ((ranks_[r].state == Rank::State::Starting || ranks_[r].state == Rank::State::Training) &&
        Clock::now() - ranks_[r].heard > limit)
      bury(static_cast<int>(r),
           "nothing heard for " + std::to_string(static_cast<int>(job_.timeout_seconds())) +
               " s: it died or hangs",
           ended);
  return ended;
}

Result<void> RankTrials::on_message(int from, const std::string& text,
                                    std::vector<RankEnded>& ended) {
  if (text.empty()) return {};  // still training
  Rank& r = ranks_[static_cast<size_t>(from)];
  const json msg = json::parse(text, nullptr, false);
  const std::string t = msg.is_object() ? msg.value("t", "") : "";
  if (t == "ready") {
    if (r.state == Rank::State::Starting || r.state == Rank::State::Training)
      r.state = Rank::State::Idle;
    if (msg.value("stopping", false)) release(from);  // it was signalled: no more trials
    return {};
  }
  if (r.state != Rank::State::Training || !r.task)
    return make_error(name(from) + " sent '" + t + "' with no trial of this sweep");
  const int64_t trial = r.task->trial;
  const std::vector<std::pair<std::string, std::string>> who = {
      {"sweep_rank", std::to_string(from)}};
  // Begins the run at the rank's first report that holds one.
  auto record = [&]() -> Result<void> {
    if (!msg.contains("run")) return {};
    if (!r.rec) {
      auto rec = runner::TrialRecorder::begin(db_, sweep_, trial, msg, who);
      if (!rec) return rec.error();
      r.rec = std::move(*rec);
      return {};
    }
    return r.rec->add(msg);
  };
  if (t == "epoch") {
    Result<void> recorded = record();
    json answer = {{"t", "go"}};
    if (interrupting_) {
      answer = {{"t", "interrupt"}};
    } else if (recorded && r.rec && rule_.method != "none") {
      const int64_t epoch = msg.value("epoch", int64_t{0});
      auto value = runner::run_value_at(db_, r.rec->run_id(), rule_.objective, epoch);
      if (value && *value) {
        auto why = runner::sweep_prune(db_, sweep_, r.rec->run_id(), rule_, epoch, **value);
        if (why && *why) answer = {{"t", "stop"}, {"why", **why}};
      }
    }
    if (auto e = job_.send_text(from, runner::message_text(answer)); !e) {
      bury(from, e.error().message, ended);
      return {};
    }
    return recorded;
  }
  if (t != "result") return make_error(name(from) + " sent an unknown message '" + t + "'");
  Result<void> recorded = record();
  // The files follow the result, one text each, whatever became of the record.
  std::vector<std::pair<json, std::string>> files;
  for (const json& f : msg.value("files", json::array())) {
    auto bytes = job_.recv_text(from);
    if (!bytes) {
      bury(from, bytes.error().message, ended);
      return {};
    }
    files.emplace_back(f, std::move(*bytes));
  }
  if (!recorded) return recorded.error();
  RankEnded e{.trial = trial, .rank = from};
  e.why = msg.value("why", "");
  e.pruned_because = msg.value("pruned_because", "");
  if (r.rec) {
    for (const auto& [f, bytes] : files)
      if (auto p = r.rec->add_file(f.value("name", ""), f.value("kind", "checkpoint"),
                                   f.value("step", int64_t{0}), bytes);
          !p)
        return p.error();
    e.status = msg.contains("run") ? msg["run"].value("status", "failed") : "failed";
    if (e.status == "running") e.status = "failed";
    if (e.status == "failed" && !e.why.empty() && msg["run"].value("note", "").empty())
      if (auto n = r.rec->store().set_note(r.rec->run_id(), e.why); !n) return n.error();
    if (auto end = r.rec->end(e.status); !end) return end.error();
    e.run_id = r.rec->run_id();
  } else {
    // Refused before its run began there (a setting the project does not take, a missing
    // file): a failed run of the trial, as a local sweep's coordinator records one.
    e.status = "failed";
    if (e.why.empty()) e.why = name(from) + " recorded no run for trial " + std::to_string(trial);
    auto id =
        runner::TrialRecorder::record_refused(db_, sweep_, trial, r.task->name, r.task->project,
                                              r.task->experiment, r.task->params, e.why);
    if (!id) return id.error();
    e.run_id = *id;
  }
  r.rec.reset();
  r.task.reset();
  r.state = Rank::State::Starting;  // its "ready" comes next
  ended.push_back(std::move(e));
  return {};
}

}  // namespace mls::app
