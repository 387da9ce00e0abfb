// A project's training run: the project front end of the run session (runner/run_session.h).
// `mlstudio --run` names the file; the editor hands the document it holds, unsaved edits
// included, and the user's file is neither saved nor read.
//
//   runner::RunRequest req;
//   req.project.path = "resources/examples/fashion-mnist-mlp.mls";   // or req.project.document
//   req.db = "mlstudio-runs.db";
//   std::atomic<bool> stop{false};
//   runner::RunEvents ev;
//   ev.progress = [](const ProgressInfo& i) { /* per step */ };
//   ev.cancel = &stop;
//   Result<runner::RunOutcome> r = runner::run_training(req, ev);
//   if (!r) std::cerr << r.error().message << "\n";   // "... (run 4 recorded as failed in ...)"
//   else std::cerr << runner::summary_line(*r) << "\n";
//
// The run is opened (or reopened with `resume`), its params and a snapshot of the document
// recorded, every epoch ends with the `last` checkpoint (and `best` when validation
// improved), and it is closed as finished, interrupted (cancelled, or stopped after
// `stop_after_epochs`) or failed. The caller may run this on a worker thread: it touches no
// global state but the backend.
#pragma once

#include "runner/project.h"
#include "runner/run_session.h"

namespace mls::runner {

struct RunRequest : RunOptions {
  ProjectOptions project;
};

Result<RunOutcome> run_training(const RunRequest& request, const RunEvents& events = {});

}  // namespace mls::runner
