// A notebook's saved outputs, beside its project: `P.mls` -> `P.outputs.json`, so the .mls
// keeps only the cells' source (readable diffs) and a notebook reopens with its outputs.
//
//   {"format": 1, "cells": {"data": {"text": "...", "figures": [...], "tables": [...],
//                                    "hash": "...", ...}}}
// (Files written before tables existed have no "tables": they read as none.)
//
//   auto saved = load_outputs("lab/tour.mls");   // nullopt: none saved yet
//   if (!saved) return fail(saved.error().message); // "lab/tour.outputs.json: ..."
//   save_outputs("lab/tour.mls", outputs);         // written atomically
//
// An output's `hash` is the cell's code and inputs when it ran (NotebookSession::
// current_hash): one that differs from the cell's current hash is stale.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "scripting/notebook/cell_output.h"

namespace mls::lua {

nlohmann::json figure_to_json(const Figure& f);
nlohmann::json widget_to_json(const Widget& w);
nlohmann::json table_to_json(const Table& t);
nlohmann::json cell_output_to_json(const CellOutput& o);
// `where` names the place in messages ("tour.outputs.json: /cells/data/figures/0: ...").
Result<Figure> figure_from_json(const nlohmann::json& j, const std::string& where);
Result<Widget> widget_from_json(const nlohmann::json& j, const std::string& where);
Result<Table> table_from_json(const nlohmann::json& j, const std::string& where);
Result<CellOutput> cell_output_from_json(const nlohmann::json& j, const std::string& where);

using SavedOutputs = std::map<std::string, CellOutput>;  // cell id -> its output

// "P.mls" -> "P.outputs.json" (any other name: NAME.outputs.json).
std::string outputs_path(const std::string& project_path);
// The outputs saved beside `project_path`; nullopt when there is no such file. A broken
// one is an error naming it.
Result<std::optional<SavedOutputs>> load_outputs(const std::string& project_path);
// Replaces the outputs file atomically; the message names it.
Result<void> save_outputs(const std::string& project_path, const SavedOutputs& outputs);

}  // namespace mls::lua
