// The project document (.mls): the model graph, the dataset, training settings, the
// canvas layout and notebook cells. The single source of truth that the editor, Lua and
// the batch mode read and write.
//
//   Result<Document> doc = load_document("resources/examples/fashion-mnist-mlp.mls");
//   if (!doc) { std::cerr << doc.error().message << "\n"; return 1; }
//   for (size_t i : topological_order(*doc)) std::cout << doc->nodes[i].id << "\n";
//   doc->training.epochs = 10;
//   Result<void> saved = save_document(*doc, "copy.mls");
//
// [SECTION] The .mls format, version 1 (JSON, UTF-8)
//
//   {
//     "format_version": 1,                       required; newer versions are refused
//     "name": "Fashion-MNIST MLP", "description": "...",
//     "dataset": {"source": "fashion-mnist" | "mnist" | "csv" | "npy" | "npz" |
//                           "image-folder" | "synthetic",
//                 "path": "/usr/share/datasets/fashion-mnist",  default for fashion-mnist
//                 "limit": 0, "test_limit": 0, "validation": 0, ...}
//                 (every key in datasets/dataset_spec.h)
//     "model": {
//       "nodes": [{"id": "fc1", "type": "mls.linear", "version": 1,
//                  "params": {"out_features": 256}}, ...],    (+ "device", "locked", "solution")
//       "links": [{"from": "image:out", "to": "flat:in"}, ...]   "node:port"
//     },
//     "training": {"epochs": 5, "batch_size": 128, "seed": 0, "device": "cpu",
//                  "mode": "static" | "eager", "optimizer": {...}, "schedule": {...},
//                  "clip_grad_norm": 0, "clip_grad_value": 0, "early_stopping": {...}},
//                  (every key in nodes/training_spec.h)
//     "layout": {"fc1": {"x": 40, "y": 80}, ...},  canvas positions; no meaning to training
//     "lab": {"title": ..., "goals": [...]},      a lab's goals and limits (nodes/lab.h)
//     "notebook": {"lazy": false, "cells": [...]}  Lua, Markdown and view cells (nodes/notebook.h)
//   }
//
// Every section but format_version and model is optional and takes the defaults shown.
// Node ids match [A-Za-z_][A-Za-z0-9_.-]*. Node types come from the NodeCatalogue;
// renamed types load under their new id with a warning. Every input port is linked
// exactly once, the graph is acyclic and holds exactly one loss node. Unknown keys
// inside a known section are errors (a typo must not silently change a run); unknown
// top-level keys are kept out and warned about, so newer minor additions still open.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "datasets/dataset_spec.h"
#include "nodes/catalogue.h"
#include "nodes/lab.h"
#include "nodes/notebook.h"
#include "nodes/training_spec.h"

namespace mls::nodes {

constexpr int kFormatVersion = 1;

using data::DatasetSpec;  // the "dataset" section (datasets/dataset_spec.h)

// Node ids match [A-Za-z_][A-Za-z0-9_.-]* (the loader and the edit commands both ask this).
bool is_valid_node_id(std::string_view id);

struct NodeDoc {
  std::string id;
  std::string type;  // a current catalogue id (renames already applied)
  int version = 1;
  nlohmann::json params = nlohmann::json::object();  // checked, defaults filled in
  // Where the node runs when the project trains on a GPU: "" the project's device, "cpu"
  // the host (its forward and backward; the plan copies its operands there and back).
  std::string device;
  // Labs (nodes/lab.h): a locked node's type, parameters, device and input links cannot be
  // edited; a solution node is left out of the student's copy.
  bool locked = false;
  bool solution = false;
  bool operator==(const NodeDoc&) const = default;
};

struct LinkDoc {
  std::string from_node, from_port;  // an output port
  std::string to_node, to_port;      // an input port
  bool operator==(const LinkDoc&) const = default;
};

struct Document {
  int format_version = kFormatVersion;
  std::string name, description;
  DatasetSpec dataset;
  std::vector<NodeDoc> nodes;  // file order; ids unique
  std::vector<LinkDoc> links;
  // Initial parameter values ("model": {"weights": F}): a checkpoint-format file, relative
  // to the project, whose "param/<name>" tensors replace the initialisers (an imported
  // ONNX model's weights). Empty: parameters start from their init schemes.
  std::string weights;
  TrainingSpec training;
  nlohmann::json layout = nlohmann::json::object();  // node id -> {"x":..,"y":..}
  Notebook notebook;  // nodes/notebook.h; present false when the file has none
  LabSpec lab;        // nodes/lab.h; present false when the project is not a lab
  // Things the loader fixed or ignored (renamed types, unknown keys). Not saved.
  std::vector<std::string> warnings;

