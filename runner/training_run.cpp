#include "runner/training_run.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <filesystem>
#include <map>
#include <new>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "runner/checkpoints.h"
#include "runner/model_export.h"
#include "store/file_hash.h"
#include "store/process_owner.h"
#include "store/run_store.h"

namespace mls::runner {

namespace {

Result<void> write_state(const Trainer& trainer, const std::string& path) {
  auto st = trainer.state();
  if (!st) return st.error();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec)
    return make_error("cannot create " + std::filesystem::path(path).parent_path().string() + ": " +
                      ec.message());
  return write_checkpoint(*st, path);
}

void say(const std::function<void(const std::string&)>& f, const std::string& line) {
  if (f) f(line);
}

// Feeds the instruments from the training thread after every step: a point per step
// (stores and no lock), the allocator's figures, and twice a second (and at each epoch's
// end) a fresh op profile; the step's memory timeline once its plan exists.
ProgressFn telemetry_feed(Trainer& trainer, Telemetry& tm, const TrainConfig& cfg, ProgressFn next) {
  tm.planned_epochs.store(cfg.epochs);
  tm.running.store(true);
  auto t0 = std::chrono::steady_clock::now();
  auto last_publish = std::make_shared<double>(-1.0);
  return [&trainer, &tm, cfg, next = std::move(next), t0, last_publish](const ProgressInfo& i) {
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const MemoryStats mem = trainer.backend().memory().stats();
    if (!i.epoch_done) {
      tm.batches_per_epoch.store(i.batches, std::memory_order_relaxed);
      tm.steps.push({.step = i.step,
                     .epoch = i.epoch,
                     .seconds = now,
                     .loss = static_cast<float>(i.step_loss),
                     .lr = static_cast<float>(i.lr),
                     .samples_per_s = static_cast<float>(i.samples_per_s),
                     .eta_s = static_cast<float>(i.eta_s),
                     .memory_bytes = mem.total_current});
    }
    tm.publish_allocator(mem);
    if (cfg.mode == ExecMode::Static && (i.epoch_done || now - *last_publish >= 0.5)) {
      *last_publish = now;
      if (auto plan = trainer.training_plan(cfg.batch_size); plan.ok()) {
        tm.publish_ops(std::make_shared<OpProfile>(op_profile(**plan)));
        if (!tm.memory())
          if (auto tl = trainer.memory_timeline(cfg.batch_size); tl.ok())
            tm.publish_memory(std::make_shared<MemoryTimeline>(std::move(*tl)));
      }
    }
    if (next) next(i);
  };
}

// The editor's overlays after a run: time per node from the profiled plan, and each node's
// output on one batch of held-out data (test, else validation, else training).
void inspect_run(Trainer& trainer, const Project& p, RunOutcome& out) {
  if (out.mode == "static") {
    auto plan = trainer.training_plan(out.config.batch_size);
    if (plan) out.node_times = time_by_label(**plan);
  } else {
    out.inspect_note = "per-node times need the static mode (the run was " + out.mode + ")";
  }
  BatchSource* src = p.test ? p.test.get() : p.validation ? p.validation.get() : p.train.get();
  HostBatch batch;
  src->start_epoch(0);
  if (!src->next(std::min<int64_t>(256, src->num_samples()), batch) || batch.size == 0) return;
  auto model = p.builder()(batch.size, false);
  if (!model) {
    out.inspect_note = model.error().message;
    return;
  }
  auto stats = output_stats(trainer.backend(), std::move(*model), trainer.params(), batch);
  if (stats)
    out.node_outputs = std::move(*stats);
  else
    out.inspect_note = stats.error().message;
}

using Params = std::vector<std::pair<std::string, std::string>>;

const std::string* find_param(const Params& ps, const std::string& key) {
  for (const auto& [k, v] : ps)
    if (k == key) return &v;
  return nullptr;
}

// A resumed run keeps the data it was started on: the recorded --limit / --test-limit
// apply unless given again, and a different value is refused.
Result<ProjectOptions> resume_options(const ProjectOptions& asked, const Params& recorded,
                                      int64_t run_id) {
  ProjectOptions o = asked;
  for (auto [key, flag, value] : {std::tuple{"limit", "--limit", &o.limit},
                                  std::tuple{"test_limit", "--test-limit", &o.test_limit}}) {
    const std::string* r = find_param(recorded, key);
    if (!r) continue;  // a run recorded before these were: the sample counts are checked later
    const int64_t was = std::stoll(*r);
    if (*value && **value != was)
      return make_error("run " + std::to_string(run_id) + " was started with " + flag + " " +
                        std::to_string(was) + "; resuming it with " + flag + " " +
                        std::to_string(**value) + " would train on different data (leave " + flag +
                        " out to resume as recorded, or start a new run)");
    *value = was;
  }
  return o;
}

// Everything that decides a resumed run's result must be what the run recorded; a flag or
// an edit of the project that changes it is refused, naming the setting.
Result<void> check_resume_settings(const Params& recorded, const store::RunInfo& info,
                                   const TrainConfig& cfg, const Project& p,
                                   const ProjectOptions& asked, int64_t run_id) {
  Params now = config_params(cfg);
  now.insert(now.end(), {{"mode", std::string(nodes::to_string(p.doc.training.mode))},
                         {"dataset", p.doc.dataset.source + ":" + p.doc.dataset.path},
                         {"train_samples", std::to_string(p.train->num_samples())},
                         {"validation_samples",
                          std::to_string(p.validation ? p.validation->num_samples() : 0)},
                         {"test_samples", std::to_string(p.test ? p.test->num_samples() : 0)}});
  const std::map<std::string, std::pair<const char*, bool>> flags = {
      {"batch_size", {"--batch-size", bool(asked.batch_size)}},
      {"lr", {"--lr", bool(asked.lr)}},
      {"precision", {"--precision", bool(asked.precision)}},
      {"mode", {"--mode", bool(asked.mode)}}};
  for (const auto& [key, value] : now) {
    if (key == "epochs") continue;  // a resumed run may be given more epochs
    const std::string* was = find_param(recorded, key);
    if (!was || *was == value) continue;
    const auto flag = flags.find(key);
    const std::string cause = flag != flags.end() && flag->second.second
                                  ? std::string("resuming with ") + flag->second.first + " " + value
                                  : p.path + " now has " + key + " " + value;
    return make_error("run " + std::to_string(run_id) + " was recorded with " + key + " " + *was +
                      ", but " + cause +
                      ": a resumed run keeps its recorded settings (resume without the change, "
                      "or start a new run for it)");
  }
  if (cfg.seed != info.seed)
    return make_error("run " + std::to_string(run_id) + " was recorded with seed " +
                      std::to_string(info.seed) + ", but " +
                      (asked.seed ? "resuming with --seed " : p.path + " now has seed ") +
                      std::to_string(cfg.seed) +
                      ": a resumed run keeps its recorded settings (resume without the change, "
                      "or start a new run for it)");
  return {};
}

}  // namespace

