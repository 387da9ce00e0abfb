// `mlstudio --run P.mls`: train headless, record the run, print the result.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"
#include "engine/core/atomic_file.h"
#include "engine/train/progress_line.h"
#include "runner/pruner.h"
#include "runner/training_run.h"
#include "runner/word_samples.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

// Ctrl-C (SIGINT) and SIGTERM (kill, a scheduler's stop) both end the run after its
// current step: checkpointed where an epoch was done, recorded as interrupted, exit 128+N.
std::atomic<bool> g_cancel{false};
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_cancel.store(true);
}

// The test metrics of a finished run, as JSON fields and one line of text.
nlohmann::json eval_json(const EvalResult& e, const std::string& prefix) {
  nlohmann::json j{{prefix + "loss", e.loss}};
  if (e.regression) {
    j[prefix + "mae"] = e.values.mae;
    j[prefix + "rmse"] = e.values.rmse;
    j[prefix + "r2"] = e.values.r2;
  } else {
    j[prefix + "accuracy"] = e.accuracy;
    j[prefix + "macro_f1"] = e.macro_f1;
  }
  return j;
}

}  // namespace

const std::atomic<bool>& run_stop_flag() {
  return g_cancel;
}

namespace {

// The exit of a rank of a job (rank 0's status is the job's; the others exit 0 unless the job
// is ended for them). Where training failed or was cut short, some rank may still wait in a
// collective for one that is gone: rank 0, having recorded the run and said why, ends the job
// at once (MPI_Abort) rather than wait in MPI's finalisation; another rank waits for rank 0 to
// do so (keeping its collective's calls moving, so it can be asked whether it lives), and ends
// the job itself only when rank 0 has not within the timeout.
int end_job(Collective* job, bool out_of_step, int code) {
  if (!job) return code;
  if (out_of_step) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (job->rank() == 0) job->abort_job(code);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(job->timeout_seconds() + 10);
    while (std::chrono::steady_clock::now() < until) {
      job->progress();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    job->abort_job(code);
  }
  return job->rank() == 0 ? code : 0;
}

}  // namespace

void record_artifact(const std::string& db, int64_t run_id, const std::string& kind,
                     const std::string& path) {
  auto st = store::RunStore::open(db);
  Result<int64_t> added = st ? (*st)->add_artifact(run_id, kind, std::filesystem::absolute(path).lexically_normal().string())
                             : Result<int64_t>(st.error());
  if (!added)
    std::fprintf(stderr, "mlstudio: warning: %s was written but not listed as run %lld's %s: %s\n",
                 terminal_safe(path).c_str(), static_cast<long long>(run_id), kind.c_str(),
                 terminal_safe(added.error().message).c_str());
}

