// The mlstudio commands. Each returns the process exit code: 0 success, 1 bad input or a
// failed run (the message names the file, node or line), 130 interrupted.
#pragma once

#include <string>

#include "app/project.h"

namespace mls::app {

struct RunOptions {
  ProjectOptions project;
  std::string db = "mlstudio-runs.db";
  bool json = false;
  bool quiet = false;
};
int run_command(const RunOptions& o);

struct GraphOptions {
  ProjectOptions project;
  bool ir = false, backward = false, plan = false, passes = false;
  int64_t profile = 0;  // > 0: train this many steps with every kernel timed
  int64_t batch = 0;  // 0: the project's batch size
};
int graph_command(const GraphOptions& o);

struct RunsOptions {
  std::string action;  // "list" or "show"
  std::string db = "mlstudio-runs.db";
  int64_t run_id = 0;
  bool json = false;
};
int runs_command(const RunsOptions& o);

}  // namespace mls::app