  // Compares what is saved: warnings are not part of a document's content.
  bool operator==(const Document& o) const;
};

// How strictly parse_document checks the graph.
enum class GraphCheck {
  Strict,  // unlinked inputs, cycles and a missing/extra loss node are errors
  Draft,   // ...they become warnings, so a half-built graph still opens in the editor
  // A broken or newer-format file: as Draft, and whatever cannot be read (an unknown node
  // type, a bad parameter, a link to a missing port, a newer format_version, a bad section)
  // is left out with a warning naming its place, so the rest opens. Invalid JSON still fails.
  Salvage,
};

// Parses and checks a document. `source_name` (usually the path) starts every message:
// "P.mls:3:14: invalid JSON: ...", "P.mls: /model/nodes/3/type: unknown node type 'x'".
Result<Document> parse_document(std::string_view text, const std::string& source_name,
                                GraphCheck check = GraphCheck::Strict,
                                const NodeCatalogue& catalogue = builtin_catalogue());
Result<Document> load_document(const std::string& path, GraphCheck check = GraphCheck::Strict,
                               const NodeCatalogue& catalogue = builtin_catalogue());

// The document as .mls JSON (2-space indent, keys in the order of the spec above).
std::string serialize_document(const Document& doc,
                               const NodeCatalogue& catalogue = builtin_catalogue());
// The model as a run sees it (the dataset, the graph, the training settings; not the name,
// the layout or the notebook), as text: equal for two documents that train the same. The
// notebook keys the outputs of the cells that read the project with it.
std::string model_text(const Document& doc, const NodeCatalogue& catalogue = builtin_catalogue());
// Writes a temporary file next to `path`, flushes it to disk, then renames it over
// `path`: a failed save leaves the old file as it was and no temporary behind.
Result<void> save_document(const Document& doc, const std::string& path,
                           const NodeCatalogue& catalogue = builtin_catalogue());

// The graph rules of a complete model: every input linked, no cycle, exactly one loss.
// parse_document(Strict) runs this; the editor runs it on a draft before training.
// graph_problems lists every broken rule (each message starts with `source_name`);
// check_graph reports the first.
std::vector<std::string> graph_problems(const Document& doc, const std::string& source_name,
                                        const NodeCatalogue& catalogue = builtin_catalogue());
Result<void> check_graph(const Document& doc, const std::string& source_name,
                         const NodeCatalogue& catalogue = builtin_catalogue());

// Node indices, every node after the nodes that feed it; ties keep file order. Nodes on
// or behind a cycle are left out, so a result shorter than doc.nodes means a cycle.
std::vector<size_t> topological_order(const Document& doc);

// Look-ups that lowering and the editor need.
std::optional<size_t> find_node(const Document& doc, std::string_view node_id);
const LinkDoc* find_input_link(const Document& doc, std::string_view node_id,
                               std::string_view port);
// The index of the loss node (the first one, if a draft has several).
std::optional<size_t> find_loss_node(const Document& doc,
                                     const NodeCatalogue& catalogue = builtin_catalogue());


}  // namespace mls::nodes
