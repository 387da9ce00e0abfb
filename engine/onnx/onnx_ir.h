// An ONNX model held in plain C++ types: what the exporters write (nodes/onnx_export.h) and
// the importers read, with no protobuf in sight. engine/onnx/onnx_file.h turns it into
// bytes and back (the only code that links protobuf and libonnx).
//
//   onnx::Model m;
//   m.inputs.push_back({"image", DType::U8, {onnx::Dim::named("N"), 1, 28, 28}});
//   std::string x = m.add("Cast", {"image"}, {onnx::Attribute::i("to", 1)});
//   std::string w = m.add_initializer("fc1.weight", weight);          // a CheckpointTensor
//   std::string y = m.add("MatMul", {x, w}, {}, "fc1");               // output named "fc1"
//   m.outputs.push_back({y, DType::F32, {onnx::Dim::named("N"), 10}});
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/checkpoint_tensor.h"
#include "engine/core/dtype.h"

namespace mls::onnx {

struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i_value = 0;
  double f_value = 0;
  std::string s_value;
  std::vector<int64_t> ints;
  std::vector<float> floats;

  static Attribute i(std::string name, int64_t v);
  static Attribute f(std::string name, double v);
  static Attribute s(std::string name, std::string v);
  static Attribute list(std::string name, std::vector<int64_t> v);
};

struct Node {
  std::string op_type, name, domain;  // domain "": the default ONNX operator set
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attrs;

  const Attribute* attr(std::string_view name) const;
  int64_t int_or(std::string_view name, int64_t fallback) const;
  double float_or(std::string_view name, double fallback) const;
  std::vector<int64_t> ints_or(std::string_view name, std::vector<int64_t> fallback) const;
  std::string string_or(std::string_view name, std::string fallback) const;
};

// A dimension: a fixed size, or a named symbolic one ("N", the batch).
struct Dim {
  int64_t value = -1;
  std::string param;
  Dim(int64_t v = -1) : value(v) {}  // NOLINT: sizes read naturally as Dims
  static Dim named(std::string p) {
    Dim d;
    d.param = std::move(p);
    return d;
  }
  bool operator==(const Dim&) const = default;
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Dim> dims;
};

struct Model {
  std::string graph_name = "model", doc;
  std::string producer_name = "mlstudio", producer_version;
  int64_t opset = 17;
  std::vector<ValueInfo> inputs, outputs;
  std::vector<Node> nodes;
  std::vector<CheckpointTensor> initializers;
  std::vector<std::pair<std::string, std::string>> metadata;

  // Appends a node with one output and returns that output's name: `output` when given
  // (it must be new), else a fresh name from the op type.
  std::string add(const std::string& op_type, std::vector<std::string> inputs,
                  std::vector<Attribute> attrs = {}, const std::string& output = "");
  std::string add_initializer(const std::string& name, CheckpointTensor t);
  std::string add_ints(const std::string& name, const std::vector<int64_t>& v);  // i64 [n]
  std::string add_scalar(const std::string& name, float v);                      // f32 []
  // A name not used yet by any value: `base`, else base_2, base_3, ...
  std::string fresh(const std::string& base) const;

  const CheckpointTensor* initializer(std::string_view name) const;
  const Node* producer(std::string_view value) const;
  std::vector<const Node*> consumers(std::string_view value) const;
  std::string metadata_value(std::string_view key) const;  // "" when absent
};

// The values of a float initializer (f32 or f64), or of an integer one (i64, i32, u8, i8),
// as doubles.
std::vector<double> values_of(const CheckpointTensor& t);
CheckpointTensor make_f32(const std::string& name, const Shape& shape, const std::vector<float>& v);

// ONNX TensorProto.DataType codes.
int32_t onnx_type_of(DType t);  // -1 where ONNX has none
bool dtype_of_onnx(int32_t code, DType* out);

}  // namespace mls::onnx
