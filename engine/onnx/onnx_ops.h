// The ONNX op mapping, written once for both ways: each entry pairs an ONNX op type with
// the engine op it corresponds to and says how one becomes the other. The importer
// (onnx_graph.cpp: ONNX -> engine graph) reads `from_onnx`, the graph exporter
// (graph_export.cpp: engine graph -> ONNX) reads `to_onnx`; a 1:1 op (Relu <-> relu,
// Softmax <-> softmax with axis <-> axis) is one line that gives both. Some entries go one
// way only: Gemm and BatchNormalization are read as several engine ops; scale and add_scalar
// are written as Mul and Add by a scalar.
//
//   const OpMapping* m = mapping_for_engine("conv2d");     // m->onnx == "Conv"
//   const OpMapping* r = mapping_for_onnx("Relu");         // r->engine == "relu"
//   mapping_for_engine("gelu");                            // null unless some entry writes it
//
// Internal to engine/onnx: the contexts below are what one entry's functions see.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ir/graph.h"
#include "engine/onnx/onnx_graph.h"
#include "engine/onnx/onnx_ir.h"

namespace mls::onnx {

// [SECTION] ONNX -> engine: what an entry's from_onnx sees

struct ImportContext {
  const Model& m;
  OnnxGraph& out;
  int64_t batch;
  const Node* node = nullptr;  // the ONNX node being translated, for messages

  Graph& g() { return out.graph; }
  std::string where() const;  // "node 'conv1' (Conv)"
  Error fail(const std::string& what) const { return Error{where() + ": " + what}; }
  Result<Ref> op(std::string_view name, std::initializer_list<Ref> in, const Attrs& attrs = {});
  Result<Ref> op(std::string_view name, const Refs& in, const Attrs& attrs = {});
  // The value of input `i`: a defined value, or an initializer made a parameter.
  Result<Ref> in(size_t i);
  bool has_input(size_t i) const { return i < node->inputs.size() && !node->inputs[i].empty(); }
  // An initializer's values (shapes, axes, scales): must be constant data.
  Result<std::vector<double>> constant(size_t i);
  Shape shape(Ref r) const { return out.graph.type_of(r).shape; }
};

// [SECTION] engine -> ONNX: what an entry's to_onnx sees

struct ExportContext {
  Model& m;
  const Graph& g;
  const mls::Node& node;            // the engine node being written
  std::vector<std::string> inputs;  // the ONNX names of its inputs, in order
  std::string output;               // the ONNX name its output 0 must get
  bool dynamic_batch = false;       // dim 0 of the graph's inputs is the symbolic "N"
  // The same node in the graph built for another batch size (null: none given): the dims
  // that differ between the two are the batch's.
  const Graph* twin_graph = nullptr;
  const mls::Node* twin = nullptr;

  std::string where() const;  // "op 'conv2d' (node 'conv1')"
  Error fail(const std::string& what) const { return Error{where() + ": " + what}; }
  Shape in_shape(size_t i) const { return g.type_of(node.inputs.at(i)).shape; }
  Shape out_shape() const { return g.type_of(node.outputs.at(0)).shape; }
  // Output 0's dims that carry the batch: those that differ in the twin (without a twin,
  // dim 0 where it is the input's dim 0, under a dynamic batch).
  std::vector<size_t> batch_dims() const;
  // The node's last ONNX op: it writes `output`.
  void emit(const std::string& op_type, std::vector<std::string> ins,
            std::vector<Attribute> attrs = {});
  // An ONNX op before the last one; returns its output's (fresh) name.
  std::string step(const std::string& op_type, std::vector<std::string> ins,
                   std::vector<Attribute> attrs = {});
  std::string scalar(float v);                      // an f32 [] initializer
  std::string ints(const std::vector<int64_t>& v);  // an i64 [n] initializer
};

using FromOnnx = std::function<Result<Ref>(ImportContext&)>;
using ToOnnx = std::function<Result<void>(ExportContext&)>;
// Why an engine node with these attributes cannot be written ("" : it can), asked before
// anything is written, so an export lists every such node at once.
using Refusal = std::function<std::string(const Attrs&)>;

struct OpMapping {
  std::string onnx;    // ONNX op type, default domain ("" : an export-only decomposition)
  std::string engine;  // the engine op ("" : an import-only composite)
  FromOnnx from_onnx;  // empty: mlstudio does not read this ONNX op
  ToOnnx to_onnx;      // empty: the engine op is not written this way
  Refusal refuse;      // empty: every node of the op can be written
};

const std::vector<OpMapping>& op_mappings();

// Several engine ops written as one ONNX op, in the forms the importer reads back as those
// very ops: conv2d + bias add -> Conv with a bias, matmul + bias add -> Gemm, the ops of
// batch_norm_eval -> BatchNormalization (onnx_idioms.cpp).
struct IdiomMatch {
  std::vector<int32_t> absorbed;  // the nodes (indices) the root's ONNX op writes too
  Refs inputs;                    // the ONNX op's inputs
  ToOnnx write;                   // sees their ONNX names in ExportContext::inputs
};
// The idiom whose last op is node `root`, if any. `single(r)`: value r is read by one op
// only and need not stay an ONNX value of its own.
std::optional<IdiomMatch> match_idiom(const Graph& g, size_t root,
                                      const std::function<bool(Ref)>& single);
// The entry that reads ONNX op `op_type` (null: none).
const OpMapping* mapping_for_onnx(std::string_view op_type);
// The entry that writes engine op `op` (null: the op has no ONNX mapping).
const OpMapping* mapping_for_engine(std::string_view op);

}  // namespace mls::onnx
