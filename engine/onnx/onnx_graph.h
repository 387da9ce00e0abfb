// ONNX models run by the engine: an onnx::Model becomes an engine Graph (its initializers
// the graph's parameters), which any backend runs. What `mlstudio export` re-reads each file
// it writes with, value by value, and what the importer's tests compare against.
//
//   Result<onnx::OnnxGraph> g = onnx::to_graph(model, /*batch=*/64);   // "N" dims become 64
//   if (!g) fail(g.error().message);      // "unsupported ONNX ops: node 'attn' (Attention)"
//   Result<std::vector<HostValue>> out = onnx::run(*g, backend, {{"image", bytes}}, {"fc3"});
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/ir/graph.h"
#include "engine/onnx/onnx_ir.h"

namespace mls::onnx {

struct OnnxGraph {
  Graph graph;
  std::map<std::string, Ref> values;        // every ONNX value the graph defines
  std::map<std::string, const CheckpointTensor*> weights;  // param name -> its initializer
  const Model* model = nullptr;
};

// The ONNX ops to_graph knows, in the default domain.
const std::vector<std::string>& supported_ops();
// "node 'x' (Op)" for every node whose op to_graph cannot translate.
std::vector<std::string> unsupported_nodes(const Model& m);

// Translates the model for a batch of `batch` (every symbolic input dim takes it). Float
// initializers become parameters; small integer ones (shapes, axes) are read as constants.
// The model must outlive the result.
Result<OnnxGraph> to_graph(const Model& m, int64_t batch);

// A host tensor: f32 values, or raw bytes for an integer input.
struct HostValue {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  std::vector<float> floats() const;  // f32 only
};

// Runs the graph once: `inputs` by ONNX input name, the parameters from the initializers;
// returns the named values (any value the graph defines, not only its outputs).
Result<std::vector<HostValue>> run(const OnnxGraph& g, Backend& backend,
                                   const std::map<std::string, HostValue>& inputs,
                                   const std::vector<std::string>& names);

}  // namespace mls::onnx
