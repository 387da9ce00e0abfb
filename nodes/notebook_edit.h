// Undoable edit commands on a project's notebook (nodes/notebook.h), in the same form as
// the node edits of nodes/edit.h: a factory checks the edit against the document and says
// why it is refused; apply() checks again and changes nothing on failure; revert() restores
// the notebook exactly, so undoing everything gives back a document that saves byte for
// byte as before.
//
//   UndoStack stack;
//   stack.push(make_add_cell(doc, 0, {.kind = CellKind::Markdown, .source = "# Tour"}), doc);
//   stack.push(make_set_cell_source(doc, "cell1", "# A tour"), doc);
//   stack.undo(doc);   // the source is "# Tour" again
#pragma once

#include <cstddef>
#include <string>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/notebook.h"

namespace mls::nodes {

// Inserts `cell` before `index` (clamped to the end). An empty id takes fresh_cell_id(doc).
// Refused: an invalid or duplicate id, a view cell without a known view (kCellViews), a
// Lua or Markdown cell with a view. Text: "Add cell ID".
EditResult make_add_cell(const Document& doc, size_t index, Cell cell);

// Removes the cell; undo puts it back at its index. Text: "Remove cell ID".
EditResult make_remove_cell(const Document& doc, const std::string& id);

// Moves the cell so that it ends at `to_index` (clamped to the last index).
// Text: "Move cell ID".
EditResult make_move_cell(const Document& doc, const std::string& id, size_t to_index);

// Replaces a Lua or Markdown cell's source (refused for a view cell). Text: "Edit cell ID".
EditResult make_set_cell_source(const Document& doc, const std::string& id, std::string source);

// "Run only when asked" (Cell::on_demand). Text: "Run cell ID only when asked" / "Run cell
// ID with its inputs".
EditResult make_set_cell_on_demand(const Document& doc, const std::string& id, bool on_demand);

// A view cell's view (one of kCellViews); refused for a Lua or Markdown cell.
// Text: "Show VIEW in cell ID".
EditResult make_set_cell_view(const Document& doc, const std::string& id, std::string view);

// A lab author's edit (nodes/lab.h): the cell's role, and an answer cell's starter text.
// Refused in a student's copy of a lab, where locked cells cannot be edited, moved or
// removed, answer cells only edited, and new cells are ordinary. Text: "Make cell ID locked".
EditResult make_set_cell_role(const Document& doc, const std::string& id, CellRole role,
                              std::string starter = {});

// Lazy mode (Notebook::lazy). Text: "Lazy notebook" / "Reactive notebook".
EditResult make_set_notebook_lazy(const Document& doc, bool lazy);

// The first of "cell1", "cell2", ... that no cell of the notebook has.
std::string fresh_cell_id(const Document& doc);

}  // namespace mls::nodes
