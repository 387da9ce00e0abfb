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
  runner::RunEvents ev;
  ev.cancel = &g_cancel;
  if (!o.quiet) {
    ev.message = [](const std::string& line) {
      std::fprintf(stderr, "mlstudio: %s\n", line.c_str());
    };
    ev.warning = [](const std::string& line) {
      std::fprintf(stderr, "mlstudio: warning: %s\n", line.c_str());
    };
    ev.progress = [&](const ProgressInfo& i) { bar.update(i); };
    ev.epoch_end = [&](const EpochReport& rep) {
      if (rep.has_validation && (Progress::epoch_line_due(rep.epoch, rep.epochs) || rep.stopping))
        std::fprintf(stderr, "%s  validation %s%s\n", tty ? "\r\033[K" : "",
                     runner::eval_text(rep.validation).c_str(),
                     rep.improved ? "  (best so far)" : "");
    };
  }
  Result<runner::RunOutcome> outcome = runner::run_training(req, ev);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
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
          "%.2fs (median), data wait %.0f%%, peak memory %.1f MiB%s; recorded in %s\n",
          static_cast<long long>(run_id), format_duration(r.seconds).c_str(), r.final_loss,
          test.c_str(), r.samples_per_s, r.median_epoch_seconds,
          100.0 * r.data_seconds /
              std::max(1e-9, std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0)),
          static_cast<double>(r.peak_bytes) / (1 << 20), tail.c_str(), o.db.c_str());
    }
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
    if (r.has_test) j.update(eval_json(r.test, "test_"));
    if (r.has_validation) j.update(eval_json(r.validation, "val_"));
    std::printf("%s\n", j.dump().c_str());
  }
  if (!r.interrupted) return 0;
  return 128 + (g_signal.load() ? g_signal.load() : SIGINT);
}

}  // namespace mls::app
