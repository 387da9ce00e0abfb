// A notebook's live state: one Lua state shared by its cells, the dependency graph of their
// global names, which cells are stale, and each cell's last output. No Qt: the editor runs
// it on its Lua worker thread, `mlstudio notebook run|check` runs it headless.
//
//   NotebookSession s(cpu::backend(), {.sandbox = true, .root = "projects/lab1"});
//   s.set_cells(doc.notebook.cells);            // analyses every cell (cell_analysis.h)
//   for (auto& p : s.problems()) ...            // "x is defined by cells a and c", cycles
//   std::vector<std::string> ran = s.run_all(); // every cell, in dependency order
//   s.set_cell({.id = "a", .source = "x = 2"});  // an edit: re-analysed, dependents stale
//   ran = s.run("a");                           // "a", then the cells that read x (reactive)
//   const CellOutput* out = s.output("b");
//
// Reactive by default: running a cell re-runs, in topological order, every cell that reads
// what it defines (transitively), except "on demand" cells, which are marked stale. In lazy
// mode (set_lazy) the dependents are marked stale instead. A cell whose run failed stops its
// dependents (they are marked stale). The model graph is a node of the DAG: mark_project_
// changed() makes the cells that read mls.project stale (or re-runs them, when reactive).
//
// The commands (run_all, run_to, run_stale) run on-demand cells too: they are asked for. A
// cell in a problem (a name it defines is defined by another cell too, or it is on a cycle)
// is refused: its output is the problem's reason, and its dependents become stale. A widget
// re-runs its cell and the readers even in lazy mode (moving a slider is asking). A Lua cell
// that never ran is stale. A cell reading a table another cell defines is watched: a change
// of the table's contents (to a bounded depth; tensors by identity) is a problem on both.
// Markdown and view cells take no part. A cell's print goes to its output, then what it
// returns; errors read "cell ID:LINE: ..." (the chunk is named "=cell ID").
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "nodes/notebook.h"
#include "scripting/lua_host.h"
#include "scripting/notebook/cell_graph.h"
#include "scripting/notebook/cell_output.h"
#include "scripting/notebook/lab_checks.h"

namespace mls::lua {

// CellProblem (cell_graph.h): something wrong with the notebook's graph, shown on every
// cell it names; a table changed in place by a cell that does not define it, too.

class NotebookSession {
 public:
  NotebookSession(Backend& backend, ScriptOptions options);
  ~NotebookSession();

  // The cells, in notebook order (re-analyses those whose source changed; keeps outputs of
  // the others). Cells no longer present lose their names and outputs.
  void set_cells(const std::vector<nodes::Cell>& cells);
  // One cell added or edited; its dependents (old and new) become stale.
  void set_cell(const nodes::Cell& cell, size_t index);
  void remove_cell(const std::string& id);
  void set_lazy(bool lazy);

  // The run commands. Each returns the ids of the cells it ran, in the order it ran them.
  std::vector<std::string> run(const std::string& id);     // the cell, then its dependents
  std::vector<std::string> run_all();                      // every cell, dependency order
  std::vector<std::string> run_to(const std::string& id);  // what it needs, then it
  std::vector<std::string> run_stale();                    // every stale cell
  // A widget moved: its global takes the value, and its cell and that cell's readers re-run.
  std::vector<std::string> set_widget(const std::string& name, const nlohmann::json& value);
  // The model graph changed (an edit on the canvas): its readers become stale (lazy) or run.
  std::vector<std::string> mark_project_changed();
  // A fresh Lua state: every output kept, every cell stale.
  void restart();
  // Outputs saved by an earlier run (notebook/outputs.h) become the cells' outputs, so that
  // current_hash() compares with them; the cells stay stale (nothing ran in this state).
  void restore_outputs(const std::map<std::string, CellOutput>& saved);

  // The project the cells read (nodes::model_text of the document): part of the hash of the
  // cells that read mls.project, so that a saved output of another graph is stale. Setting it
  // marks nothing stale (mark_project_changed does).
  void set_project_text(const std::string& text);

  // Stops the running cell at its next instruction (and mls.train after its step).
  void set_interrupt(const std::atomic<bool>* flag);
  // Called as each cell starts and ends (on the running thread), for a GUI's progress.
  std::function<void(const std::string& id)> on_cell_started;
  std::function<void(const CellOutput&)> on_cell_finished;

  const CellOutput* output(const std::string& id) const;  // null: never ran
  bool stale(const std::string& id) const;
  const std::vector<CellProblem>& problems() const;
  // What the analysis found of a cell: the globals it reads and defines.
  std::set<std::string> reads(const std::string& id) const;
  std::set<std::string> writes(const std::string& id) const;
  bool reads_project(const std::string& id) const;
  // The hash a run of the cell now would carry (code and inputs): a saved output with
  // another hash is stale.
  std::string current_hash(const std::string& id) const;

  LuaHost& host();

  // Labs (nodes/lab.h). Check cells (roles check and hidden-check) run with the `lab` table
  // and a copy of the globals taken when the Lua state was made (lab_checks.h); they report
  // the goals given here. run_checks runs the visible checks (and the hidden ones when
  // asked) with what they need, after forgetting earlier reports: "Check my work".
  void set_lab(const nodes::LabSpec& lab);
  std::vector<GoalState> lab_goals() const;
  std::vector<std::string> run_checks(bool hidden_too = false);
  std::function<void(const GoalState&)> on_goal;  // each report, as it happens

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mls::lua