std::string eval_text(const EvalResult& e) {
  char buf[160];
  if (e.regression)
    std::snprintf(buf, sizeof buf, "MAE %.4f, RMSE %.4f, R² %.4f (loss %.4f)", e.values.mae,
                  e.values.rmse, e.values.r2, e.loss);
  else
    std::snprintf(buf, sizeof buf, "accuracy %.4f (loss %.4f, macro F1 %.4f)", e.accuracy, e.loss,
                  e.macro_f1);
  return buf;
}

Result<RunOutcome> run_training(const RunRequest& o, const RunEvents& events) {
  auto store = store::RunStore::open(o.db);
  if (!store) return store.error();
  for (int64_t gone : (*store)->closed_stale_runs()) {
    say(events.warning, "run " + std::to_string(gone) + " in " + o.db +
                            " was left running by a process that is gone (killed or crashed); "
                            "it is now recorded as interrupted");
    if (int n = remove_unfinished_checkpoints(o.db, gone); n > 0)
      say(events.warning, "removed " + std::to_string(n) +
                              " unfinished checkpoint file(s) of run " + std::to_string(gone));
  }
  int64_t run_id = 0;
  std::optional<store::RunInfo> info;
  Params recorded;
  ProjectOptions options = o.project;
  if (o.resume) {
    run_id = *o.resume;
    auto ri = (*store)->get_run(run_id);
    if (!ri) return ri.error();
    info = std::move(*ri);
    // Two processes must not train one run: one that is alive keeps it.
    if (info->status == "running" && !info->owner.empty() && !store::owner_gone(info->owner))
      return make_error("run " + std::to_string(run_id) +
                        " is being trained right now by process " + info->owner +
                        " (wait for it, or stop it first)");
    // What a killed attempt left half-written is not a checkpoint.
    remove_unfinished_checkpoints(o.db, run_id);
    auto params = (*store)->params(run_id);
    if (!params) return params.error();
    recorded = std::move(*params);
    auto resumed = resume_options(o.project, recorded, run_id);
    if (!resumed) return resumed.error();
    options = std::move(*resumed);
  }
  auto project = open_project(options);
  if (!project) return project.error();
  Project& p = *project;
  // A validation share that leaves less than one batch to train on is almost surely a typo
  // (0.9999999 for 0.1): the run goes on, but says so.
  if (const double v = p.doc.dataset.validation;
      v > 0 && p.train->num_samples() < p.doc.training.batch_size) {
    const int64_t n = p.train->num_samples();
    say(events.warning, p.path + ": /dataset/validation " + nlohmann::json(v).dump() + " leaves " +
                            std::to_string(n) + " training sample" + (n == 1 ? "" : "s") +
                            ", fewer than one batch (" + std::to_string(p.doc.training.batch_size) +
                            ")");
  }
  auto opened = open_backend(p);  // registered (open_project checked); a driver may still fail
  if (!opened) return opened.error();
  Backend& backend = **opened;
  TrainConfig cfg = p.train_config();
  auto hash = store::file_hash_hex(p.path);
  if (!hash) return hash.error();
  const std::string device = std::string(backend.name());
  const nodes::TrainingSpec& t = p.doc.training;
  if (o.resume) {
    if (auto r = check_resume_settings(recorded, *info, cfg, p, o.project, run_id); !r)
      return r.error();
    // Without --epochs, a resumed run keeps the length it was planned with (its schedule spans it).
    if (!o.project.epochs)
      if (const std::string* e = find_param(recorded, "epochs")) cfg.epochs = std::stoll(*e);
  }
  cfg.stop_after_epochs = o.stop_after_epochs;
  Trainer trainer(backend, p.builder(), cfg);
  trainer.set_profiling(o.inspect || o.telemetry);
  if (o.trace) trainer.set_trace(o.trace);
  if (o.resume) {
    if (info->project_hash != *hash)
      say(events.warning, p.path + " changed since run " + std::to_string(run_id) +
                              " started; resuming with its saved state");
    auto used = load_run_checkpoint(trainer, o.db, run_id, "last");
    if (!used) return used.error();
    if (trainer.epochs_done() >= cfg.epochs)
      return make_error("run " + std::to_string(run_id) + " has already trained " +
                        std::to_string(trainer.epochs_done()) +
                        " epochs; ask for more with --epochs N (N > " +
                        std::to_string(trainer.epochs_done()) + ")");
    if (auto r = (*store)->resume_run(run_id, {trainer.steps_done(), trainer.epochs_done()}); !r)
      return r.error();
    if (auto r = (*store)->log_param(run_id, "epochs", std::to_string(cfg.epochs)); !r)
      return r.error();
    say(events.message, "resuming run " + std::to_string(run_id) + " from " + *used + " (epoch " +
                            std::to_string(trainer.epochs_done()) + ", step " +
                            std::to_string(trainer.steps_done()) + ")");
  } else {
    auto id = (*store)->begin_run({.name = p.doc.name,
                                   .project_path = std::filesystem::absolute(p.path).string(),
                                   .project_hash = *hash,
                                   .device = device,
                                   .seed = cfg.seed});
    if (!id) return id.error();
    run_id = *id;
    auto params = config_params(cfg);
    params.insert(
        params.end(),
        {{"mode", std::string(nodes::to_string(t.mode))},
         {"threads", std::to_string(backend.num_threads())},
         {"dataset", p.doc.dataset.source + ":" + p.doc.dataset.path},
         {"train_samples", std::to_string(p.train->num_samples())},
         {"validation_samples", std::to_string(p.validation ? p.validation->num_samples() : 0)},
         {"test_samples", std::to_string(p.test ? p.test->num_samples() : 0)},
         {"limit", std::to_string(p.doc.dataset.limit)},
         {"test_limit", std::to_string(p.doc.dataset.test_limit)},
         {"checkpoint_dir", checkpoint_dir(o.db, run_id)}});
    for (const auto& [k, v] : params)
      if (auto r = (*store)->log_param(run_id, k, v); !r) return r.error();
  }

  say(events.message, "run " + std::to_string(run_id) + ": " + p.path + ", " +
                          std::to_string(cfg.epochs) + " epochs, " +
                          std::to_string(p.train->num_samples()) + " training samples, batch " +
                          std::to_string(cfg.batch_size) + ", " + cfg.opt.type + " " +
                          std::string(nodes::to_string(t.mode)) + " on " + device + " (" +
                          std::to_string(backend.num_threads()) + " threads)");
  const std::string last_path = checkpoint_path(o.db, run_id, "last");
  const std::string best_path = checkpoint_path(o.db, run_id, "best");
  FitInputs in{.train = *p.train,
               .validation = p.validation.get(),
               .test = p.test.get(),
               .sink = store->get()};
  in.progress = events.progress;
  if (o.telemetry) in.progress = telemetry_feed(trainer, *o.telemetry, cfg, events.progress);
  in.cancel = events.cancel;
  in.on_epoch_end = [&](const EpochReport& rep) -> Result<void> {
    // The epoch's metrics are committed before its checkpoint: a kill in between leaves
    // metrics past the older checkpoint, which a resume drops, never a checkpoint whose
    // metrics are missing.
    if (auto r = (*store)->flush(); !r) return r;
    if (auto r = write_state(trainer, last_path); !r) return r;
    if (rep.improved)
      if (auto r = write_state(trainer, best_path); !r) return r;
    if (o.telemetry)
      o.telemetry->epochs.push({.epoch = rep.epoch,
                                .seconds = rep.seconds,
                                .train_loss = rep.train_loss,
                                .has_validation = rep.has_validation,
                                .val_loss = rep.validation.loss,
                                .val_accuracy = rep.validation.accuracy});
    if (events.epoch_end) events.epoch_end(rep);
    return {};
  };
  std::optional<PreflightEstimate> estimate;
  if (o.preflight && cfg.mode == ExecMode::Static) {
    auto e = preflight(p.builder(), cfg, backend, device_rates(backend),
                       {.samples_per_epoch = p.train->num_samples(),
                        .eval_samples = {p.validation ? p.validation->num_samples() : 0,
                                         p.test ? p.test->num_samples() : 0}});
    // A model that cannot be planned fails in fit() below with the same message.
    if (e) {
      if (!e->fits && e->free_bytes)
        say(events.warning, "a training step needs " + bytes_text(e->total_bytes) + " but only " +
                                bytes_text(*e->free_bytes) + " is free: it will likely run out of memory" +
                                (e->max_batch > 0 ? "; the largest batch that fits is " + std::to_string(e->max_batch)
                                                  : std::string()));
      if (events.preflight) events.preflight(*e);
      estimate = std::move(*e);
    }
  }
  // An imported model starts from its own weights (the project's "weights" file).
  if (!o.resume && !p.doc.weights.empty()) {
    if (auto r = trainer.init(); !r) return r.error();
    if (auto r = apply_initial_weights(trainer, p); !r) return r.error();
  }
  // A device that lacks kernels runs those nodes on the host: say which, before training.
  if (cfg.mode == ExecMode::Static && backend.kind() != DeviceKind::CPU) {
    if (!trainer.initialized())
      if (auto r = trainer.init(); !r) return r.error();
    auto plan = trainer.training_plan(cfg.batch_size);
    if (!plan) return plan.error();
    const auto& fb = (*plan)->fallbacks();
    if (!(*plan)->placed().empty()) {
      std::string list;
      for (const std::string& f : (*plan)->placed()) list += (list.empty() ? "" : ", ") + f;
      say(events.message, std::to_string((*plan)->placed().size()) + " node" +
                              ((*plan)->placed().size() == 1 ? "" : "s") +
                              " of the training step run on the CPU, as the project places them: " + list);
    }
    if (!fb.empty()) {
      std::string list;
      for (const std::string& f : fb) list += (list.empty() ? "" : ", ") + f;
      say(events.warning, device + " has no kernel for " + std::to_string(fb.size()) + " node" +
                              (fb.size() == 1 ? "" : "s") + " of the training step; they run on the CPU with " +
                              std::to_string((*plan)->stats().transfers) + " transfers per step (" +
                              bytes_text(static_cast<int64_t>((*plan)->stats().transfer_bytes)) + "): " + list);
    }
  }
  // The run's peak is the run's: not the pre-flight's probes, not what came before.
  backend.memory().reset_peaks();
  Result<TrainResult> result = make_error("not started");
  try {
    result = trainer.fit(in);
  } catch (const std::bad_alloc&) {
    // The one exception the engine lets through: a model too large for this machine.
    result = make_error(
        "out of memory: the model or a batch does not fit (try a smaller batch size or layer)");
  }
  if (o.telemetry) {
    // The evaluation after the last step allocates too: the final figures, peak included.
    o.telemetry->publish_allocator(backend.memory().stats());
    o.telemetry->running.store(false);
  }
  if (!result) {
    // Say what the database holds, read back: when the failure was the database itself (a
    // lock held past the busy timeout), recording the failure can fail too, and the run is
    // then closed as interrupted by the next open.
    auto e = (*store)->end_run(run_id, "failed");
    auto stored = (*store)->get_run(run_id);
    const std::string id = "run " + std::to_string(run_id);
    if (stored && stored->status == "failed")
      return make_error(result.error().message + " (" + id + " recorded as failed in " + o.db +
                        ")");
    return make_error(
        result.error().message + " (" + id + " could not be recorded as failed in " + o.db + ": " +
        (e ? std::string("its status reads '") + (stored ? stored->status : "unknown") + "'"
           : e.error().message) +
        "; the next run or open marks it interrupted)");
  }
  RunOutcome out;
  out.run_id = run_id;
  out.result = std::move(*result);
  // A run stopped on purpose (stop_after_epochs) is recorded as interrupted: it can resume.
  out.status = out.result.interrupted || out.result.paused ? "interrupted" : "finished";
  if (auto e = (*store)->end_run(run_id, out.status); !e) return e.error();
  out.epochs_done = trainer.epochs_done();
  out.planned_epochs = cfg.epochs;
  out.config = cfg;
  out.device = device;
  out.mode = std::string(nodes::to_string(t.mode));
  out.precision = std::string(precision_name(cfg.precision));
  out.threads = backend.num_threads();
  out.last_checkpoint = last_path;
  out.db = o.db;
  out.preflight = std::move(estimate);
  if (o.inspect) inspect_run(trainer, p, out);
  return out;
}

double RunOutcome::step_seconds() const {
  if (epochs_done < 1 || result.steps < 1) return 0;
  const double steps_per_epoch = std::ceil(static_cast<double>(result.steps) / static_cast<double>(epochs_done));
  return result.median_epoch_seconds / steps_per_epoch;
}

const DeviceRates& device_rates(Backend& backend) {
  static std::mutex mu;
  static std::map<const Backend*, DeviceRates> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(&backend);
  if (it == known.end()) it = known.emplace(&backend, measure_device_rates(backend)).first;
  return it->second;
}

std::string bytes_text(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  char s[32];
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(s, sizeof s, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(s, sizeof s, "%.2f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(s, sizeof s, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(s, sizeof s, "%lld B", static_cast<long long>(bytes));
  return s;
}

}  // namespace mls::runner
