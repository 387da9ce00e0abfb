// The run session: every run (`mlstudio --run`, the editor's Train, Lua's mls.train, and
// next the notebook's cells and sweep trials) is opened, checkpointed, resumed, recorded and
// summarised here, so the front ends cannot drift apart. A front end says what to train (a
// RunModel: a builder, data, settings) and how to hear about it (RunEvents); the session
// owns the rest: the store (run, params, snapshot, status), pre-flight, checkpoints and
// resume, telemetry for the instruments, cancellation, and the summary line.
//
//   runner::RunOptions o;  o.db = "runs.db";  o.resume = 7;   // or leave resume empty
//   auto r = runner::run_session(o, [&](const runner::Resumed* was) -> Result<runner::RunModel> {
//     runner::RunModel m;          // was: the run being resumed (its params), or null
//     m.source = "mlp.lua";  m.builder = ...;  m.train = src;  m.config = cfg;  m.backend = &b;
//     return m;
//   }, events);
//   std::cerr << runner::summary_line(*r) << "\n";
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/exec/trace.h"
#include "engine/train/collective.h"
#include "engine/train/node_stats.h"
#include "engine/train/preflight.h"
#include "engine/train/telemetry.h"
#include "engine/train/trainer.h"
#include "store/run_store.h"

namespace mls::runner {

using Params = std::vector<std::pair<std::string, std::string>>;

// How a run goes, whatever started it.
struct RunOptions {
  std::optional<int64_t> resume;  // continue this run from its last checkpoint
  int64_t stop_after_epochs = 0;  // > 0: stop after this many epochs (resume later)
  std::string db = "mlstudio-runs.db";
  // Time every kernel and, after the run, describe each node's output on a test batch
  // (RunOutcome::node_times, node_outputs): what the editor draws on its nodes.
  bool inspect = false;
  // The live instruments' feed (engine/train/telemetry.h): every step's loss, rate and
  // memory, and now and then the op profile and the step's memory timeline. Turns kernel
  // profiling on. The caller keeps it alive until the run returns.
  Telemetry* telemetry = nullptr;
  // Records every training step into this Chrome trace (`--profile FILE.json`).
  TraceRecorder* trace = nullptr;
  // Estimate the step's memory and time before training (static mode), warn when it will
  // not fit, and keep the estimate in RunOutcome::preflight to hold against the run.
  bool preflight = false;
  // With preflight: a step the estimate says will not fit in the device's free memory is
  // refused before anything is allocated (the run is recorded as failed, with the largest
  // batch that fits). Off (`--no-memory-check`): a warning, and the run starts anyway.
  bool memory_check = true;
  // Where the run is filed: an experiment by name ("" the Default one), and a sweep's trial.
  std::string experiment;
  struct SweepTrial {
    int64_t sweep = 0, trial = 0;
  };
  std::optional<SweepTrial> sweep_trial;
  // A fork: a new run, child of `parent`, that starts from the parent's checkpoint `checkpoint`
  // (taken after `step` steps): the parent's curves up to there are copied into it, and its
  // model and settings may differ (parameters that no longer fit start afresh, and are named).
  struct Fork {
    int64_t parent = 0;
    std::string checkpoint;
  };
  std::optional<Fork> fork;
  // After each epoch's checkpoint: a reason to stop the run here (a sweep's early stopping),
  // or nullopt to go on. A stopped run is recorded as 'pruned', with the reason as a message.
  std::function<std::optional<std::string>(int64_t run_id, const EpochReport&)> prune;
  // The debugger (engine/train/breakpoints.h), armed for this run by any front end: a step that
  // goes wrong stops the run before its update; the state is checkpointed there (mid-epoch),
  // the run recorded as interrupted with a "breakpoint" tag, and RunOutcome::status reads
  // "paused". Health instruments every N steps (engine/train/health.h) go to the store as
  // "health/..." metrics and to the telemetry.
  Breakpoints breaks;
  HealthConfig health;
  // Data-parallel training over a job's ranks (`mpirun -np N mlstudio --run P.mls`), every rank
  // calling the session with the same options: rank 0 opens the store, records the run once
  // (its world_size, and world_size, hosts and global_batch_size as notes: a resume on another
  // number of ranks keeps the global batch), writes the checkpoints, logs the metrics and says
  // everything; the other ranks build the model from what rank 0 read (a resumed run's params),
  // take rank 0's state at the start of fit, and say only their warnings and errors, each
  // beginning "rank R (HOST): ". Null, or a job of one rank: one process, as before.
  Collective* collective = nullptr;
  // Set (when given) where training failed or was cut short in a job of several ranks: some may
  // still wait in a collective for a rank that is gone, or that stopped a step earlier. The
  // caller ends the job (Collective::abort_job) once it has said why, rather than wait in MPI's
  // finalisation.
  bool* ranks_out_of_step = nullptr;
};

// What the caller hears while the run goes on; every member may be left empty. The
// callbacks run on the thread that called the session.
struct RunEvents {
  // A line about the run for a person: "run 3: P.mls, 10 epochs, ...". No trailing newline.
  std::function<void(const std::string&)> message;
  std::function<void(const std::string&)> warning;
  ProgressFn progress;  // after every step
  // After each epoch, once its checkpoints are written.
  std::function<void(const EpochReport&)> epoch_end;
  const std::atomic<bool>* cancel = nullptr;  // set it to stop after the current step
  // With RunOptions::preflight, the estimate, before the first step.
  std::function<void(const PreflightEstimate&)> preflight;
};

struct RunOutcome {
  int64_t run_id = 0;
  std::string status;  // "finished", "interrupted", "pruned" or "paused" (a breakpoint fired)
  std::string pruned_because;  // RunOptions::prune's reason
  TrainResult result;
  int64_t epochs_done = 0;
  int64_t planned_epochs = 0;
  TrainConfig config;
  std::string device, mode, precision;
  int threads = 0;
  std::string last_checkpoint;
  std::string break_checkpoint;  // a breakpoint's state: break-step-N.ckpt ("" none)
  // The last checkpoint kept before the breakpoint (an epoch's, or the start's) and its step:
  // where a fork with a lower learning rate starts ("" none).
  std::string healthy_checkpoint;
  int64_t healthy_step = 0;
  std::string db;
  std::string source;          // RunModel::source
  std::string resume_command;  // RunModel::resume_command, with the run id
  std::string eval_command;    // RunModel::eval_command, with the run id ("" none)
  // With RunOptions::inspect: per document node, its kernel time per step (static mode) and
  // its output's statistics on one batch of test data; why not, when they could not be had.
  std::vector<LabelTime> node_times;
  std::vector<OutputStats> node_outputs;
  std::string inspect_note;
  std::optional<PreflightEstimate> preflight;  // RunOptions::preflight
  // The measured time of one training step: the median epoch's time over its steps.
  double step_seconds() const;
};

// What to train, as a front end describes it. The session reads it; the front end keeps
// what the pointers point at alive until the session returns.
struct RunModel {
  std::string name;         // the run's name in the store
  std::string source;       // where it came from, for people: "P.mls", "mlp.lua", "untitled"
  std::string source_path;  // recorded as the run's project_path ("" none)
  std::string source_hash;  // of what it trained; a resume warns when it changed
  store::Snapshot snapshot;  // kept with the run (empty text: none)
  Backend* backend = nullptr;
  ModelBuilder builder;
  BatchSource* train = nullptr;
  BatchSource* validation = nullptr;  // may be null
  BatchSource* test = nullptr;        // may be null
  TrainConfig config;
  std::string mode;  // "static" or "eager", as recorded
  // On resume: false keeps the recorded number of epochs (its schedule spans it), true
  // trains to config.epochs (more than were done).
  bool epochs_asked = true;
  // Recorded with a new run after the config's params; on resume, every one of them but
  // "epochs" must read as recorded (what decides the result: data, sample counts, mode).
  Params settings;
  // Recorded, never compared (threads, limits, where checkpoints go).
  Params notes;
  // Why a setting reads differently now, for the resume refusal: "resuming with --lr 0.1"
  // or "P.mls now has lr 0.1". Unset: "it is now VALUE".
  std::function<std::string(const std::string& key, const std::string& value)> explain_change;
  // A fresh run's starting weights (imported weights, the script's tensors); not on resume.
  std::function<Result<void>(Trainer&)> initial_weights;
  // After a run that ended (finished or interrupted), with the trainer still alive: the
  // editor's per-node overlays, Lua's trained tensors.
  std::function<void(Trainer&, RunOutcome&)> after;
  // With the run id put in: "mlstudio --run P.mls --resume {id}", "mlstudio eval P.mls --run {id}".
  std::string resume_command, eval_command;
};

// The run being resumed, as the store has it: what the model factory may read (recorded
// params decide which data to open).
struct Resumed {
  int64_t run_id = 0;
  store::RunInfo info;
  Params params;
  const std::string* param(const std::string& key) const;
};

using ModelFactory = std::function<Result<RunModel>(const Resumed* resumed)>;

// Opens (or reopens) the run, trains, closes it. Errors before the run is recorded name the
// model or setting at fault; a run that fails after it was recorded is marked failed and the
// message ends "(run N recorded as failed in DB)".
Result<RunOutcome> run_session(const RunOptions& options, const ModelFactory& model,
                               const RunEvents& events = {});

// The line a person reads when a run ends: "run 3 finished in 12.3 s: final loss 0.4123,
// test accuracy ...; recorded in runs.db", or how to continue an interrupted one.
std::string summary_line(const RunOutcome& out);
// "pre-flight: the run will hold 1.2 MiB ..."; "estimate vs measured: ..." ("" without an
// estimate or a step).
std::string preflight_line(const PreflightEstimate& e);
std::string estimate_line(const RunOutcome& out);

// A device's throughputs, measured once per process (measure_device_rates) and kept.
const DeviceRates& device_rates(Backend& backend);

// "1.50 MiB", "312.0 KiB", "2.10 GiB": byte counts for people, in the binary units of
// PyTorch's memory summary and of the run summary's "peak memory".
std::string bytes_text(int64_t bytes);

// The test (or validation) metrics as one line: "accuracy 0.8933 (loss 0.3012, macro F1 ...)".
std::string eval_text(const EvalResult& e);

}  // namespace mls::runner
