// `mlstudio runs fork|reproduce|diff`: a run's lineage. (Being written: see issue 28.)
#include "app/commands.h"

namespace mls::app {

int runs_fork_command(const RunsOptions&) { return fail("runs fork: not built yet"); }
int runs_reproduce_command(const RunsOptions&) { return fail("runs reproduce: not built yet"); }
int runs_diff_command(const RunsOptions&) { return fail("runs diff: not built yet"); }

}  // namespace mls::app
