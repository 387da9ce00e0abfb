// A project's model as ONNX: the document is lowered for inference and the engine graph
// written by the graph exporter (engine/onnx/graph_export.h), through the one op mapping
// the importer reads too. The input preprocessing goes inside the graph so the file takes
// raw samples, and the loss is left out (the output is its logits input). Whether a node
// exports is whether the ops it lowers to have a mapping (the editor's badges).
//
//   ExportSpec spec;  spec.input.bytes = true;  spec.input.mean = {0.286f};  spec.input.stddev =
//   {0.353f}; Result<ExportedModel> e = export_onnx(doc, data, weights, spec, "mlp.mls");
//   e->model.outputs[0].name == "logits";  e->node_values.at("fc1") == "fc1";
//   onnx_export_problem(doc.nodes[k]) == "";   // else why it cannot be exported
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/onnx/onnx_ir.h"
#include "nodes/catalogue.h"
#include "nodes/document.h"

namespace mls::nodes {

// How the training data reached the model: raw bytes scaled by 1/255 (images, byte
// arrays), then (x - mean) / stddev per channel (one value: for all).
struct InputPreprocessing {
  bool bytes = false;
  std::vector<float> mean, stddev;
};

struct ExportSpec {
  int64_t opset = 17;
  InputPreprocessing input;
  std::vector<std::pair<std::string, std::string>> metadata;
};

struct ExportedModel {
  onnx::Model model;
  std::map<std::string, std::string> node_values;  // document node id -> ONNX value of its output
  std::vector<std::string> order;                  // exported node ids, in graph order
};

// `weights` by parameter name ("fc1.weight"), as the trainer holds them. Errors name the
// node and why it cannot be exported, every such node at once.
Result<ExportedModel> export_onnx(const Document& doc, const InferContext& data,
                                  const std::map<std::string, CheckpointTensor>& weights,
                                  const ExportSpec& spec, const std::string& source_name);

// "" when the node exports; else the reason, for the editor's badge and the error.
std::string onnx_export_problem(const NodeDoc& node);

}  // namespace mls::nodes
