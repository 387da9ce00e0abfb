// Where a run's checkpoints live, and loading one into a trainer. Next to the run database
// D.db: D.checkpoints/run-<id>/last.ckpt (after every epoch) and best.ckpt (the best
// validation metric so far). Both are written atomically (engine/train/checkpoint.h).
//
//   std::string dir = checkpoint_dir("mlstudio-runs.db", 3);   // "mlstudio-runs.checkpoints/run-3"
//   Result<std::string> used = load_run_checkpoint(trainer, "mlstudio-runs.db", 3, "best");
#pragma once

#include <cstdint>
#include <string>

#include "engine/train/trainer.h"

namespace mls::runner {

std::string checkpoint_dir(const std::string& db, int64_t run_id);
std::string checkpoint_path(const std::string& db, int64_t run_id, const std::string& which);  // "last", "best"

// Restores `which` ("best", "last", or "auto": best when the run has one, else last) into
// the trainer; returns the file it read. Errors name the run and the file.
Result<std::string> load_run_checkpoint(Trainer& trainer, const std::string& db, int64_t run_id,
                                        const std::string& which);

// Removes the temporary files a process killed while writing a checkpoint left in the run's
// folder (".last.ckpt.tmp-..."); call it only when no live process trains that run. Returns
// how many were removed.
int remove_unfinished_checkpoints(const std::string& db, int64_t run_id);

// The same for a run of the database `db`, which must exist; `which` is checked.
Result<std::string> restore_run(Trainer& trainer, const std::string& db, int64_t run_id, const std::string& which);

}  // namespace mls::runner
