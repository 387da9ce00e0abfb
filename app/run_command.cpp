// `mlstudio --run P.mls`: train headless, record the run, print the result.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/checkpoints.h"
#include "app/commands.h"
#include "engine/train/progress_line.h"
#include "engine/cpu/cpu_backend.h"
#include "store/file_hash.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) { g_cancel.store(true); }

int fail(const std::string& msg) {
  std::fprintf(stderr, "mlstudio: %s\n", msg.c_str());
  return 1;
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

std::string eval_text(const EvalResult& e) {
  char buf[160];
  if (e.regression)
    std::snprintf(buf, sizeof buf, "MAE %.4f, RMSE %.4f, R² %.4f (loss %.4f)", e.values.mae, e.values.rmse,
                  e.values.r2, e.loss);
  else
    std::snprintf(buf, sizeof buf, "accuracy %.4f (loss %.4f, macro F1 %.4f)", e.accuracy, e.loss, e.macro_f1);
  return buf;
}

Result<void> write_state(const Trainer& trainer, const std::string& path) {
  auto st = trainer.state();
  if (!st) return st.error();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return make_error("cannot create " + std::filesystem::path(path).parent_path().string() + ": " + ec.message());
  return write_checkpoint(*st, path);
}

}  // namespace

int run_command(const RunOptions& o) {
  auto project = open_project(o.project);
  if (!project) return fail(project.error().message);
  Project& p = *project;
  Backend& backend = cpu::backend();
  TrainConfig cfg = p.train_config();

  auto store = store::RunStore::open(o.db);
  if (!store) return fail(store.error().message);
  auto hash = store::file_hash_hex(p.path);
  if (!hash) return fail(hash.error().message);
  std::string device = std::string(backend.name());
  const nodes::TrainingSpec& t = p.doc.training;
  int64_t run_id = 0;
  std::optional<store::RunInfo> info;
  if (o.resume) {
    run_id = *o.resume;
    auto ri = (*store)->get_run(run_id);
    if (!ri) return fail(ri.error().message);
    info = std::move(*ri);
    // Without --epochs, a resumed run keeps the length it was planned with (its schedule spans it).
    if (!o.project.epochs) {
      auto params = (*store)->params(run_id);
      if (!params) return fail(params.error().message);
      for (const auto& [k, v] : *params)
        if (k == "epochs") cfg.epochs = std::stoll(v);
    }
  }
  cfg.stop_after_epochs = o.stop_after_epochs;
  Trainer trainer(backend, p.builder(), cfg);
  if (o.resume) {
    if (info->project_hash != *hash && !o.quiet)
      std::fprintf(stderr, "mlstudio: warning: %s changed since run %lld started; resuming with its saved state\n",
                   p.path.c_str(), static_cast<long long>(run_id));
    auto used = load_run_checkpoint(trainer, o.db, run_id, "last");
    if (!used) return fail(used.error().message);
    if (trainer.epochs_done() >= cfg.epochs)
      return fail("run " + std::to_string(run_id) + " has already trained " + std::to_string(trainer.epochs_done()) +
                  " epochs; ask for more with --epochs N (N > " + std::to_string(trainer.epochs_done()) + ")");
    if (auto r = (*store)->resume_run(run_id); !r) return fail(r.error().message);
    if (auto r = (*store)->log_param(run_id, "epochs", std::to_string(cfg.epochs)); !r) return fail(r.error().message);
    if (!o.quiet)
      std::fprintf(stderr, "mlstudio: resuming run %lld from %s (epoch %lld, step %lld)\n",
                   static_cast<long long>(run_id), used->c_str(), static_cast<long long>(trainer.epochs_done()),
                   static_cast<long long>(trainer.steps_done()));
  } else {
    auto id = (*store)->begin_run({.name = p.doc.name,
                                   .project_path = std::filesystem::absolute(p.path).string(),
                                   .project_hash = *hash,
                                   .device = device,
                                   .seed = cfg.seed});
    if (!id) return fail(id.error().message);
    run_id = *id;
    const std::pair<std::string, std::string> params[] = {
        {"epochs", std::to_string(cfg.epochs)},
        {"batch_size", std::to_string(cfg.batch_size)},
        {"optimizer", cfg.opt.type},
        {"lr", std::to_string(cfg.opt.lr)},
        {"momentum", std::to_string(cfg.opt.momentum)},
        {"weight_decay", std::to_string(cfg.opt.weight_decay)},
        {"schedule", cfg.schedule.type},
        {"mode", std::string(nodes::to_string(t.mode))},
        {"precision", std::string(precision_name(cfg.precision))},
        {"threads", std::to_string(backend.num_threads())},
        {"dataset", p.doc.dataset.source + ":" + p.doc.dataset.path},
        {"train_samples", std::to_string(p.train->num_samples())},
        {"validation_samples", std::to_string(p.validation ? p.validation->num_samples() : 0)},
        {"test_samples", std::to_string(p.test ? p.test->num_samples() : 0)},
        {"checkpoint_dir", checkpoint_dir(o.db, run_id)},
    };
    for (const auto& [k, v] : params)
      if (auto r = (*store)->log_param(run_id, k, v); !r) return fail(r.error().message);
  }

  if (!o.quiet)
    std::fprintf(stderr, "mlstudio: run %lld: %s, %lld epochs, %lld training samples, batch %lld, %s %s on %s (%d threads)\n",
                 static_cast<long long>(run_id), p.path.c_str(), static_cast<long long>(cfg.epochs),
                 static_cast<long long>(p.train->num_samples()), static_cast<long long>(cfg.batch_size),
                 cfg.opt.type.c_str(), std::string(nodes::to_string(t.mode)).c_str(), device.c_str(), backend.num_threads());
  g_cancel.store(false);
  std::signal(SIGINT, on_sigint);
  Progress bar(isatty(STDERR_FILENO) != 0);
  const std::string last_path = checkpoint_path(o.db, run_id, "last");
  const std::string best_path = checkpoint_path(o.db, run_id, "best");
  FitInputs in{.train = *p.train, .validation = p.validation.get(), .test = p.test.get(), .sink = store->get()};
  if (!o.quiet) in.progress = [&](const ProgressInfo& i) { bar.update(i); };
  in.cancel = &g_cancel;
  in.on_epoch_end = [&](const EpochReport& rep) -> Result<void> {
    if (rep.has_validation && !o.quiet && (Progress::epoch_line_due(rep.epoch, cfg.epochs) || rep.stopping))
      std::fprintf(stderr, "%s  validation %s%s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "",
                   eval_text(rep.validation).c_str(), rep.improved ? "  (best so far)" : "");
    if (auto r = write_state(trainer, last_path); !r) return r;
    if (rep.improved)
      if (auto r = write_state(trainer, best_path); !r) return r;
    return {};
  };
  Result<TrainResult> result = make_error("not started");
  try {
    result = trainer.fit(in);
  } catch (const std::bad_alloc&) {
    // The one exception the engine lets through: a model too large for this machine.
    result = make_error("out of memory: the model or a batch does not fit (try a smaller batch size or layer)");
  }
  std::signal(SIGINT, SIG_DFL);
  if (!result) {
    auto e = (*store)->end_run(run_id, "failed");
    (void)e;
    return fail(result.error().message + " (run " + std::to_string(run_id) + " recorded as failed in " + o.db + ")");
  }
  const TrainResult& r = *result;
  // A run stopped on purpose (--stop-after-epochs) is recorded as interrupted: it can resume.
  std::string status = r.interrupted || r.paused ? "interrupted" : "finished";
  if (auto e = (*store)->end_run(run_id, status); !e) return fail(e.error().message);

  if (!o.quiet) {
    if (r.paused)
      std::fprintf(stderr, "mlstudio: stopped after epoch %lld of %lld as asked; continue with --resume %lld\n",
                   static_cast<long long>(trainer.epochs_done()), static_cast<long long>(cfg.epochs),
                   static_cast<long long>(run_id));
    else if (r.interrupted)
      std::fprintf(stderr,
                   "mlstudio: interrupted after %lld steps; run %lld kept in %s (continue it with --resume %lld)\n",
                   static_cast<long long>(r.steps), static_cast<long long>(run_id), o.db.c_str(),
                   static_cast<long long>(run_id));
    else
      std::fprintf(stderr,
                   "mlstudio: run %lld finished in %s: final loss %.4f, test %s, %.0f samples/s, epoch %.2fs "
                   "(median), data wait %.0f%%, peak memory %.1f MiB%s; recorded in %s\n",
                   static_cast<long long>(run_id), format_duration(r.seconds).c_str(), r.final_loss,
                   r.has_test ? eval_text(r.test).c_str() : "(no test split)", r.samples_per_s,
                   r.median_epoch_seconds,
                   100.0 * r.data_seconds / std::max(1e-9, std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0)),
                   static_cast<double>(r.peak_bytes) / (1 << 20), r.stopped_early ? (", stopped early (best epoch " + std::to_string(r.best_epoch) + ")").c_str() : "",
                   o.db.c_str());
  }
  if (o.json) {
    nlohmann::json j{{"run_id", run_id},
                     {"status", status},
                     {"epochs", trainer.epochs_done()},
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
                     {"paused", r.paused},
                     {"checkpoint", last_path},
                     {"device", device},
                     {"mode", std::string(nodes::to_string(t.mode))},
                     {"precision", std::string(precision_name(cfg.precision))},
                     {"loss_scale", r.loss_scale},
                     {"skipped_steps", r.skipped_steps},
                     {"threads", backend.num_threads()},
                     {"db", o.db}};
    if (r.has_test) j.update(eval_json(r.test, "test_"));
    if (r.has_validation) j.update(eval_json(r.validation, "val_"));
    std::printf("%s\n", j.dump().c_str());
  }
  return r.interrupted ? 130 : 0;
}

}  // namespace mls::app
