// A lab: a project (graph + notebook) that a teacher hands out and mlstudio grades. The
// parts a student must not change are locked in the document (the edit commands refuse
// them, nodes/edit.h and nodes/notebook_edit.h); at grading, a submission's locked parts are
// compared with the lab's by content, so a hand-edited file is caught too.
//
//   Result<Document> lab = load_document("resources/labs/autodiff.mls");
//   Document student = pack_student(*lab);          // `mlstudio lab pack`: no solutions,
//                                                   // no hidden checks or goals
//   std::vector<std::string> t = lock_differences(*lab, submission);
//   Notebook graded = graded_notebook(*lab, submission);   // what the grader runs
//
// [SECTION] Saved form
//
// The "lab" section (top level of the .mls):
//   "lab": {
//     "title": "Automatic differentiation",
//     "goals": [{"id": "fwd", "text": "f'(2) by forward mode within 1e-6"},
//               {"id": "acc", "text": "test accuracy >= 0.85", "hidden": true}],
//     "time_limit_s": 60,             per submission, at grading (default 60)
//     "memory_mb": 2048,              per submission, at grading (default 2048)
//     "student": true                 written by `lab pack`: this is a student's copy
//   }
// A cell's "role" (nodes/notebook.h): "locked" (code or text the student cannot change),
// "answer" (the student's; in the lab it holds the reference solution, and "starter" the
// text a student starts from), "check" (a check the student can run: "Check my work") and
// "hidden-check" (run only by the grader; `lab pack` leaves it out). Check cells are locked.
// A node's "locked": true keeps its type, parameters, device and input links; "solution":
// true marks a node of the reference solution that `lab pack` leaves out.
//
// Check cells report goals through the Lua `lab` table (scripting/notebook/lab_checks.h):
//   lab.near("fwd", df(2), 1.9726023611, 1e-6)
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "nodes/notebook.h"

namespace mls::nodes {

struct Document;

struct LabGoal {
  std::string id;    // matches the node id rule; unique in the lab
  std::string text;  // what the student reads: "test accuracy >= 0.88 with <= 50,000 parameters"
  bool hidden = false;  // checked by hidden checks only; not shown in the student's copy
  bool operator==(const LabGoal&) const = default;
};

struct LabSpec {
  bool present = false;  // the file had a "lab" section
  std::string title;
  std::vector<LabGoal> goals;
  double time_limit_s = 60;
  int64_t memory_mb = 2048;
  bool student = false;  // a student's copy (`lab pack`)
  bool operator==(const LabSpec&) const = default;

  const LabGoal* find(const std::string& id) const;
};

// The "lab" section; messages name the JSON pointer ("P.mls: /lab/goals/1/id: ...").
Result<LabSpec> parse_lab(const nlohmann::json& j, const std::string& source_name);
nlohmann::ordered_json lab_to_ordered_json(const LabSpec& lab);

// Whether a cell of this role may be edited or removed by the student (Free and Answer).
bool cell_editable(CellRole role);
bool is_check(CellRole role);  // Check or HiddenCheck

// `lab pack`: the student's copy. Answer cells get their starter text, hidden checks and
// hidden goals go, solution nodes go with their links and layout, and "student" is set.
// Refused (with the reason) for a document without a lab section or already a student's.
Result<Document> pack_student(const Document& lab);

// How a submission's locked parts differ from the lab's, one line each, in lab order:
// "locked cell 'setup' was edited", "locked cell 'setup' was removed", "locked node 'fc1'
// was changed (params)", "locked node 'fc1' was removed", "the input 'in' of locked node
// 'loss' was relinked", "the dataset was changed", "cell 'x' was marked locked (the lab has
// no such locked cell)". Empty: nothing locked was touched.
// A lab's dataset and initial weights are the teacher's: always locked (a check that trains
// the student's graph must not train it on easier data).
std::vector<std::string> lock_differences(const Document& lab, const Document& submission);

// The project the grader runs: the submission with the lab's dataset and initial weights,
// the lab's section marked as a student's copy (so edits from a cell refuse locked parts,
// "student": false in the file or not) and its locked nodes as the lab has them.
Document graded_project(const Document& lab, const Document& submission);

// The notebook the grader runs: the submission's cells with every locked cell restored
// from the lab (a removed one put back where the lab has it; a cell only the submission
// marks locked runs as a free cell), the submission's own check cells dropped, and the
// lab's checks (visible and hidden) appended in the lab's order.
Notebook graded_notebook(const Document& lab, const Document& submission);

// The lab's goals, locked parts and checks as canonical text: the grader stores its hash
// with each grading, so two gradings of the same lab (even re-saved) compare.
std::string locked_parts_text(const Document& lab);

}  // namespace mls::nodes
