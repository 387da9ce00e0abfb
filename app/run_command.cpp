// `mlstudio --run P.mls`: train headless, record the run, print the result.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/progress.h"
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
  auto run_id = (*store)->begin_run({.name = p.doc.name,
                                     .project_path = std::filesystem::absolute(p.path).string(),
                                     .project_hash = *hash,
                                     .device = device,
                                     .seed = cfg.seed});
  if (!run_id) return fail(run_id.error().message);
  const nodes::TrainingSpec& t = p.doc.training;
  const std::pair<std::string, std::string> params[] = {
      {"epochs", std::to_string(cfg.epochs)},
      {"batch_size", std::to_string(cfg.batch_size)},
      {"optimizer", cfg.opt.type},
      {"lr", std::to_string(cfg.opt.lr)},
      {"momentum", std::to_string(cfg.opt.momentum)},
      {"weight_decay", std::to_string(cfg.opt.weight_decay)},
      {"mode", std::string(nodes::to_string(t.mode))},
      {"threads", std::to_string(backend.num_threads())},
      {"dataset", p.doc.dataset.source + ":" + p.doc.dataset.path},
      {"train_samples", std::to_string(p.train->num_samples())},
      {"test_samples", std::to_string(p.test->num_samples())},
  };
  for (const auto& [k, v] : params)
    if (auto r = (*store)->log_param(*run_id, k, v); !r) return fail(r.error().message);

  if (!o.quiet)
    std::fprintf(stderr, "mlstudio: run %lld: %s, %lld epochs, %lld training samples, batch %lld, %s %s on %s (%d threads)\n",
                 static_cast<long long>(*run_id), p.path.c_str(), static_cast<long long>(cfg.epochs),
                 static_cast<long long>(p.train->num_samples()), static_cast<long long>(cfg.batch_size),
                 cfg.opt.type.c_str(), std::string(nodes::to_string(t.mode)).c_str(), device.c_str(), backend.num_threads());
  g_cancel.store(false);
  std::signal(SIGINT, on_sigint);
  Progress bar(isatty(STDERR_FILENO) != 0);
  Trainer trainer(backend, p.builder(), cfg);
  Result<TrainResult> result = make_error("not started");
  try {
    result = trainer.fit(*p.train, p.test.get(), store->get(),
                         o.quiet ? ProgressFn{} : ProgressFn([&](const ProgressInfo& i) { bar.update(i); }), &g_cancel);
  } catch (const std::bad_alloc&) {
    // The one exception the engine lets through: a model too large for this machine.
    result = make_error("out of memory: the model or a batch does not fit (try a smaller batch size or layer)");
  }
  std::signal(SIGINT, SIG_DFL);
  if (!result) {
    auto e = (*store)->end_run(*run_id, "failed");
    (void)e;
    return fail(result.error().message + " (run " + std::to_string(*run_id) + " recorded as failed in " + o.db + ")");
  }
  const TrainResult& r = *result;
  std::string status = r.interrupted ? "interrupted" : "finished";
  if (auto e = (*store)->end_run(*run_id, status); !e) return fail(e.error().message);

  if (!o.quiet) {
    if (r.interrupted)
      std::fprintf(stderr, "mlstudio: interrupted after %lld steps; run %lld kept in %s\n",
                   static_cast<long long>(r.steps), static_cast<long long>(*run_id), o.db.c_str());
    else
      std::fprintf(stderr,
                   "mlstudio: run %lld finished in %s: final loss %.4f, test accuracy %.4f (loss %.4f, macro F1 %.4f), "
                   "%.0f samples/s, epoch %.2fs (median), peak memory %.1f MiB; recorded in %s\n",
                   static_cast<long long>(*run_id), format_duration(r.seconds).c_str(), r.final_loss, r.test.accuracy,
                   r.test.loss, r.test.macro_f1, r.samples_per_s, r.median_epoch_seconds, static_cast<double>(r.peak_bytes) / (1 << 20),
                   o.db.c_str());
  }
  if (o.json) {
    nlohmann::json j{{"run_id", *run_id},
                     {"status", status},
                     {"epochs", static_cast<int64_t>(r.epoch_seconds.size())},
                     {"steps", r.steps},
                     {"final_loss", r.final_loss},
                     {"test_accuracy", r.has_test ? nlohmann::json(r.test.accuracy) : nlohmann::json()},
                     {"test_loss", r.has_test ? nlohmann::json(r.test.loss) : nlohmann::json()},
                     {"test_macro_f1", r.has_test ? nlohmann::json(r.test.macro_f1) : nlohmann::json()},
                     {"seconds", r.seconds},
                     {"epoch_seconds", r.median_epoch_seconds},
                     {"epoch_seconds_all", r.epoch_seconds},
                     {"samples_per_s", r.samples_per_s},
                     {"peak_bytes", r.peak_bytes},
                     {"planned_arena_bytes", r.planned_arena_bytes},
                     {"device", device},
                     {"mode", std::string(nodes::to_string(t.mode))},
                     {"threads", backend.num_threads()},
                     {"db", o.db}};
    std::printf("%s\n", j.dump().c_str());
  }
  return r.interrupted ? 130 : 0;
}

}  // namespace mls::app
