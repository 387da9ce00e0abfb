// Deleting a run with its files: the rows (RunStore::delete_run, one transaction), then the
// artifact files no other run lists, then the run's checkpoint folder when nothing another
// run lists, and nothing but checkpoint files, is left in it. A fork hard-links its parent's
// checkpoint into its own folder, so the child's copy is its own file and survives.
//
//   Result<DeleteReport> r = delete_run("mlstudio-runs.db", 3);
//   if (!r) return fail(r.error().message);        // no run 3, a run still training, a lock
//   for (const std::string& f : r->kept) note(f);   // listed by another run: left in place
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::runner {

struct DeleteReport {
  int64_t run_id = 0;
  std::vector<std::string> removed;   // files removed (absolute)
  std::vector<std::string> kept;      // left: another run lists them, or not a checkpoint file
  std::string removed_dir;            // the checkpoint folder, when it was removed
  std::vector<std::string> problems;  // files that could not be removed (the rows are gone)
};

Result<DeleteReport> delete_run(const std::string& db, int64_t run_id);

}  // namespace mls::runner
