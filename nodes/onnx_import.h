// An ONNX model as a project document: each ONNX op (or op pattern: MatMul + Add, Conv +
// bias) becomes the node type that computes it, initializers become the nodes' weights, and
// a loss node is added on the output so the imported model can be fine-tuned. What cannot
// be mapped is listed by ONNX node and op, every one at once.
//
//   Result<ImportedModel> im = import_onnx(model, "resnet.onnx");
//   if (!im) fail(im.error().message);   // "resnet.onnx: unsupported: node 'attn' (Attention)"
//   im->doc.nodes;  im->weights;         // "fc1.weight", ... in the trainer's names
#pragma once

#include <string>
#include <vector>

#include "engine/onnx/onnx_ir.h"
#include "nodes/document.h"

namespace mls::nodes {

struct ImportedModel {
  Document doc;                          // no dataset; weights not yet referenced
  std::vector<CheckpointTensor> weights;  // "<node id>.<param>"
  Shape sample_shape;                    // the input's dims without the batch
  std::vector<std::string> notes;        // what was simplified (a final Softmax dropped, ...)
  std::string output_value;              // the ONNX value the imported model's output matches
};

Result<ImportedModel> import_onnx(const onnx::Model& model, const std::string& source_name);

}  // namespace mls::nodes
