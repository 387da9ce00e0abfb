#include "engine/onnx/onnx_ir.h"

#include <cstring>
#include <set>

#include "engine/core/check.h"

namespace mls::onnx {

Attribute Attribute::i(std::string name, int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::Int;
  a.i_value = v;
  return a;
}

Attribute Attribute::f(std::string name, double v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::Float;
  a.f_value = v;
  return a;
}

Attribute Attribute::s(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::String;
  a.s_value = std::move(v);
  return a;
}

Attribute Attribute::list(std::string name, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}

const Attribute* Node::attr(std::string_view n) const {
  for (const Attribute& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

int64_t Node::int_or(std::string_view n, int64_t fallback) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Int ? a->i_value : fallback;
}

double Node::float_or(std::string_view n, double fallback) const {
  const Attribute* a = attr(n);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::Float) return a->f_value;
  if (a->kind == Attribute::Kind::Int) return static_cast<double>(a->i_value);
  return fallback;
}

std::vector<int64_t> Node::ints_or(std::string_view n, std::vector<int64_t> fallback) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Ints ? a->ints : fallback;
}

std::string Node::string_or(std::string_view n, std::string fallback) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::String ? a->s_value : fallback;
}

std::string Model::fresh(const std::string& base) const {
  std::set<std::string_view> used;
  for (const ValueInfo& v : inputs) used.insert(v.name);
  for (const CheckpointTensor& t : initializers) used.insert(t.name);
  for (const Node& n : nodes)
    for (const std::string& o : n.outputs) used.insert(o);
  if (!used.count(base)) return base;
  for (int k = 2;; ++k) {
    std::string name = base + "_" + std::to_string(k);
    if (!used.count(name)) return name;
  }
}

std::string Model::add(const std::string& op_type, std::vector<std::string> ins,
                       std::vector<Attribute> attrs, const std::string& output) {
  std::string out = output.empty() ? fresh(op_type) : output;
  MLS_CHECK(output.empty() || fresh(output) == output, "onnx value name used twice");
  Node n;
  n.op_type = op_type;
  n.name = out;
  n.inputs = std::move(ins);
  n.outputs = {out};
  n.attrs = std::move(attrs);
  nodes.push_back(std::move(n));
  return out;
}

std::string Model::add_initializer(const std::string& name, CheckpointTensor t) {
  t.name = fresh(name);
  initializers.push_back(std::move(t));
  return initializers.back().name;
}

std::string Model::add_ints(const std::string& name, const std::vector<int64_t>& v) {
  CheckpointTensor t;
  t.dtype = DType::I64;
  t.shape = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * sizeof(int64_t));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return add_initializer(name, std::move(t));
}

std::string Model::add_scalar(const std::string& name, float v) {
  return add_initializer(name, make_f32(name, {}, {v}));
}

const CheckpointTensor* Model::initializer(std::string_view name) const {
  for (const CheckpointTensor& t : initializers)
    if (t.name == name) return &t;
  return nullptr;
}

const Node* Model::producer(std::string_view value) const {
  for (const Node& n : nodes)
    for (const std::string& o : n.outputs)
      if (o == value) return &n;
  return nullptr;
}

std::vector<const Node*> Model::consumers(std::string_view value) const {
  std::vector<const Node*> r;
  for (const Node& n : nodes)
    for (const std::string& i : n.inputs)
      if (i == value) {
        r.push_back(&n);
        break;
      }
  return r;
}

std::string Model::metadata_value(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return v;
  return "";
}

namespace {

template <typename T>
void append_as_double(const CheckpointTensor& t, std::vector<double>& out) {
  const size_t n = t.bytes.size() / sizeof(T);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(v));
  }
}

}  // namespace

std::vector<double> values_of(const CheckpointTensor& t) {
  std::vector<double> out;
  switch (t.dtype) {
    case DType::F32: append_as_double<float>(t, out); break;
    case DType::I64: append_as_double<int64_t>(t, out); break;
    case DType::I32: append_as_double<int32_t>(t, out); break;
    case DType::U8: append_as_double<uint8_t>(t, out); break;
    case DType::I8: append_as_double<int8_t>(t, out); break;
    case DType::Bool: append_as_double<uint8_t>(t, out); break;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i + 1 < t.bytes.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, t.bytes.data() + i, 2);
        out.push_back(t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h));
      }
      break;
  }
  return out;
}

CheckpointTensor make_f32(const std::string& name, const Shape& shape, const std::vector<float>& v) {
  MLS_CHECK(static_cast<int64_t>(v.size()) == numel(shape), "make_f32: size and shape differ");
  CheckpointTensor t;
  t.name = name;
  t.dtype = DType::F32;
  t.shape = shape;
  t.bytes.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// TensorProto.DataType: FLOAT 1, UINT8 2, INT8 3, INT32 6, INT64 7, BOOL 9, FLOAT16 10,
// BFLOAT16 16.
int32_t onnx_type_of(DType t) {
  switch (t) {
    case DType::F32: return 1;
    case DType::U8: return 2;
    case DType::I8: return 3;
    case DType::I32: return 6;
    case DType::I64: return 7;
    case DType::Bool: return 9;
    case DType::F16: return 10;
    case DType::BF16: return 16;
  }
  return -1;
}

bool dtype_of_onnx(int32_t code, DType* out) {
  for (DType t : kAllDTypes)
    if (onnx_type_of(t) == code) {
      *out = t;
      return true;
    }
  return false;
}

}  // namespace mls::onnx
