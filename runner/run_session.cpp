// [SECTION] helpers     checkpoints, telemetry, the resume checks
// [SECTION] session     run_session: open or reopen, train, close
// [SECTION] text        the lines a person reads
#include "runner/run_session.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <numeric>

#include <nlohmann/json.hpp>

#include "engine/train/progress_line.h"
#include "nodes/json_text.h"
#include "runner/checkpoints.h"
#include "runner/ranks.h"
#include "runner/system_info.h"
#include "store/process_owner.h"

namespace mls::runner {

namespace {

// [SECTION] helpers

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

std::string with_id(std::string text, int64_t id) {
  const std::string key = "{id}";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at))
    text.replace(at, key.size(), std::to_string(id));
  return text;
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

// A run keeps about this many epoch checkpoints for forks: every epoch of a short run, every
// k-th of a long one (and its last), so a 1000-epoch run does not keep 1000 files.
constexpr int64_t kKeptEpochs = 20;

// Links `last` to epoch-E.ckpt beside it (when epoch E is one to keep) and records them (and
// `best` when it was written) as the run's artifacts, with the step each holds. Returns the
// epoch file's path ("" when this epoch is not one to keep).
Result<std::string> keep_epoch_checkpoint(store::RunStore& store, int64_t run_id, const std::string& last,
                                   const std::string& best, bool improved, int64_t step,
                                   int64_t epoch, int64_t planned_epochs) {
  namespace fs = std::filesystem;
  const int64_t stride = std::max<int64_t>(1, (planned_epochs + kKeptEpochs - 1) / kKeptEpochs);
  const bool keep = epoch % stride == 0 || epoch >= planned_epochs;
  const std::string kept =
      (fs::path(last).parent_path() / ("epoch-" + std::to_string(epoch) + ".ckpt")).string();
  std::error_code ec;
  if (keep) {
    fs::remove(kept, ec);  // a resumed run redoes an epoch a lost attempt had kept
    fs::create_hard_link(last, kept, ec);
    if (ec) fs::copy_file(last, kept, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error("cannot keep " + kept + ": " + ec.message());
  }
  // Absolute: the store reads a relative path against the database's folder, and these are
  // relative to the working folder.
  auto record = [&](const std::string& path) -> Result<void> {
    auto id = store.add_artifact(run_id, "checkpoint", fs::absolute(path).lexically_normal().string(), step);
    if (!id) return id.error();
    return {};
  };
  if (auto r = record(last); !r) return r.error();
  if (keep)
    if (auto r = record(kept); !r) return r.error();
  if (improved)
    if (auto r = record(best); !r) return r.error();
  return keep ? kept : std::string();
}

const std::string* find_param(const Params& ps, const std::string& key) {
  for (const auto& [k, v] : ps)
    if (k == key) return &v;
  return nullptr;
}

// What decides a run's result: the config's params and the model's settings.
Params result_settings(const RunModel& m) {
  Params now = config_params(m.config);
  now.push_back({"mode", m.mode});
  now.insert(now.end(), m.settings.begin(), m.settings.end());
  return now;
}

// Everything that decides a resumed run's result must be what the run recorded; a change
// is refused, naming the setting.
Result<void> check_resume_settings(const Resumed& was, const RunModel& m) {
  const std::string run = "run " + std::to_string(was.run_id);
  auto cause = [&](const std::string& key, const std::string& value) {
    return m.explain_change ? m.explain_change(key, value) : "it is now " + value;
  };
  const std::string keep =
      ": a resumed run keeps its recorded settings (resume without the change, or start a new "
      "run for it)";
  for (const auto& [key, value] : result_settings(m)) {
    if (key == "epochs") continue;  // a resumed run may be given more epochs
    const std::string* recorded = was.param(key);
    if (!recorded || *recorded == value) continue;
    return make_error(run + " was recorded with " + key + " " + *recorded + ", but " +
                      cause(key, value) + keep);
  }
  if (m.config.seed != was.info.seed)
    return make_error(run + " was recorded with seed " + std::to_string(was.info.seed) + ", but " +
                      cause("seed", std::to_string(m.config.seed)) + keep);
  return {};
}

// Says which nodes of the training step run on the host, before training on a device.
Result<void> report_placement(Trainer& trainer, const TrainConfig& cfg, const std::string& device,
                              const RunEvents& events) {
  if (!trainer.initialized())
    if (auto r = trainer.init(); !r) return r.error();
  auto plan = trainer.training_plan(cfg.batch_size);
  if (!plan) return plan.error();
  auto joined = [](const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& f : names) list += (list.empty() ? "" : ", ") + f;
    return list;
  };
  const auto& placed = (*plan)->placed();
  if (!placed.empty())
    say(events.message, std::to_string(placed.size()) + " node" + (placed.size() == 1 ? "" : "s") +
                            " of the training step run on the CPU, as the project places them: " +
                            joined(placed));
  const auto& fb = (*plan)->fallbacks();
  if (!fb.empty())
    say(events.warning,
        device + " has no kernel for " + std::to_string(fb.size()) + " node" +
            (fb.size() == 1 ? "" : "s") + " of the training step; they run on the CPU with " +
            std::to_string((*plan)->stats().transfers) + " transfers per step (" +
            bytes_text(static_cast<int64_t>((*plan)->stats().transfer_bytes)) + "): " + joined(fb));
  return {};
}

}  // namespace

