// `mlstudio --run P.mls`: train headless, record the run, print the result.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/core/atomic_file.h"
#include "engine/train/progress_line.h"
#include "runner/training_run.h"

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

int run_command(const RunOptions& o) {
  g_cancel.store(false);
  g_signal.store(0);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const bool tty = isatty(STDERR_FILENO) != 0;
  Progress bar(tty);
  runner::RunRequest req{.project = o.project,
                         .resume = o.resume,
                         .stop_after_epochs = o.stop_after_epochs,
                         .db = o.db};
  req.preflight = true;
  TraceRecorder trace;
  if (!o.profile.empty()) {
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
  if (!o.quiet) {
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
      std::string fit;
      if (e.free_bytes)
        fit = " of " + runner::bytes_text(*e.free_bytes) + " free" +
              (e.max_batch > 0 ? " (the largest batch that fits: " + std::to_string(e.max_batch) + ")" : "");
      int64_t eval = 0;
      for (const PreflightPlan& p : e.plans) eval += p.training ? 0 : p.bytes;
      std::fprintf(stderr,
                   "mlstudio: pre-flight: the run will hold %s%s: parameters %s, optimizer state %s, "
                   "training step %s (activations and gradients %s), evaluation %s; about %.2f ms per "
                   "step, %.1f s per epoch\n",
                   runner::bytes_text(e.total_bytes).c_str(), fit.c_str(), runner::bytes_text(e.held.parameter).c_str(),
                   runner::bytes_text(e.held.optimizer_state).c_str(),
                   runner::bytes_text(e.step_bytes - e.held.parameter - e.held.optimizer_state).c_str(),
                   runner::bytes_text(e.arena_bytes).c_str(), runner::bytes_text(eval).c_str(), 1e3 * e.step_seconds,
                   e.epoch_seconds);
    };
  }
  Result<runner::RunOutcome> outcome = runner::run_training(req, ev);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  // The trace is written whatever became of the run: a failed run's steps are worth seeing.
  if (req.trace) {
    if (auto w = trace.write(o.profile); !w) {
      if (o.json) print_json_failure(w.error().message);
      return fail(w.error().message);
    }
    if (!o.quiet)
      std::fprintf(stderr, "mlstudio: trace of %zu steps (%zu kernel spans) written to %s (open it in ui.perfetto.dev)\n",
                   trace.count("step"), trace.count("op"), o.profile.c_str());
  }
  if (!outcome) {
    // --json promises one JSON object on the last stdout line, failures included.
    if (o.json) print_json_failure(outcome.error().message);
    return fail(outcome.error().message);
  }
  const runner::RunOutcome& out = *outcome;
  const TrainResult& r = out.result;
  const int64_t run_id = out.run_id;
  const std::string& status = out.status;
  const std::string& last_path = out.last_checkpoint;
  const std::string& device = out.device;
  const TrainConfig& cfg = out.config;

  if (!o.quiet) {
    if (r.paused)
      std::fprintf(
          stderr,
          "mlstudio: stopped after epoch %lld of %lld as asked; continue with --resume %lld\n",
          static_cast<long long>(out.epochs_done), static_cast<long long>(out.planned_epochs),
          static_cast<long long>(run_id));
    else if (r.interrupted && std::filesystem::exists(last_path))
      std::fprintf(stderr,
                   "mlstudio: interrupted after %lld steps; run %lld kept in %s (continue it with "
                   "--resume %lld)\n",
                   static_cast<long long>(r.steps), static_cast<long long>(run_id), o.db.c_str(),
                   static_cast<long long>(run_id));
    else if (r.interrupted)
      std::fprintf(
          stderr,
          "mlstudio: interrupted after %lld steps, before the first epoch ended: run %lld is "
          "recorded as interrupted in %s, but has no checkpoint to resume from (start it "
          "again)\n",
          static_cast<long long>(r.steps), static_cast<long long>(run_id), o.db.c_str());
    else {
      // The test score is of the weights training ended with. Where the best checkpoint is
      // another epoch (early stopping, a validation metric that peaked earlier), say so, and
      // which command scores that one: the two numbers differ and must not be confused.
      const bool best_elsewhere = r.best_epoch > 0 && r.best_epoch != out.epochs_done;
      const std::string test = !r.has_test
                                   ? "(no test split)"
                                   : (best_elsewhere ? "(last epoch's weights, epoch " +
                                                           std::to_string(out.epochs_done) + ") "
                                                     : std::string()) +
                                         runner::eval_text(r.test);
      std::string tail = r.stopped_early ? ", stopped early" : "";
      if (best_elsewhere)
        tail += "; the best checkpoint is epoch " + std::to_string(r.best_epoch) +
                " (mlstudio eval " + o.project.path + " --run " + std::to_string(run_id) +
                " scores it)";
      std::fprintf(
          stderr,
          "mlstudio: run %lld finished in %s: final loss %.4f, test %s, %.0f samples/s, epoch "
          "%.2fs (median), data wait %.0f%%, peak memory %.2f MiB%s; recorded in %s\n",
          static_cast<long long>(run_id), format_duration(r.seconds).c_str(), r.final_loss,
          test.c_str(), r.samples_per_s, r.median_epoch_seconds,
          100.0 * r.data_seconds /
              std::max(1e-9, std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0)),
          static_cast<double>(r.peak_bytes) / (1 << 20), tail.c_str(), o.db.c_str());
    }
    if (out.preflight && !r.step_losses.empty())
      std::fprintf(stderr,
                   "mlstudio: estimate vs measured: peak %s vs %s (%+.1f%%), step %.2f ms vs %.2f ms\n",
                   runner::bytes_text(out.preflight->total_bytes).c_str(), runner::bytes_text(r.peak_bytes).c_str(),
                   100.0 * static_cast<double>(out.preflight->total_bytes - r.peak_bytes) /
                       static_cast<double>(std::max<int64_t>(r.peak_bytes, 1)),
                   1e3 * out.preflight->step_seconds, 1e3 * out.step_seconds());
  }
  if (o.json) {
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
    if (r.has_test) j.update(eval_json(r.test, "test_"));
    if (r.has_validation) j.update(eval_json(r.validation, "val_"));
    std::printf("%s\n", j.dump().c_str());
  }
  if (!r.interrupted) return 0;
  return 128 + (g_signal.load() ? g_signal.load() : SIGINT);
}

}  // namespace mls::app
