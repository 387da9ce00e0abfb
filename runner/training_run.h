// One training run of a project, recorded in the run store: the path `mlstudio --run` and
// the editor's Train button share, so a run started from either lands in the same database
// with the same params, checkpoints and status.
//
//   runner::RunRequest req;
//   req.project.path = "resources/examples/fashion-mnist-mlp.mls";
//   req.db = "mlstudio-runs.db";
//   std::atomic<bool> stop{false};
//   runner::RunEvents ev;
//   ev.progress = [](const ProgressInfo& i) { /* per step */ };
//   ev.cancel = &stop;
//   Result<runner::RunOutcome> r = runner::run_training(req, ev);
//   if (!r) std::cerr << r.error().message << "\n";   // "... (run 4 recorded as failed in ...)"
//   else std::cout << r->run_id << " " << r->status << " " << r->result.final_loss << "\n";
//
// The run is opened (or reopened with `resume`), its params logged, every epoch ends with
// the `last` checkpoint (and `best` when validation improved), and it is closed as
// finished, interrupted (cancelled, or stopped after `stop_after_epochs`) or failed.
// The caller may run this on a worker thread: it touches no global state but the backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/exec/trace.h"
#include "engine/train/node_stats.h"
#include "engine/train/preflight.h"
#include "engine/train/telemetry.h"
#include "engine/train/trainer.h"
#include "runner/project.h"

namespace mls::runner {

struct RunRequest {
  ProjectOptions project;
  std::optional<int64_t> resume;  // continue this run from its last checkpoint
  int64_t stop_after_epochs = 0;  // > 0: stop after this many epochs (resume later)
  std::string db = "mlstudio-runs.db";
  // Time every kernel and, after the run, describe each node's output on a test batch
  // (RunOutcome::node_times, node_outputs): what the editor draws on its nodes.
  bool inspect = false;
  // The live instruments' feed (engine/train/telemetry.h): every step's loss, rate and
  // memory, and now and then the op profile and the step's memory timeline. Turns kernel
  // profiling on. The caller keeps it alive until run_training returns.
  Telemetry* telemetry = nullptr;
  // Records every training step into this Chrome trace (`--profile FILE.json`).
  TraceRecorder* trace = nullptr;
  // Estimate the step's memory and time before training (static mode), warn when it will
  // not fit, and keep the estimate in RunOutcome::preflight to hold against the run.
  bool preflight = false;
};

// What the caller hears while the run goes on; every member may be left empty. The
// callbacks run on the thread that called run_training.
struct RunEvents {
  // A line about the run for a person: "run 3: P.mls, 10 epochs, ...". No trailing newline.
  std::function<void(const std::string&)> message;
  std::function<void(const std::string&)> warning;
  ProgressFn progress;  // after every step
  // After each epoch, once its checkpoints are written.
  std::function<void(const EpochReport&)> epoch_end;
  const std::atomic<bool>* cancel = nullptr;  // set it to stop after the current step
  // With RunRequest::preflight, the estimate, before the first step.
  std::function<void(const PreflightEstimate&)> preflight;
};

struct RunOutcome {
  int64_t run_id = 0;
  std::string status;  // "finished" or "interrupted"
  TrainResult result;
  int64_t epochs_done = 0;
  int64_t planned_epochs = 0;
  TrainConfig config;
  std::string device, mode, precision;
  int threads = 0;
  std::string last_checkpoint;
  std::string db;
  // With RunRequest::inspect: per document node, its kernel time per step (static mode) and
  // its output's statistics on one batch of test data; why not, when they could not be had.
  std::vector<LabelTime> node_times;
  std::vector<OutputStats> node_outputs;
  std::string inspect_note;
  std::optional<PreflightEstimate> preflight;  // RunRequest::preflight
  // The measured time of one training step: the median epoch's time over its steps.
  double step_seconds() const;
};

// A device's throughputs, measured once per process (measure_device_rates) and kept.
const DeviceRates& device_rates(Backend& backend);

// "1.50 MiB", "312.0 KiB", "2.10 GiB": byte counts for people, in the binary units of
// PyTorch's memory summary and of the run summary's "peak memory".
std::string bytes_text(int64_t bytes);

// Errors before the run is recorded name the project or option at fault; a run that
// fails after it was recorded is marked failed and the message ends
// "(run N recorded as failed in DB)".
Result<RunOutcome> run_training(const RunRequest& request, const RunEvents& events = {});

// The test (or validation) metrics as one line: "accuracy 0.8933 (loss 0.3012, macro F1 ...)".
std::string eval_text(const EvalResult& e);

}  // namespace mls::runner
