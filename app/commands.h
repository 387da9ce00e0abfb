// The mlstudio commands. Each returns the process exit code: 0 success, 1 bad input or a
// failed run (the message names the file, node or line), 130 interrupted.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/model_export.h"
#include "runner/project.h"
#include "runner/run_session.h"
#include "scripting/jail.h"
#include "scripting/lua_host.h"

namespace CLI {
class App;
}

namespace mls::app {

// Text from a file or the database (node ids, run and class names, messages quoting them)
// made safe to print: control characters but newline and tab, DEL and the C1 controls come
// out as \xNN, so a name cannot move the cursor, clear the screen or retitle the window.
// Every line the CLI prints that holds such text goes through this.
std::string terminal_safe(std::string_view text);
// "mlstudio: MSG" on stderr (terminal_safe); returns the exit code of a failed command (1).
int fail(const std::string& msg);
// With --json, a failure's last stdout line: {"status": "failed", "error": MSG}.
void print_json_failure(const std::string& msg);

using runner::open_project;
using runner::Project;
using runner::ProjectOptions;

struct RunOptions {
  ProjectOptions project;
  std::optional<int64_t> resume;  // continue this run from its last checkpoint
  int64_t stop_after_epochs = 0;  // > 0: stop after this many epochs (resume later)
  bool no_memory_check = false;   // start even when the pre-flight says it will not fit
  std::string db = "mlstudio-runs.db";
  bool json = false;
  bool quiet = false;
  std::string profile;  // a Chrome trace of every training step goes here (--profile FILE.json)
  std::string experiment;  // --experiment NAME ("" the Default one)
  std::string breaks;        // --break nan,spike:3,... (engine/train/breakpoints.h)
  int64_t health_every = 0;  // --health-every N: the health instruments every N steps
  std::optional<runner::RunOptions::SweepTrial> sweep_trial;  // --sweep-trial S:T (sweep workers)
  std::optional<runner::RunOptions::Fork> fork;                // `runs fork`
  // A sweep's early stopping (runner::RunOptions::prune).
  std::function<std::optional<std::string>(int64_t run_id, const EpochReport&)> prune;
  // `mpirun -np N mlstudio --run P.mls`: this process's rank of the data-parallel job (main
  // creates it when a launcher started several ranks). Rank 0 prints the progress, the summary
  // and --json, and its exit status is the job's; the others print only warnings and errors.
  Collective* collective = nullptr;
};
int run_command(const RunOptions& o);
// Set by SIGINT or SIGTERM while run_command trains: the run stops after its current step. A
// job's collective watches it too (MpiCollective::set_cancel_flag): after a rank dies, mpirun
// sends the others SIGTERM, and a rank waiting for the dead one then names it at once.
const std::atomic<bool>& run_stop_flag();
// Lists `path` (made absolute) as run `run_id`'s artifact of `kind` ("onnx", "trace") in the
// database `db`; a failure is a warning on stderr, not an error: the file was written.
void record_artifact(const std::string& db, int64_t run_id, const std::string& kind,
                     const std::string& path);

struct GraphOptions {
  ProjectOptions project;
  bool ir = false, backward = false, plan = false, passes = false;
  int64_t profile = 0;  // > 0: train this many steps with every kernel timed
  int64_t batch = 0;    // 0: the project's batch size
  int ranks = 1;        // --plan: the data-parallel step of this many ranks (all-reduce steps)
};
int graph_command(const GraphOptions& o);

// `mlstudio runs ACTION`: the experiment database (app/runs_command.cpp registers every
// action; fork, reproduce and diff are app/runs_lineage.cpp).
struct RunsOptions {
  // list show compare diff tag note delete export query fork reproduce
  std::string action;
  std::string db = "mlstudio-runs.db";
  int64_t run_id = 0;          // show, tag, note, fork, reproduce
  std::vector<int64_t> ids;    // compare, diff (two), delete
  bool json = false;
  // list, export: the filter language of store/run_table.h
  std::string where;
  std::vector<std::string> sort;     // "metrics.val/loss.best", "-params.lr" (descending)
  std::vector<std::string> columns;  // fields; empty: the defaults
  int64_t limit = 0;                 // 0: all
  std::string format;                // export: csv, json or latex
  // compare
  bool diff_only = false;
  std::vector<std::string> metrics;  // the curves to chart ("" the first loss key)
  std::optional<int64_t> at_step;
  // tag, note
  std::vector<std::string> tags;  // KEY or KEY=VALUE
  bool remove = false;
  std::string text;
  // query
  std::string sql;
  // fork: continue `run_id`'s checkpoint at `step` as a child run, with settings changed
  // (`sets`, KEY=VALUE as --set takes them) or another graph (`project`)
  std::optional<int64_t> step;
  std::vector<std::string> sets;
  std::string project;
  std::optional<int64_t> epochs;  // fork: train to this many epochs in all
  bool quiet = false;
};
int runs_command(const RunsOptions& o);
// app/runs_lineage.cpp
int runs_fork_command(const RunsOptions& o);
int runs_reproduce_command(const RunsOptions& o);
int runs_diff_command(const RunsOptions& o);

// `mlstudio eval P.mls --run ID`: test metrics and the confusion matrix of a trained run.
struct EvalOptions {
  ProjectOptions project;
  int64_t run_id = 0;
  std::string db = "mlstudio-runs.db";
  std::string checkpoint = "auto";  // best, last, auto (best when there is one)
  std::string split = "test";       // test or validation
  bool json = false;
};
int eval_command(const EvalOptions& o);

// `mlstudio predict P.mls --run ID --input FILE`: the model's answer for new samples.
struct PredictOptions {
  ProjectOptions project;
  int64_t run_id = 0;
  std::string db = "mlstudio-runs.db";
  std::string checkpoint = "auto";
  std::string input;
  int64_t top = 3;
  bool json = false;
};
int predict_command(const PredictOptions& o);

// `mlstudio lua [FILE [ARGS...]]`: runs a script (sandboxed unless trusted) or opens the REPL.
struct LuaOptions {
  std::string file;               // empty: the REPL
  std::vector<std::string> args;  // the script's `arg` table
  bool trust = false;             // lift the sandbox (the user's own script)
  std::string root;               // sandbox folder (default: the script's folder)
  int64_t instruction_limit = 0;
  double time_limit = 0;
  int64_t memory_limit_mib = 4096;  // sandbox: the address space of the script's process
  int64_t file_limit_mib = 1024;    // sandbox: the largest file the script may write
  std::string db = "mlstudio-runs.db";
  int64_t resume = 0;  // the script's first mls.train continues this run
};
int lua_command(const LuaOptions& o);
// The kernel's wall around a sandboxed script (rlimits, Landlock, seccomp; scripting/jail.h)
// for `o`'s limits and the in-VM sandbox `so`: what `mlstudio lua` and `notebook run` apply.
jail::JailLimits script_jail(const LuaOptions& o, const lua::ScriptOptions& so);

// `mlstudio notebook run|check|export P.mls`: the project's notebook cells, headless
// (app/notebook_command.cpp).
struct NotebookOptions {
  std::string action;  // "run", "check", "export"
  std::string project;
  std::string html, lua;            // export targets (run: --html too)
  std::vector<std::string> params;  // name=value
  std::string figures;              // run: each figure as DIR/ID-N.svg
  bool png = false;                 // run: and as DIR/ID-N.png (app/figure_png.h)
  bool trust = false;
  double tolerance = 1e-6;  // check: relative tolerance of numbers
  std::string db = "mlstudio-runs.db";
};
int notebook_command(const NotebookOptions& o);

// `mlstudio compare-devices P.mls`: one training step on each device against a float64
// reference, node by node (app/compare_devices_command.cpp registers it).
struct CompareDevicesOptions {
  ProjectOptions project;
  std::string devices = "cpu,vulkan,cuda";
  int64_t run_id = 0;  // > 0: from this run's last checkpoint
  std::string db = "mlstudio-runs.db";
  int64_t batch_size = 0;  // 0: the project's
  int64_t advance = 0;     // > 0: train this many CPU steps first
  double threshold = 0;
  std::string metric = "rel";
  bool json = false;
};
CLI::App* add_compare_devices_command(CLI::App& app, CompareDevicesOptions& o);
int compare_devices_command(const CompareDevicesOptions& o);

int export_command(const runner::ExportOptions& o, bool json);
int import_command(const runner::ImportOptions& o);

}  // namespace mls::app
