// The checks of a lab (nodes/lab.h): what a check cell may call and where its results go.
//
//   LabChecks checks(L, lab_spec);      // before any submitted code runs: takes the snapshot
//   checks.begin_cell("c1");            // then load the check cell's chunk and
//   checks.push_env();                  // set it as the chunk's _ENV (upvalue 1)
//   ... run it ...
//   checks.end_cell(ok, error);
//   for (const GoalState& g : checks.goals()) ...   // passed, message
//
// A check cell reads the student's globals, but the libraries it calls (math, string,
// table, mls, pairs, ...) and the `lab` table come from a copy of the globals taken before
// any cell ran: a submission that replaces math.abs, mls.train or lab.check changes its own
// world, not the checks'. Locked cells call the same copies, and the globals they set are
// what checks read under those names (a student cell that reassigns one, even by rawset,
// changes its own world). Tables they set are shared, not copied: a check should not trust
// the contents of a table a student could reach (tensors cannot be changed in place). `lab` exists only for check cells. lab.* are C functions that take
// plain Lua numbers, strings and booleans (no metamethods), so a returned object cannot
// lie about a comparison.
//
// In a check cell:
//   lab.check(goal, ok [, message])        ok: a boolean
//   lab.near(goal, got, want, tol)         |got - want| <= tol
//   lab.at_least(goal, got, min) / lab.at_most(goal, got, max)
//   lab.equal(goal, got, want)             numbers, strings, booleans, or arrays of them
// A goal reported more than once passes only if every report passed. A cell's reports
// count when it ends; a check cell that stops with an error fails every goal it reported
// (it may have stopped before a failing report). A goal never reported fails with "not
// checked" (and names the check cell that failed, if one did).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nodes/lab.h"

struct lua_State;

namespace mls::lua {

struct GoalState {
  std::string id, text;
  bool hidden = false;
  bool reported = false;
  bool passed = false;  // every report passed (false while not reported)
  std::string message;  // the first failing report's, else the last passing one's
  std::string cell;     // the check cell that reported it
};

class LabChecks {
 public:
  // Takes the snapshot of L's globals now (call before any untrusted code runs in L).
  LabChecks(lua_State* L, nodes::LabSpec lab);
  ~LabChecks();
  LabChecks(const LabChecks&) = delete;
  LabChecks& operator=(const LabChecks&) = delete;

  // Pushes the environment table for a check cell (a fresh one per cell), or for a locked
  // cell: it reads the snapshot's libraries too (not `lab`), and the globals it sets are
  // kept for the checks, which read them before the student's globals.
  void push_env(bool locked_cell = false);
  // Around each check (or locked) cell's run: which cell reports, and how it ended.
  void begin_cell(const std::string& cell_id, bool check_cell = true);
  void end_cell(bool ok, const std::string& error);

  // One per lab goal, in the lab's order; unreported goals say why.
  std::vector<GoalState> goals() const;
  // Forgets every report (a new "Check my work").
  void reset();
  // Other goals (the snapshot stays); forgets the reports.
  void set_lab(nodes::LabSpec lab) {
    lab_ = std::move(lab);
    reset();
  }
  // Called for each report when its check cell ends (the grader streams them out of its
  // child process): a process killed in the middle of a cell has sent nothing of it.
  std::function<void(const GoalState&)> on_report;

  // For lab.* (C closures hold a pointer to this object): kept until the cell ends; outside
  // a check cell, ignored.
  void report(const std::string& goal, bool passed, const std::string& message);
  const nodes::LabSpec& lab() const { return lab_; }

 private:
  lua_State* L_;
  nodes::LabSpec lab_;
  int trusted_ref_ = -2;             // registry: the copy of the globals (LUA_NOREF is -2)
  int string_index_ref_ = -2;        // registry: the copied string table (strings' __index)
  int saved_string_index_ref_ = -2;  // registry: strings' __index before the check cell
  int locked_ref_ = -2;              // registry: the globals the locked cells set
  std::vector<GoalState> goals_;
  std::string cell_;
  std::vector<std::pair<std::string, std::string>> failed_cells_;  // (cell, error)
  struct Report {
    std::string goal, message;
    bool passed = false;
  };
  std::vector<Report> pending_;  // the running check cell's reports
  void apply(const std::string& goal, bool passed, const std::string& message);
};

}  // namespace mls::lua