const std::string* Resumed::param(const std::string& key) const { return find_param(params, key); }

// [SECTION] session

namespace {

// Opens the store (closing the runs dead processes left running) and reads the run to resume.
Result<std::unique_ptr<store::RunStore>> open_store(const RunOptions& o, const RunEvents& events,
                                                    std::optional<Resumed>& was) {
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
  if (o.resume) {
    Resumed r;
    r.run_id = *o.resume;
    auto ri = (*store)->get_run(r.run_id);
    if (!ri) return ri.error();
    r.info = std::move(*ri);
    // Two processes must not train one run: one that is alive keeps it.
    if (r.info.status == "running" && !r.info.owner.empty() && !store::owner_gone(r.info.owner))
      return make_error("run " + std::to_string(r.run_id) +
                        " is being trained right now by process " + r.info.owner +
                        " (wait for it, or stop it first)");
    // What a killed attempt left half-written is not a checkpoint.
    remove_unfinished_checkpoints(o.db, r.run_id);
    auto params = (*store)->params(r.run_id);
    if (!params) return params.error();
    r.params = std::move(*params);
    was = std::move(r);
  }
  return std::move(*store);
}

// What rank 0 read from the store, as text for the ranks that have none: the run to resume
// (what the model factory and the resume checks read), or why rank 0 stopped.
std::string start_text(const Result<std::unique_ptr<store::RunStore>>& opened,
                       const std::optional<Resumed>& was) {
  if (!opened) return nodes::json_text({{"error", opened.error().message}});
  if (!was) return nodes::json_text({{"resume", nullptr}});
  nlohmann::json params = nlohmann::json::array();
  for (const auto& [k, v] : was->params) params.push_back({k, v});
  return nodes::json_text({{"resume",
                            {{"run_id", was->run_id},
                             {"seed", was->info.seed},
                             {"project_hash", was->info.project_hash},
                             {"world_size", was->info.world_size},
                             {"params", params}}}});
}

Result<std::optional<Resumed>> read_start_text(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error("rank 0 sent an unreadable start");
  if (j.contains("error")) return make_error("stopped: rank 0 could not start the run");
  const auto& r = j["resume"];
  if (r.is_null()) return std::optional<Resumed>();
  Resumed was;
  was.run_id = r.value("run_id", int64_t{0});
  was.info.id = was.run_id;
  was.info.seed = r.value("seed", uint64_t{0});
  was.info.project_hash = r.value("project_hash", std::string());
  was.info.world_size = r.value("world_size", int64_t{1});
  for (const auto& kv : r["params"])
    was.params.push_back({kv.at(0).get<std::string>(), kv.at(1).get<std::string>()});
  return std::optional<Resumed>(std::move(was));
}

// Every rank of a job passes this before its first step, ready or not: one that returns early
// (its data missing on its host, a resume that rank 0 refused) says so on its way out, so the
// others stop at once instead of waiting out the collective's timeout in the first all-reduce.
class StartGate {
 public:
  explicit StartGate(Collective* job) : job_(job) {}
  StartGate(const StartGate&) = delete;
  StartGate& operator=(const StartGate&) = delete;
  ~StartGate() {
    if (job_ && !passed_) (void)pass(false);
  }
  // An error names the ranks that were not ready (this rank's own reason is its caller's).
  Result<void> pass(bool ready) {
    passed_ = true;
    if (!job_) return {};
    auto late = ranks_not_ready(*job_, ready);
    if (!late) return late.error();
    std::string names;
    for (int r : *late)
      if (r != job_->rank()) names += (names.empty() ? "" : ", ") + rank_name(*job_, r);
    if (names.empty()) return {};
    if (job_->rank() == 0)
      return make_error(names + " could not start the run (its own message says why)");
    return make_error("stopped: " + names + " could not start the run");
  }

