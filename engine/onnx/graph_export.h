// Engine graphs as ONNX: an inference Graph (what tracing a Lua model gives, or what
// nodes::lower gives for a document in evaluation mode) and its parameter values become an
// onnx::Model, op by op through the one mapping table (engine/onnx/onnx_ops.h) that the
// importer reads too. Graph inputs become ONNX inputs, parameters and constants become
// initializers, and the graph's outputs the model's.
//
//   GraphExportOptions o;  o.batch = 2;  o.twin = &graph_at_3;  o.output_names = {"logits"};
//   Result<Model> m = onnx::export_graph(graph, weights, o);     // weights: name -> values
//   if (!m) fail(m.error().message);   // "cannot export to ONNX:\n  op 'var' has no ONNX mapping"
//   onnx::write_model(*m, "model.onnx");
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/ir/graph.h"
#include "engine/onnx/onnx_ir.h"

namespace mls::onnx {

struct GraphExportOptions {
  int64_t opset = 17;
  std::string graph_name;  // "": the graph's own name
  // The batch size the graph was built for (0: none). Dim 0 of the inputs and outputs of that
  // size becomes the symbolic "N", and reshapes that keep it write 0, so the file runs at any
  // batch size.
  int64_t batch = 0;
  // The same graph built for another batch size (the same ops in the same order): then the
  // dims that differ between the two are the batch's ("N" in inputs and outputs, the one
  // open dim of a reshape), wherever the batch went ([N, H, T, D] -> [N*H, T, D] too).
  const Graph* twin = nullptr;
  std::vector<std::string> output_names;  // one per graph output; default "output", "output_2", ...
  // Graph inputs the caller has already given an ONNX value (by the input's name): they are
  // not declared as inputs of the model (the document exporter's preprocessed input).
  std::map<std::string, std::string> bound_inputs;
  // Values (by Ref id) that must stay ONNX values of their own (the document exporter's
  // node outputs): no idiom writes them inside one ONNX op.
  std::set<int32_t> keep;
};

// The ONNX value that each engine value (by Ref id) became.
using ValueNames = std::map<int32_t, std::string>;

// Appends the graph's ops to `m` (its inputs declared unless bound; its outputs appended to
// m.outputs). `params` holds every parameter's values by the graph's parameter names.
// Errors name every op that cannot be written at once, each with its node label.
Result<ValueNames> append_graph(Model& m, const Graph& g,
                                const std::map<std::string, CheckpointTensor>& params,
                                const GraphExportOptions& options);
// A new model holding the graph.
Result<Model> export_graph(const Graph& g, const std::map<std::string, CheckpointTensor>& params,
                           const GraphExportOptions& options);

// "" when every op of the graph has an ONNX mapping (reachable from its outputs); else the
// list, one "op 'x' (node 'y'): why" per line.
std::string export_problems(const Graph& g);

// A tensor's values on the host, as an initializer named `name`.
CheckpointTensor host_copy(const std::string& name, const Tensor& t);

}  // namespace mls::onnx
