// A lab author's edits (nodes/lab.h), undoable like every edit (nodes/edit.h). All are
// refused in a student's copy: a student cannot unlock what the teacher locked.
//
//   stack.push(make_set_lab(doc, LabSpec{.present = true, .title = "Derivatives",
//                                        .goals = {{"deriv", "f'(2) within 1e-6"}}}), doc);
//   stack.push(make_set_node_marks(doc, "fc1", /*locked=*/true, /*solution=*/false), doc);
//   stack.push(make_set_cell_role(doc, "q1", CellRole::Answer, "-- your code"), doc);  // notebook_edit.h
#pragma once

#include <string>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/lab.h"

namespace mls::nodes {

// Replaces the "lab" section (present false removes it). Refused: goal ids that are not
// valid or repeat, an empty goal text, limits out of range (as the loader checks them).
// Text: "Set the lab" / "Remove the lab".
EditResult make_set_lab(const Document& doc, LabSpec lab);

// A node's lab marks: locked (its type, parameters, device and inputs stay) and solution
// (left out of the student's copy). Text: "Lock node ID" / "Mark node ID as solution" / ...
EditResult make_set_node_marks(const Document& doc, const std::string& id, bool locked,
                               bool solution);

}  // namespace mls::nodes
