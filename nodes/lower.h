// Lowering: a checked project document -> the engine's model graph for one batch size and
// mode. The GUI, the batch mode and the tests all train through this one function; each
// node type's own LowerFn (nodes/types/*.cpp) emits its part.
//
//   Result<Document> doc = load_document(path);
//   InferContext data{.sample_shape = {1, 28, 28}, .num_classes = 10};
//   Result<ModelGraph> m = lower(*doc, data, /*batch=*/128, /*training=*/true, path);
//   std::cout << m->graph.to_text();     // nodes are labelled with the document's node ids
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/train/model_graph.h"
#include "nodes/catalogue.h"
#include "nodes/document.h"

namespace mls::nodes {

// What a node type's LowerFn sees. Inputs come in the order of the type's input ports
// and have passed the type's shape rule.
struct LowerContext {
  ModelGraph& model;
  const std::string& node_id;
  const nlohmann::json& params;  // checked, defaults filled in
  const Refs& inputs;
  int64_t batch;
  const InferContext& data;
  bool training;  // false: the evaluation form (dropout off, running statistics)

  Graph& g() { return model.graph; }
  Shape shape(size_t input) const { return model.graph.shape_of(inputs[input]); }
  // The model's per-step seed input (created on first use), for dropout masks.
  Ref step_seed();
  // A number derived from the node id, so two layers of one type draw different masks.
  int64_t node_seed() const;
  // A parameter named "<node id>.<name>".
  Ref param(const std::string& name, const Shape& shape, ParamInit init, bool trainable = true);
};

// Shape problems are reported against the document node ("P.mls: node 'fc1' ...").
// `node_outputs`, when given, receives each document node's output values (the export
// check compares them, node by node, with the ONNX file's).
Result<ModelGraph> lower(const Document& doc, const InferContext& data, int64_t batch,
                         bool training, const std::string& source_name,
                         std::map<std::string, Refs>* node_outputs = nullptr);

// A node lowered alone onto placeholder inputs of the given shapes (a batch dim of -1 as 1):
// its output shapes, by the ops' own shape inference (the batch dim given back as -1), and
// its parameter elements. Node types whose output shape is their ops' business (convolution,
// pooling) use it as their shape rule, so each op's shape arithmetic lives once, in its infer.
struct LoweredNode {
  std::vector<Shape> outputs;
  int64_t params = 0;  // trainable and frozen elements
};
Result<LoweredNode> lower_alone(const NodeTypeDef& def, const std::string& node_id, const nlohmann::json& params,
                                const std::vector<Shape>& inputs, const InferContext& data);

}  // namespace mls::nodes