 private:
  Collective* job_;
  bool passed_ = false;
};

// A run trained on one number of ranks and resumed on another keeps its global batch (the
// samples one update averages over): each rank now takes global / ranks. The project's batch
// size (recorded as batch_size, per rank) was checked against the record already.
Result<int64_t> resumed_batch(const Resumed& was, int64_t batch, int world) {
  int64_t global = batch;
  if (const std::string* g = was.param("global_batch_size")) global = std::stoll(*g);
  if (global % world != 0)
    return make_error("run " + std::to_string(was.run_id) + " trained with a global batch of " +
                      std::to_string(global) + " samples, which " + std::to_string(world) +
                      " ranks cannot share evenly: resume it on a number of ranks that divides " +
                      std::to_string(global));
  return global / world;
}

Result<RunOutcome> session(const RunOptions& o, Collective* job, const ModelFactory& make_model,
                           const RunEvents& events) {
  // Rank 0 (or a run of one process) alone holds the store, the checkpoints and the messages.
  const bool lead = !job || job->rank() == 0;
  const int world = job ? job->size() : 1;
  // A breakpoint fires on one rank's batch: that rank alone would stop, the others wait for it.
  if (job && o.breaks.any())
    return make_error(
        "breakpoints (--break) stop one process's run; a data-parallel job of " +
        std::to_string(world) +
        " ranks cannot pause on one rank's batch yet (run it without mpirun to debug it)");
  std::unique_ptr<store::RunStore> store_owner;
  std::optional<Resumed> was;
  if (lead) {
    auto opened = open_store(o, events, was);
    if (job)
      if (auto sent = share_text(*job, start_text(opened, was)); !sent && opened)
        return sent.error();
    if (!opened) return opened.error();
    store_owner = std::move(*opened);
  } else {
    auto text = share_text(*job, "");
    if (!text) return text.error();
    auto got = read_start_text(*text);
    if (!got) return got.error();
    was = std::move(*got);
  }
  store::RunStore* store = store_owner.get();
  // Twice every rank says whether it is ready: once it has its model and data (before rank 0
  // records anything), and before the first step.
  StartGate model_gate(job);
  auto made = make_model(was ? &*was : nullptr);
  if (!made) return made.error();
  RunModel& m = *made;
  Backend& backend = *m.backend;
  TrainConfig cfg = m.config;
  const std::string device = std::string(backend.name());
  int64_t run_id = 0;
  if (was) {
    run_id = was->run_id;
    if (auto r = check_resume_settings(*was, m); !r) return r.error();
    if (!m.epochs_asked)
      if (const std::string* e = was->param("epochs")) cfg.epochs = std::stoll(*e);
    auto batch = resumed_batch(*was, cfg.batch_size, world);
    if (!batch) return batch.error();
    if (*batch != cfg.batch_size) {
      const std::string* ws = was->param("world_size");
      say(events.message,
          "run " + std::to_string(run_id) + " trained " + std::to_string(cfg.batch_size) +
              " samples a step on each of " + (ws ? *ws : std::string("1")) + " rank(s); each of " +
              std::to_string(world) + " now takes " + std::to_string(*batch) + ", the same " +
              std::to_string(*batch * world) + " samples an update");
      cfg.batch_size = *batch;
    }
  }
  if (auto ready = model_gate.pass(true); !ready) return ready.error();
  StartGate gate(job);
  cfg.stop_after_epochs = o.stop_after_epochs;
  cfg.breaks = o.breaks;
  cfg.health = o.health;
  Trainer trainer(backend, m.builder, cfg);
  trainer.set_profiling(o.inspect || o.telemetry);
  if (o.trace) trainer.set_trace(o.trace);
  // The trainer's own broadcast at the start of fit gives the other ranks rank 0's state: they
  // read no checkpoint, record nothing, and start from nothing of their own.
  if (job) trainer.set_collective(job);
  const std::string hosts = job ? hosts_text(*job) : std::string();
  if (was && lead) {
    if (!m.source_hash.empty() && was->info.project_hash != m.source_hash)
      say(events.warning, m.source + " changed since run " + std::to_string(run_id) +
                              " started; resuming with its saved state");
    auto used = load_run_checkpoint(trainer, o.db, run_id, "last");
    if (!used) return used.error();
    if (trainer.epochs_done() >= cfg.epochs)
      return make_error("run " + std::to_string(run_id) + " has already trained " +
                        std::to_string(trainer.epochs_done()) +
                        " epochs; ask for more with --epochs N (N > " +
                        std::to_string(trainer.epochs_done()) + ")");
    if (auto r = store->resume_run(run_id, {trainer.steps_done(), trainer.epochs_done()}); !r)
      return r.error();
    if (auto r = store->log_param(run_id, "epochs", std::to_string(cfg.epochs)); !r)
      return r.error();
    // The ranks it trains on now (the first attempt's are its world_size column).
    if (job || was->param("world_size"))
      if (auto r = store->log_param(run_id, "world_size", std::to_string(world)); !r)
        return r.error();
    if (job)
      if (auto r = store->log_param(run_id, "hosts", hosts); !r) return r.error();
    say(events.message, "resuming run " + std::to_string(run_id) + " from " + *used + " (epoch " +
                            std::to_string(trainer.epochs_done()) + ", step " +
                            std::to_string(trainer.steps_done()) + ")");
  } else if (lead) {
    // The starting weights are set before the run is recorded: a script whose tensors do not
    // fit its model fails without leaving a run behind.
    std::optional<Checkpoint> fork_state;
    if (o.fork) {
      auto ck = read_checkpoint(o.fork->checkpoint);
      if (!ck) return ck.error();
      if (cfg.epochs <= ck->epoch)
        return make_error("run " + std::to_string(o.fork->parent) + "'s checkpoint " +
                          o.fork->checkpoint + " has trained " + std::to_string(ck->epoch) +
                          " epochs already; give the fork more (--epochs N, N > " +
                          std::to_string(ck->epoch) + ")");
      fork_state = std::move(*ck);
    } else if (m.initial_weights) {
      if (auto r = trainer.init(); !r) return r.error();
      if (auto r = m.initial_weights(trainer); !r) return r.error();
    }
    std::optional<Trainer::Transfer> taken;
    if (fork_state) {
      auto t = trainer.transfer(*fork_state);
      if (!t) return make_error(o.fork->checkpoint + ": " + t.error().message);
      taken = std::move(*t);
    }
    store::NewRun nr{.name = m.name,
                     .project_path = m.source_path,
                     .project_hash = m.source_hash,
                     .device = device,
                     .seed = cfg.seed};
    nr.experiment = o.experiment;
    nr.world_size = world;
    if (o.fork) {
      nr.parent_run_id = o.fork->parent;
      nr.fork_step = fork_state->step;
    }
    if (o.sweep_trial) {
      nr.sweep_id = o.sweep_trial->sweep;
      nr.trial = o.sweep_trial->trial;
    }
    auto id = store->begin_run(nr);
    if (!id) return id.error();
    run_id = *id;
    if (o.fork) {
      if (auto r = store->copy_metrics(o.fork->parent, run_id, fork_state->step, fork_state->epoch);
          !r)
        return r.error();
      auto joined = [](const std::vector<std::string>& v) {
        std::string s;
        for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
      };
      say(events.message, "run " + std::to_string(run_id) + " forks run " +
                              std::to_string(o.fork->parent) + " at step " +
                              std::to_string(fork_state->step) + " (epoch " +
                              std::to_string(fork_state->epoch) + ", " + o.fork->checkpoint + ")");
      if (!taken->fresh_params.empty())
        say(events.warning, "the fork's model differs: " + joined(taken->fresh_params) +
                                " start from a fresh initialisation");
      if (!taken->dropped.empty())
        say(events.warning, "parameters of run " + std::to_string(o.fork->parent) +
                                " the fork no longer has: " + joined(taken->dropped));
      if (!taken->optimizer_state)
        say(events.warning, "the optimizer changed: its state starts afresh");
    }
    if (auto r = store->set_system_info(run_id, system_info(backend)); !r) return r.error();
    Params params = result_settings(m);
    params.insert(params.end(), m.notes.begin(), m.notes.end());
    // Notes, not settings: a resume on another number of ranks keeps the global batch.
    if (job)
      params.insert(params.end(), {{"world_size", std::to_string(world)},
                                   {"hosts", hosts},
                                   {"global_batch_size", std::to_string(cfg.batch_size * world)}});
    params.push_back({"checkpoint_dir", checkpoint_dir(o.db, run_id)});
    for (const auto& [k, v] : params)
      if (auto r = store->log_param(run_id, k, v); !r) return r.error();
    if (!m.snapshot.text.empty())
      if (auto r = store->put_snapshot(run_id, m.snapshot); !r) return r.error();
  }

  std::string batch = std::to_string(cfg.batch_size);
  std::string ranks;
  if (job) {
    batch += " per rank (" + std::to_string(cfg.batch_size * world) + " an update)";
    ranks = ", " + std::to_string(world) + " ranks on " + hosts;
    // Said once: on a GPU the gradients go to the host and back every step.
    if (backend.kind() != DeviceKind::CPU)
      ranks += "; the gradients are averaged through host memory (copied off " + device +
               " and back each step)";
  }
  say(events.message, "run " + std::to_string(run_id) + ": " + m.source + ", " +
                          std::to_string(cfg.epochs) + " epochs, " +
                          std::to_string(m.train->num_samples()) + " training samples, batch " +
                          batch + ", " + cfg.opt.type + " " + m.mode + " on " + device + " (" +
                          std::to_string(backend.num_threads()) + " threads)" + ranks);
  const std::string last_path = checkpoint_path(o.db, run_id, "last");
  const std::string best_path = checkpoint_path(o.db, run_id, "best");
  FitInputs in{.train = *m.train, .validation = m.validation, .test = m.test, .sink = store};
  in.progress = events.progress;
  if (o.telemetry && lead)
    in.progress = telemetry_feed(trainer, *o.telemetry, cfg, events.progress);
  in.cancel = events.cancel;
  if (o.telemetry && lead)
    in.health = [tm = o.telemetry](const HealthSample& h) { tm->health.push(h); };
  std::string pruned_because;
  // The last state a breakpoint's fork can start from: the last epoch checkpoint kept (or the
  // start).
  int64_t healthy_step = trainer.steps_done();
  std::string healthy_checkpoint;
  if (cfg.breaks.any() && !was && lead) {
    // With breakpoints armed a fresh run keeps its starting state too: a fault in the first
    // epoch can then be forked from step 0 with a lower learning rate.
    const std::string start = (std::filesystem::path(last_path).parent_path() / "epoch-0.ckpt").string();
    Result<void> kept = trainer.initialized() ? Result<void>{} : trainer.init();
    if (kept) kept = write_state(trainer, start);
    if (kept)
      if (auto id = store->add_artifact(
              run_id, "checkpoint", std::filesystem::absolute(start).lexically_normal().string(),
              trainer.steps_done());
          !id)
        kept = id.error();
    if (kept) healthy_checkpoint = start;
    if (!kept) {
      (void)store->end_run(run_id, "failed");
      return make_error(kept.error().message + " (run " + std::to_string(run_id) +
                        " recorded as failed in " + o.db + ")");
    }
  }
  auto lead_epoch_end = [&](EpochReport& rep) -> Result<void> {
    // The epoch's metrics are committed before its checkpoint: a kill in between leaves
    // metrics past the older checkpoint, which a resume drops, never a checkpoint whose
    // metrics are missing.
    if (auto r = store->flush(); !r) return r;
    if (auto r = write_state(trainer, last_path); !r) return r;
    if (rep.improved)
      if (auto r = write_state(trainer, best_path); !r) return r;
    // Every epoch's state stays, for a fork at any epoch: a hard link to the file just
    // written (last.ckpt is replaced by a rename, so the link keeps this epoch's bytes).
    auto kept = keep_epoch_checkpoint(*store, run_id, last_path, best_path, rep.improved,
                                      trainer.steps_done(), rep.epoch, cfg.epochs);
    if (!kept) return kept.error();
    if (!kept->empty()) {
      healthy_step = trainer.steps_done();
      healthy_checkpoint = *kept;
    }
    if (o.prune)
      if (auto why = o.prune(run_id, rep)) {
        pruned_because = *why;
        rep.halt = true;
      }
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
  in.on_epoch_end = [&](EpochReport& rep) -> Result<void> {
    if (lead)
      if (auto r = lead_epoch_end(rep); !r) return r;
    // Every rank stops after the same epoch: rank 0's reasons (a sweep's pruning) are the job's.
    if (job) {
      double halt = rep.halt ? 1 : 0;
      if (auto r = job->sum(&halt, 1); !r) return r;
      rep.halt = halt > 0;
    }
    return {};
  };
  std::optional<PreflightEstimate> estimate;
  std::string unfit;  // why the run is refused before its first step (memory_check)
  if (o.preflight && lead && cfg.mode == ExecMode::Static) {
    auto e = preflight(m.builder, cfg, backend, device_rates(backend),
                       {.samples_per_epoch = m.train->num_samples(),
                        .eval_samples = {m.validation ? m.validation->num_samples() : 0,
                                         m.test ? m.test->num_samples() : 0}});
    // A model that cannot be planned fails in fit() below with the same message.
    if (e) {
      if (!e->fits && e->free_bytes) {
        const std::string need =
            "the run needs " + bytes_text(e->total_bytes) + " but only " +
            bytes_text(*e->free_bytes) + " is free" +
            (e->max_batch > 0 ? "; the largest batch that fits is " + std::to_string(e->max_batch)
                              : std::string());
        if (o.memory_check)
          unfit = need + " (the run was not started; to start it anyway: --no-memory-check, or "
                  "memory_check = false in mls.train)";
        else
          say(events.warning, need + ": it will likely run out of memory");
      }
      if (events.preflight) events.preflight(*e);
      estimate = std::move(*e);
    }
  }
  // A device that lacks kernels runs those nodes on the host: say which, before training.
  Result<void> placed;
  if (!unfit.empty())
    placed = make_error(unfit);
  else if (cfg.mode == ExecMode::Static && backend.kind() != DeviceKind::CPU)
    placed = report_placement(trainer, cfg, device, events);
  // Every rank is ready, or none trains.
  if (auto ready = gate.pass(placed.ok()); !ready && placed) placed = ready.error();
  // The run's peak is the run's: not the pre-flight's probes, not what came before.
  backend.memory().reset_peaks();
  Result<TrainResult> result = placed ? Result<TrainResult>(make_error("not started")) : placed.error();
  try {
    if (placed) result = trainer.fit(in);
  } catch (const std::bad_alloc&) {
    // The one exception the engine lets through: a model too large for this machine.
    result = make_error(
        "out of memory: the model or a batch does not fit (try a smaller batch size or layer)");
  }
  // A job whose training failed may have ranks still waiting in a collective for one that is
  // gone: the caller ends the job once it has said why, rather than wait in MPI's
  // finalisation. An interrupted job is in step: the stop flag travels with each step's
  // gradients, so every rank stopped after the same step and finalises normally.
  if (job && o.ranks_out_of_step && placed && !result)
    *o.ranks_out_of_step = true;
  if (!lead) {
    if (!result) return result.error();
    RunOutcome out;
    out.status = result->interrupted || result->paused ? "interrupted" : "finished";
    out.result = std::move(*result);
    out.epochs_done = trainer.epochs_done();
    out.planned_epochs = cfg.epochs;
    out.config = cfg;
    out.device = device;
    out.mode = m.mode;
    out.threads = backend.num_threads();
    if (m.after) m.after(trainer, out);
    return out;
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
    auto e = store->end_run(run_id, "failed");
    auto stored = store->get_run(run_id);
    const std::string id = "run " + std::to_string(run_id);
    // Where it can go on from: a rank that died, a full disk, are not the run's fault.
    std::string resume;
    if (std::filesystem::exists(last_path))
      resume = "; its last checkpoint " + last_path + " (epoch " +
               std::to_string(trainer.epochs_done()) + ") continues with " +
               with_id(m.resume_command, run_id);
    if (stored && stored->status == "failed")
      return make_error(result.error().message + " (" + id + " recorded as failed in " + o.db +
                        resume + ")");
    return make_error(
        result.error().message + " (" + id + " could not be recorded as failed in " + o.db + ": " +
        (e ? std::string("its status reads '") + (stored ? stored->status : "unknown") + "'"
           : e.error().message) +
        "; the next run or open marks it interrupted)");
  }
  RunOutcome out;
  out.run_id = run_id;
  out.result = std::move(*result);
  if (const auto& hit = out.result.breakpoint) {
    // The state the failing step started from, mid-epoch: --resume continues at that batch,
    // `runs fork ID --step N` starts a child from it (a lower learning rate, say).
    if (auto r = store->flush(); !r) return r.error();
    if (auto r = write_state(trainer, last_path); !r) return r.error();
    namespace fs = std::filesystem;
    out.break_checkpoint = (fs::path(last_path).parent_path() /
                            ("break-step-" + std::to_string(hit->step) + ".ckpt"))
                               .string();
    std::error_code ec;
    fs::remove(out.break_checkpoint, ec);
    fs::create_hard_link(last_path, out.break_checkpoint, ec);
    if (ec) fs::copy_file(last_path, out.break_checkpoint, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error("cannot keep " + out.break_checkpoint + ": " + ec.message());
    for (const std::string& p : {last_path, out.break_checkpoint})
      if (auto id =
              store->add_artifact(run_id, "checkpoint", fs::absolute(p).lexically_normal().string(),
                                  trainer.steps_done());
          !id)
        return id.error();
    std::string tag = std::string(break_kind_name(hit->kind)) + " at step " + std::to_string(hit->step);
    if (!hit->label.empty()) tag += " (" + hit->label + ")";
    if (auto r = store->set_tag(run_id, "breakpoint", tag); !r) return r.error();
    if (o.telemetry) o.telemetry->publish_break(std::make_shared<BreakHit>(*hit));
    out.healthy_step = healthy_step;
    out.healthy_checkpoint = healthy_checkpoint;
  }
  // A run stopped on purpose (stop_after_epochs) is recorded as interrupted: it can resume.
  out.status = !pruned_because.empty() ? "pruned"
               : out.result.interrupted || out.result.paused || out.result.breakpoint ? "interrupted"
                                                                                     : "finished";
  out.pruned_because = pruned_because;
  if (auto e = store->end_run(run_id, out.status); !e) return e.error();
  if (out.result.breakpoint) out.status = "paused";  // recorded as interrupted: it resumes
  out.epochs_done = trainer.epochs_done();
  out.planned_epochs = cfg.epochs;
  out.config = cfg;
  out.device = device;
  out.mode = m.mode;
  out.precision = std::string(precision_name(cfg.precision));
  out.threads = backend.num_threads();
  out.last_checkpoint = last_path;
  out.db = o.db;
  out.source = m.source;
  out.resume_command = with_id(m.resume_command, run_id);
  out.eval_command = with_id(m.eval_command, run_id);
  out.preflight = std::move(estimate);
  if (m.after) m.after(trainer, out);
  return out;
}

}  // namespace

Result<RunOutcome> run_session(const RunOptions& o, const ModelFactory& make_model,
                               const RunEvents& events) {
  Collective* job = o.collective && o.collective->size() > 1 ? o.collective : nullptr;
  if (!job || job->rank() == 0) return session(o, job, make_model, events);
  // The other ranks say nothing but their warnings and errors, each naming the rank and host.
  const std::string who = rank_prefix(*job);
  RunEvents quiet;
  quiet.cancel = events.cancel;
  if (events.warning)
    quiet.warning = [who, warn = events.warning](const std::string& line) { warn(who + line); };
  auto out = session(o, job, make_model, quiet);
  if (!out) return make_error(who + out.error().message);
  return out;
}

double RunOutcome::step_seconds() const {
  if (epochs_done < 1 || result.steps < 1) return 0;
  const double steps_per_epoch =
      std::ceil(static_cast<double>(result.steps) / static_cast<double>(epochs_done));
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

// [SECTION] text

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

namespace {

// Text that ends as a sentence does, with one full stop.
std::string sentence(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s + ".";
}

}  // namespace

std::string summary_line(const RunOutcome& out) {
  const TrainResult& r = out.result;
  const std::string run = std::to_string(out.run_id);
  if (out.status == "pruned")
    return "run " + run + " pruned after epoch " + std::to_string(out.epochs_done) + " of " +
           std::to_string(out.planned_epochs) + ": " + out.pruned_because + "; recorded in " +
           out.db;
  if (const auto& hit = r.breakpoint)
    return "run " + run + " paused by the " + break_kind_name(hit->kind) + " breakpoint: " +
           sentence(hit->message) + " The state before step " + std::to_string(hit->step) +
           " is kept in " + out.break_checkpoint + " (continue from it with " + out.resume_command +
           "); to train again from the last checkpoint before it with a lower learning rate: "
           "mlstudio runs fork " + run + " --step " + std::to_string(out.healthy_step) +
           " --set lr=... --db " + out.db;
  if (r.paused)
    return "stopped after epoch " + std::to_string(out.epochs_done) + " of " +
           std::to_string(out.planned_epochs) + " as asked; continue with " + out.resume_command;
  if (r.interrupted && std::filesystem::exists(out.last_checkpoint))
    return "interrupted after " + std::to_string(r.steps) + " steps; run " + run + " kept in " +
           out.db + " (continue it with " + out.resume_command + ")";
  if (r.interrupted)
    return "interrupted after " + std::to_string(r.steps) + " steps, before the first epoch ended: run " +
           run + " is recorded as interrupted in " + out.db +
           ", but has no checkpoint to resume from (start it again)";
  // The test score is of the weights training ended with. Where the best checkpoint is
  // another epoch (early stopping, a validation metric that peaked earlier), say so, and
  // which command scores that one: the two numbers differ and must not be confused.
  const bool best_elsewhere = r.best_epoch > 0 && r.best_epoch != out.epochs_done;
  const std::string test = !r.has_test ? "(no test split)"
                                       : (best_elsewhere ? "(last epoch's weights, epoch " +
                                                               std::to_string(out.epochs_done) + ") "
                                                         : std::string()) +
                                             eval_text(r.test);
  std::string tail = r.stopped_early ? ", stopped early" : "";
  if (best_elsewhere)
    tail += "; the best checkpoint is epoch " + std::to_string(r.best_epoch) +
            (out.eval_command.empty() ? std::string() : " (" + out.eval_command + " scores it)");
  const double train_s = std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                " in %s: final loss %.4f, test %s, %.0f samples/s, epoch %.2fs (median), data wait "
                "%.0f%%, peak memory %.2f MiB",
                format_duration(r.seconds).c_str(), r.final_loss, test.c_str(), r.samples_per_s,
                r.median_epoch_seconds, 100.0 * r.data_seconds / std::max(1e-9, train_s),
                static_cast<double>(r.peak_bytes) / (1 << 20));
  // A job of several ranks: its rate is the job's, and communication's share of the training.
  if (r.world_size > 1) {
    char ranks[96];
    std::snprintf(ranks, sizeof ranks, ", %d ranks (communication %.0f%% of the training time)",
                  r.world_size, 100.0 * r.comm_seconds / std::max(1e-9, train_s));
    tail = ranks + tail;
  }
  return "run " + run + " finished" + buf + tail + "; recorded in " + out.db;
}

std::string preflight_line(const PreflightEstimate& e) {
  std::string fit;
  if (e.free_bytes)
    fit = " of " + bytes_text(*e.free_bytes) + " free" +
          (e.max_batch > 0 ? " (the largest batch that fits: " + std::to_string(e.max_batch) + ")"
                           : "");
  const int64_t eval = e.eval_bytes;
  char buf[160];
  std::snprintf(buf, sizeof buf, "; about %.2f ms per step, %.1f s per epoch", 1e3 * e.step_seconds,
                e.epoch_seconds);
  return "pre-flight: the run will hold " + bytes_text(e.total_bytes) + fit + ": parameters " +
         bytes_text(e.held.parameter) + ", optimizer state " + bytes_text(e.held.optimizer_state) +
         ", training step " +
         bytes_text(e.step_bytes - e.held.parameter - e.held.optimizer_state) +
         " (activations and gradients " + bytes_text(e.arena_bytes) + "), evaluation " +
         bytes_text(eval) + buf;
}

std::string estimate_line(const RunOutcome& out) {
  // Without a finished epoch there is no measured step to hold the estimate against.
  if (!out.preflight || out.result.step_losses.empty() || out.step_seconds() <= 0) return "";
  const int64_t peak = out.result.peak_bytes;
  char buf[200];
  std::snprintf(buf, sizeof buf, "estimate vs measured: peak %s vs %s (%+.1f%%), step %.2f ms vs %.2f ms",
                bytes_text(out.preflight->total_bytes).c_str(), bytes_text(peak).c_str(),
                100.0 * static_cast<double>(out.preflight->total_bytes - peak) /
                    static_cast<double>(std::max<int64_t>(peak, 1)),
                1e3 * out.preflight->step_seconds, 1e3 * out.step_seconds());
  return buf;
}

}  // namespace mls::runner
