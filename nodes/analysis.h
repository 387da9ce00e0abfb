// What the editor draws on a draft graph: each node's output shapes, parameter count and
// error, as far as the graph is complete. Shapes come from the node types' shape rules and
// parameter counts from the node types' own lowering (each node lowered alone onto inputs of
// the inferred shapes), so the canvas shows what training would build.
//
//   InferContext data{.sample_shape = {1, 28, 28}, .num_classes = 10};
//   DocumentAnalysis a = analyze_document(doc, data);
//   a.nodes["fc1"].outputs[0] == Shape{-1, 256};   a.nodes["fc1"].params == 200960;
//   a.nodes["fc2"].error;    // "input 'in' has shape [N,1,28,28]; Linear expects ..."
//   a.problems;              // graph_problems(): unlinked inputs, cycles, the loss node
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/shape.h"
#include "nodes/catalogue.h"
#include "nodes/document.h"

namespace mls::nodes {

struct NodeAnalysis {
  bool inferred = false;       // outputs hold the node's shapes
  std::vector<Shape> outputs;  // one per output port, batch dim -1
  int64_t params = 0;          // trainable and frozen parameter elements (when inferred)
  // Why the node has no shapes: its own fault (a shape or parameter error), or "" when it
  // waits for an unlinked input or a node before it that failed.
  std::string error;
  std::string waiting;  // "input 'in' is not linked", "waits for 'fc1'"
};

struct DocumentAnalysis {
  std::map<std::string, NodeAnalysis> nodes;
  std::vector<std::string> problems;  // graph_problems(doc, source_name)
  int64_t total_params = 0;
  // Every node inferred and no graph problem: the model can be trained.
  bool complete() const;
};

DocumentAnalysis analyze_document(const Document& doc, const InferContext& data, const std::string& source_name,
                                  const NodeCatalogue& catalogue = builtin_catalogue());

}  // namespace mls::nodes