int run_command(const RunOptions& o) {
  // A data-parallel job (`mpirun -np N`): rank 0 speaks for it; the others train beside it and
  // say only their warnings and errors (the session puts "rank R (HOST): " before them).
  Collective* job = o.collective && o.collective->size() > 1 ? o.collective : nullptr;
  const bool lead = !job || job->rank() == 0;
  const bool quiet = o.quiet || !lead;
  const bool json = o.json && lead;
  g_cancel.store(false);
  g_signal.store(0);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const bool tty = isatty(STDERR_FILENO) != 0;
  Progress bar(tty);
  runner::RunRequest req;
  req.project = o.project;
  req.resume = o.resume;
  req.stop_after_epochs = o.stop_after_epochs;
  req.db = o.db;
  req.preflight = true;
  req.memory_check = !o.no_memory_check;
  req.experiment = o.experiment;
  req.sweep_trial = o.sweep_trial;
  req.fork = o.fork;
  req.prune = o.prune;
  req.collective = job;
  bool out_of_step = false;
  req.ranks_out_of_step = &out_of_step;
  if (!o.breaks.empty()) {
    auto b = parse_breakpoints(o.breaks);
    if (!b) {
      if (json) print_json_failure("--break: " + b.error().message);
      return fail("--break: " + b.error().message);
    }
    req.breaks = *b;
  }
  req.health.every = o.health_every;
  // A sweep's trial may be stopped early under the sweep's rule (runner/pruner.h).
  if (o.sweep_trial && !req.prune) {
    auto prune = runner::sweep_pruner(o.db, o.sweep_trial->sweep);
    if (!prune) {
      if (json) print_json_failure(prune.error().message);
      return fail(prune.error().message);
    }
    req.prune = *prune;
  }
  TraceRecorder trace;
  if (!o.profile.empty() && lead) {  // one trace, rank 0's: the ranks' steps are alike
    // Fail now, not after an hour of training, if the trace cannot be written there.
    const std::filesystem::path dir = std::filesystem::absolute(o.profile).parent_path();
    if (!std::filesystem::is_directory(dir))
      return fail("cannot write the trace " + o.profile + ": " + dir.string() + " is not a directory");
    if (auto r = check_replaceable(o.profile); !r)
      return fail("cannot write the trace " + o.profile + ": " + r.error().message);
    req.trace = &trace;
  }
  runner::RunEvents ev;
  ev.cancel = &g_cancel;
  if (!quiet) {
    ev.message = [](const std::string& line) {
      std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(line).c_str());
    };
    ev.warning = [](const std::string& line) {
      std::fprintf(stderr, "mlstudio: warning: %s\n", terminal_safe(line).c_str());
    };
    ev.progress = [&](const ProgressInfo& i) { bar.update(i); };
    ev.epoch_end = [&](const EpochReport& rep) {
      if (rep.has_validation && (Progress::epoch_line_due(rep.epoch, rep.epochs) || rep.stopping))
        std::fprintf(stderr, "%s  validation %s%s\n", tty ? "\r\033[K" : "",
                     runner::eval_text(rep.validation).c_str(),
                     rep.improved ? "  (best so far)" : "");
    };
    ev.preflight = [](const PreflightEstimate& e) {
      std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(runner::preflight_line(e)).c_str());
    };
  } else if (!o.quiet) {
    ev.warning = [](const std::string& line) {
      std::fprintf(stderr, "mlstudio: warning: %s\n", terminal_safe(line).c_str());
    };
  }
  Result<runner::RunOutcome> outcome = runner::run_training(req, ev);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  // The trace is written whatever became of the run: a failed run's steps are worth seeing.
  if (req.trace) {
    if (auto w = trace.write(o.profile); !w) {
      if (json) print_json_failure(w.error().message);
      return fail(w.error().message);
    }
    if (!quiet)
      std::fprintf(stderr, "mlstudio: trace of %zu steps (%zu kernel spans) written to %s (open it in ui.perfetto.dev)\n",
                   trace.count("step"), trace.count("op"), o.profile.c_str());
    if (outcome) record_artifact(o.db, outcome->run_id, "trace", o.profile);
  }
  if (!outcome) {
    // --json promises one JSON object on the last stdout line, failures included.
    if (json) print_json_failure(outcome.error().message);
    return end_job(job, out_of_step, fail(outcome.error().message));
  }
  const runner::RunOutcome& out = *outcome;
  const TrainResult& r = out.result;
  const int64_t run_id = out.run_id;
  const std::string& status = out.status;
  const std::string& last_path = out.last_checkpoint;
  const std::string& device = out.device;
  const TrainConfig& cfg = out.config;

  if (!quiet) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(runner::summary_line(out)).c_str());
    if (const std::string e = runner::estimate_line(out); !e.empty())
      std::fprintf(stderr, "mlstudio: %s\n", e.c_str());
  }
  // A model of a words dataset makes up new words with the weights training ended with.
  std::optional<std::vector<std::string>> samples;
  if (lead && !r.breakpoint && !last_path.empty()) {
    auto words = runner::sample_run_words(o.project, last_path);
    if (!words && !o.quiet)
      std::fprintf(stderr, "mlstudio: warning: no sample words: %s\n",
                   terminal_safe(words.error().message).c_str());
    if (words && !words->empty()) samples = std::move(*words);
  }
  if (samples && !json) {
    std::string line = "samples:";
    for (const std::string& w : *samples) line += " " + w;
    std::printf("%s\n", line.c_str());
  }
  if (json) {
    nlohmann::json j{
        {"run_id", run_id},
        {"status", status},
        {"epochs", out.epochs_done},
        {"first_epoch", r.first_epoch},
        {"steps", r.steps},
        {"final_loss", r.final_loss},
        {"step_losses", r.step_losses},
        {"test_accuracy", nullptr},
        {"seconds", r.seconds},
        {"epoch_seconds", r.median_epoch_seconds},
        {"epoch_seconds_all", r.epoch_seconds},
        {"samples_per_s", r.samples_per_s},
        {"data_seconds", r.data_seconds},
        {"peak_bytes", r.peak_bytes},
        {"planned_arena_bytes", r.planned_arena_bytes},
        {"planned_step_bytes", r.planned_step_bytes},
        {"activation_checkpointing", cfg.checkpoint_budget_bytes},
        {"best_epoch", r.best_epoch},
        {"stopped_early", r.stopped_early},
        {"test_weights", "last epoch"},  // test_* score the weights training ended with
        {"paused", r.paused},
        {"checkpoint", last_path},
        {"device", device},
        {"mode", out.mode},
        {"precision", out.precision},
        {"loss_scale", r.loss_scale},
        {"skipped_steps", r.skipped_steps},
        {"threads", out.threads},
        {"db", o.db}};
    if (out.preflight) {
      j["estimated_peak_bytes"] = out.preflight->total_bytes;
      j["estimated_step_seconds"] = out.preflight->step_seconds;
      j["max_batch"] = out.preflight->max_batch;
    }
    j["step_seconds"] = out.step_seconds();
    if (req.trace) j["profile"] = o.profile;
    if (status == "pruned") j["pruned_because"] = out.pruned_because;
    if (const auto& hit = r.breakpoint) {
      nlohmann::json b{{"kind", break_kind_name(hit->kind)}, {"step", hit->step},
                       {"epoch", hit->epoch}, {"batch", hit->batch}, {"label", hit->label},
                       {"loss", std::isfinite(hit->loss) ? nlohmann::json(hit->loss) : nlohmann::json(nullptr)},
                       {"message", hit->message}, {"checkpoint", out.break_checkpoint}};
      if (hit->fault) {
        b["phase"] = phase_name(hit->fault->phase);
        b["op"] = hit->fault->op;
        b["non_finite"] = hit->fault->stats.non_finite;
        b["first_index"] = hit->fault->stats.first_non_finite;
      }
      j["breakpoint"] = b;
    }
    if (samples) j["samples"] = *samples;
    if (r.has_test) j.update(eval_json(r.test, "test_"));
    if (r.has_validation) j.update(eval_json(r.validation, "val_"));
    if (job) {
      // samples_per_s above is the job's, over every rank.
      const double train_s = std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0);
      j["world_size"] = r.world_size;
      j["hosts"] = job->hosts();
      j["global_batch_size"] = cfg.batch_size * job->size();
      j["comm_seconds"] = r.comm_seconds;
      j["comm_fraction"] = train_s > 0 ? r.comm_seconds / train_s : 0.0;
    }
    std::printf("%s\n", terminal_json(j).c_str());
  }
  if (r.breakpoint) return 3;  // paused: the state is kept, the summary says how to go on
  if (!r.interrupted) return 0;
  return end_job(job, out_of_step, 128 + (g_signal.load() ? g_signal.load() : SIGINT));
}

}  // namespace mls::app
