// A project setting named by a path, as `--set KEY=VALUE`, sweeps (`--param KEY=...`) and
// `runs fork --set` name them. The edit goes through the same commands as the editor's
// (nodes/edit.h), so the loader's rules and messages apply.
//
//   Document doc = ...;
//   if (auto r = apply_setting(doc, "lr=0.01"); !r) fail(r.error().message);
//   apply_setting(doc, "fc1.out_features=256");        // a node's parameter
//   apply_setting(doc, "optimizer.momentum=0.9");      // a path inside "training"
//   apply_setting(doc, "dataset.limit=2000");          // a path inside "dataset"
//
// KEY resolves, in this order:
//   lr momentum weight_decay nesterov beta1 beta2 eps alpha lr_decay  -> training.optimizer.KEY
//   optimizer                                        -> training.optimizer.type
//   epochs batch_size seed device mode precision clip_grad_norm clip_grad_value
//   activation_checkpointing                         -> training.KEY
//   training.A[.B]  dataset.A[.B]                    -> that path in the section
//   optimizer.A  schedule.A  early_stopping.A        -> training.optimizer.A, ...
//   NODE.PARAM                                       -> the node's parameter (ids may hold dots:
//                                                       the longest id that matches wins)
// VALUE is read as JSON when it is JSON (0.01, 64, true, "text", [1,2]), else as text.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nodes/document.h"

namespace mls::nodes {

// "lr=0.01" -> {"lr", 0.01}. Error: "--set 'lr': expected KEY=VALUE".
Result<std::pair<std::string, nlohmann::json>> parse_assignment(std::string_view text);

// Applies one setting; on failure the document is unchanged and the message names the key.
Result<void> apply_setting(Document& doc, const std::string& key, const nlohmann::json& value);
Result<void> apply_setting(Document& doc, std::string_view assignment);

// The setting's current value in the document (null when the path names nothing yet, e.g. an
// optimizer field left at its default). Errors as apply_setting's.
Result<nlohmann::json> read_setting(const Document& doc, const std::string& key);

// How a value is recorded as a run param: numbers and booleans as JSON prints them, text as
// itself ("adam", not "\"adam\"").
std::string setting_text(const nlohmann::json& value);

}  // namespace mls::nodes
