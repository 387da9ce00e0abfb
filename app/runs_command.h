// `mlstudio runs ...`: read, compare, annotate and export the experiment database.
//
//   mlstudio runs list [--where EXPR] [--sort KEY]... [--columns a,b] [--limit N] [--json]
//   mlstudio runs show ID [--json]            everything about a run, and its lineage tree
//   mlstudio runs compare ID ID... [--diff-only] [--at-step N] [--metric KEY]... [--json]
//   mlstudio runs tag ID KEY[=VALUE]... [--remove]
//   mlstudio runs note ID TEXT
//   mlstudio runs delete ID...                with its checkpoints and artifacts
//   mlstudio runs export --csv|--json|--latex [--where] [--sort] [--columns] [--limit]
//   mlstudio runs query "SELECT ..." [--json|--csv]
//   mlstudio runs fork ID --step N [--set K=V]... [--project P] [--epochs N]
//   mlstudio runs reproduce ID
//   mlstudio runs diff A B
//
// The filter, sort and column language is store/run_filter.h's (RunTable reads through it).
// Wiring (app/main.cpp): `RunsOptions runs; CLI::App* rc = add_runs_command(app, runs);`
// and `if (*rc) return runs_main(rc, runs);`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/commands.h"

namespace CLI {
class App;
}

namespace mls::app {

// Adds `runs` and its subcommands, their options writing into `o`.
CLI::App* add_runs_command(CLI::App& app, RunsOptions& o);
// Sets o.action from the subcommand given (naming the valid ones when none or another was)
// and runs it.
int runs_main(CLI::App* runs_cmd, RunsOptions& o);

// A text chart of curves, one symbol per series, with a legend and axis labels (runs compare).
struct Curve {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (step, value), NaN values skipped
};
std::string text_chart(const std::string& title, const std::vector<Curve>& curves,
                       const std::string& x_label = "step", int width = 64, int height = 16);

// LaTeX text with its special characters escaped (& % $ # _ { } ~ ^ \).
std::string latex_escape(const std::string& text);

}  // namespace mls::app
