// The notebook of a project (.mls "notebook" section): Lua code cells, Markdown cells and
// view cells, in order, each with a stable id. Cells are edited only through the commands
// below (undoable like node edits); running them is scripting/notebook's business.
//
//   Document doc = ...;
//   UndoStack stack;
//   stack.push(make_add_cell(doc, 0, {.kind = CellKind::Markdown, .source = "# Tour"}), doc);
//   stack.push(make_add_cell(doc, 1, {.id = "data", .source = "x = mls.randn{4, 4}"}), doc);
//   stack.push(make_set_cell_source(doc, "data", "x = mls.ones{4, 4}"), doc);
//   stack.undo(doc);   // the source is back to randn
//
// [SECTION] Saved form (inside the .mls; lines so that diffs stay readable)
//
//   "notebook": {
//     "lazy": false,                     optional; true: dependents are marked stale, not run
//     "cells": [
//       {"id": "intro", "kind": "markdown", "source": ["# A tour", "", "Text..."]},
//       {"id": "data", "kind": "lua", "source": ["x = mls.randn{4, 4}"], "on_demand": true},
//       {"id": "v1", "kind": "view", "view": "graph"},
//       {"id": "q1", "kind": "lua", "role": "answer", "source": ["y = x * 2"],
//        "starter": ["-- your code"]},
//       {"id": "c1", "kind": "lua", "role": "check", "source": ["lab.near('q1', y, 4, 0)"]}
//     ]
//   }
//
// "source" is an array of lines (a single string is accepted when loading). Cell ids match
// the node id rule and are unique within the notebook. Unknown keys in a cell are errors.
// "role" and "starter" belong to labs (nodes/lab.h): "locked", "answer", "check",
// "hidden-check"; absent for an ordinary cell.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace mls::nodes {

enum class CellKind { Lua, Markdown, View };
std::string_view cell_kind_name(CellKind k);  // "lua", "markdown", "view"
std::optional<CellKind> parse_cell_kind(std::string_view name);

// What a view cell shows of the project.
inline constexpr const char* kCellViews[] = {"graph", "step", "dashboard", "memory"};
bool is_cell_view(std::string_view view);  // one of kCellViews
std::string cell_views_list();             // "'graph', 'step', 'dashboard', 'memory'"

// A cell's part in a lab (nodes/lab.h). Free: an ordinary cell.
enum class CellRole { Free, Locked, Answer, Check, HiddenCheck };
std::string_view cell_role_name(CellRole r);  // "", "locked", "answer", "check", "hidden-check"
std::optional<CellRole> parse_cell_role(std::string_view name);

struct Cell {
  std::string id;  // stable; "" in make_add_cell: a fresh one ("cell1", "cell2", ...)
  CellKind kind = CellKind::Lua;
  std::string source;  // Lua code or Markdown text ("" for a view cell)
  std::string view;    // a view cell's view: one of kCellViews
  // "Run only when asked": never re-run as a dependent of another cell, marked stale instead.
  bool on_demand = false;
  CellRole role = CellRole::Free;  // labs only
  std::string starter;             // an answer cell's text in the student's copy (lab pack)
  bool operator==(const Cell&) const = default;
};

struct Notebook {
  std::vector<Cell> cells;
  bool lazy = false;  // lazy mode: running a cell marks its dependents stale
  // True when the file had a "notebook" section (kept on save even when empty).
  bool present = false;
  bool operator==(const Notebook&) const = default;

  const Cell* find(std::string_view id) const;
  std::optional<size_t> index_of(std::string_view id) const;
};

// The "notebook" section: parse (messages name the JSON pointer, "/notebook/cells/2/kind")
// and save (the form above).
Result<Notebook> parse_notebook(const nlohmann::json& j, const std::string& source_name);
nlohmann::json notebook_to_json(const Notebook& nb);
// The same in the saved key order ("lazy" before "cells"; "id", "kind", "source"/"view",
// "on_demand"): what save_document writes.
nlohmann::ordered_json notebook_to_ordered_json(const Notebook& nb);
// GraphCheck::Salvage: a cell that cannot be read (or a duplicate id) is left out and its
// message, ending " (cell left out)", added to `salvage_warnings`; the section's own errors
// still fail.
Result<Notebook> parse_notebook(const nlohmann::json& j, const std::string& source_name,
                                std::vector<std::string>& salvage_warnings);

}  // namespace mls::nodes
