#include "engine/onnx/onnx_file.h"

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "engine/core/atomic_file.h"

namespace mls::onnx {

namespace {

namespace pb = ::onnx;

void to_proto(const Attribute& a, pb::AttributeProto* p) {
  p->set_name(a.name);
  switch (a.kind) {
    case Attribute::Kind::Int:
      p->set_type(pb::AttributeProto::INT);
      p->set_i(a.i_value);
      break;
    case Attribute::Kind::Float:
      p->set_type(pb::AttributeProto::FLOAT);
      p->set_f(static_cast<float>(a.f_value));
      break;
    case Attribute::Kind::String:
      p->set_type(pb::AttributeProto::STRING);
      p->set_s(a.s_value);
      break;
    case Attribute::Kind::Ints:
      p->set_type(pb::AttributeProto::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case Attribute::Kind::Floats:
      p->set_type(pb::AttributeProto::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
  }
}

void to_proto(const ValueInfo& v, pb::ValueInfoProto* p) {
  p->set_name(v.name);
  auto* tensor = p->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_type_of(v.dtype));
  auto* shape = tensor->mutable_shape();
  for (const Dim& d : v.dims) {
    auto* dim = shape->add_dim();
    if (!d.param.empty())
      dim->set_dim_param(d.param);
    else
      dim->set_dim_value(d.value);
  }
}

void to_proto(const CheckpointTensor& t, pb::TensorProto* p) {
  p->set_name(t.name);
  p->set_data_type(onnx_type_of(t.dtype));
  for (int64_t d : t.shape) p->add_dims(d);
  p->set_raw_data(t.bytes.data(), t.bytes.size());
}

pb::ModelProto to_proto(const Model& m) {
  pb::ModelProto p;
  p.set_ir_version(ir_version_for(m.opset));
  p.set_producer_name(m.producer_name);
  p.set_producer_version(m.producer_version);
  p.set_doc_string(m.doc);
  auto* opset = p.add_opset_import();
  opset->set_domain("");
  opset->set_version(m.opset);
  for (const auto& [k, v] : m.metadata) {
    auto* e = p.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  pb::GraphProto* g = p.mutable_graph();
  g->set_name(m.graph_name);
  for (const ValueInfo& v : m.inputs) to_proto(v, g->add_input());
  for (const ValueInfo& v : m.outputs) to_proto(v, g->add_output());
  for (const CheckpointTensor& t : m.initializers) to_proto(t, g->add_initializer());
  for (const Node& n : m.nodes) {
    pb::NodeProto* np = g->add_node();
    np->set_op_type(n.op_type);
    np->set_name(n.name);
    if (!n.domain.empty()) np->set_domain(n.domain);
    for (const std::string& i : n.inputs) np->add_input(i);
    for (const std::string& o : n.outputs) np->add_output(o);
    for (const Attribute& a : n.attrs) to_proto(a, np->add_attribute());
  }
  return p;
}

// [SECTION] attributes checked before shape inference
//
// libonnx's shape inference trusts the window attributes of the ops it infers: a stride of 0
// divides by zero inside it (SIGFPE, not an exception), and a negative or huge size feeds
// its arithmetic. So every ONNX file, read or written, has these attributes checked first,
// against one table of the ops mlstudio's importer and engine accept.

// A list attribute: each entry in [min, kMaxAttribute], `per_axis` entries per spatial axis
// (pads: a begin and an end for each).
struct ListRule {
  const char* name;
  int64_t min;
  size_t per_axis;
};
// A single integer attribute in [min, max].
struct IntRule {
  const char* name;
  int64_t min, max;
};
struct OpRules {
  std::vector<ListRule> lists;
  std::vector<IntRule> ints;
};

// Far above any real window, stride or pad, and far below where int64 arithmetic on it
// could overflow.
constexpr int64_t kMaxAttribute = int64_t{1} << 20;

const std::map<std::string, OpRules>& attribute_rules() {
  static const std::map<std::string, OpRules> rules = [] {
    const ListRule kernel{"kernel_shape", 1, 1}, strides{"strides", 1, 1},
        dilations{"dilations", 1, 1}, pads{"pads", 0, 2};
    const IntRule ceil_mode{"ceil_mode", 0, 1};
    std::map<std::string, OpRules> r;
    r["Conv"] = {{kernel, strides, dilations, pads}, {{"group", 1, kMaxAttribute}}};
    r["ConvTranspose"] = {
        {kernel, strides, dilations, pads, {"output_padding", 0, 1}, {"output_shape", 1, 1}},
        {{"group", 1, kMaxAttribute}}};
    r["MaxPool"] = {{kernel, strides, dilations, pads}, {ceil_mode, {"storage_order", 0, 1}}};
    r["AveragePool"] = {{kernel, strides, pads}, {ceil_mode, {"count_include_pad", 0, 1}}};
    r["LpPool"] = {{kernel, strides, pads}, {{"p", 1, kMaxAttribute}}};
    r["Gemm"] = {{}, {{"transA", 0, 1}, {"transB", 0, 1}}};
    return r;
  }();
  return rules;
}

std::string list_text(const pb::AttributeProto& a) {
  std::string s = "[";
  for (int i = 0; i < a.ints_size(); ++i) s += (i ? ", " : "") + std::to_string(a.ints(i));
  return s + "]";
}

std::string node_name(const pb::NodeProto& n) {
  if (!n.name().empty()) return n.name();
  return n.output_size() > 0 ? n.output(0) : "?";
}

Result<void> check_attributes(const pb::GraphProto& g, const std::string& source) {
  for (const pb::NodeProto& n : g.node()) {
    const std::string where = source + ": node '" + node_name(n) + "' (" + n.op_type() + "): ";
    // Subgraphs (If, Loop, Scan) are inferred too.
    for (const pb::AttributeProto& a : n.attribute()) {
      if (a.has_g())
        if (auto r = check_attributes(a.g(), source); !r) return r;
      for (const pb::GraphProto& sub : a.graphs())
        if (auto r = check_attributes(sub, source); !r) return r;
    }
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    auto rules = attribute_rules().find(n.op_type());
    if (!default_domain || rules == attribute_rules().end()) continue;
    size_t axes = 0;  // spatial axes, from the first list attribute present
    std::string axes_from;
    for (const ListRule& rule : rules->second.lists) {
      const pb::AttributeProto* a = nullptr;
      for (const auto& candidate : n.attribute())
        if (candidate.name() == rule.name) a = &candidate;
      if (!a) continue;
      if (a->type() != pb::AttributeProto::INTS)
        return make_error(where + rule.name + " must be a list of integers");
      for (int64_t v : a->ints())
        if (v < rule.min || v > kMaxAttribute)
          return make_error(where + rule.name + " must hold integers in [" +
                            std::to_string(rule.min) + ", " + std::to_string(kMaxAttribute) +
                            "], got " + list_text(*a));
      const size_t n_axes = static_cast<size_t>(a->ints_size()) / rule.per_axis;
      if (a->ints_size() == 0 || static_cast<size_t>(a->ints_size()) % rule.per_axis != 0 ||
          (axes != 0 && n_axes != axes))
        return make_error(
            where + rule.name + " has " + std::to_string(a->ints_size()) + " entries" +
            (axes ? "; " + axes_from + " gives " + std::to_string(axes) +
                        " spatial axes, so it needs " + std::to_string(axes * rule.per_axis)
                  : ""));
      if (axes == 0) axes = n_axes, axes_from = rule.name;
    }
    for (const IntRule& rule : rules->second.ints)
      for (const auto& a : n.attribute()) {
        if (a.name() != rule.name) continue;
        if (a.type() != pb::AttributeProto::INT)
          return make_error(where + rule.name + " must be an integer");
        if (a.i() < rule.min || a.i() > rule.max)
          return make_error(where + rule.name + " must be in [" + std::to_string(rule.min) + ", " +
                            std::to_string(rule.max) + "], got " + std::to_string(a.i()));
      }
  }
  return {};
}

Result<void> check(pb::ModelProto& p, const std::string& source) {
  // Each op's meaning is fixed by its operator set: a newer one may mean something the
  // importer would translate wrongly.
  for (const auto& o : p.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > kNewestOpset)
      return make_error(source + ": the model uses ONNX operator set " +
                        std::to_string(o.version()) + "; the newest mlstudio supports is " +
                        std::to_string(kNewestOpset) + " (export it again with opset " +
                        std::to_string(kNewestOpset) + " or lower)");
  try {
    pb::checker::check_model(p);
    if (auto a = check_attributes(p.graph(), source); !a) return a;
    pb::ShapeInferenceOptions options(/*check_type=*/true, /*strict=*/1, /*data_prop=*/false);
    pb::shape_inference::InferShapes(p, pb::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    return make_error(source + ": the ONNX checker rejects the model: " + what);
  }
  return {};
}

Result<ValueInfo> from_proto(const pb::ValueInfoProto& p, const std::string& source) {
  ValueInfo v;
  v.name = p.name();
  if (!p.type().has_tensor_type())
    return make_error(source + ": graph value '" + v.name + "' is not a tensor");
  const auto& tt = p.type().tensor_type();
  if (!dtype_of_onnx(tt.elem_type(), &v.dtype))
    return make_error(source + ": graph value '" + v.name + "' has ONNX element type " +
                      std::to_string(tt.elem_type()) + ", which mlstudio does not support");
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value())
      v.dims.emplace_back(d.dim_value());
    else
      v.dims.push_back(Dim::named(d.dim_param().empty() ? "?" : d.dim_param()));
  }
  return v;
}

template <typename T, typename Field>
void copy_field(const Field& f, CheckpointTensor& t) {
  t.bytes.resize(static_cast<size_t>(f.size()) * sizeof(T));
  for (int i = 0; i < f.size(); ++i) {
    T v = static_cast<T>(f.Get(i));
    std::memcpy(t.bytes.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
}

Result<CheckpointTensor> from_proto(const pb::TensorProto& p, const std::string& source) {
  CheckpointTensor t;
  t.name = p.name();
  if (!dtype_of_onnx(p.data_type(), &t.dtype))
    return make_error(source + ": initializer '" + t.name + "' has ONNX element type " +
                      std::to_string(p.data_type()) + ", which mlstudio does not support");
  if (p.data_location() == pb::TensorProto::EXTERNAL)
    return make_error(source + ": initializer '" + t.name +
                      "' keeps its data in an external file, which mlstudio does not read");
  for (int64_t d : p.dims()) t.shape.push_back(d);
  const size_t want = static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype);
  if (p.has_raw_data()) {
    t.bytes.assign(p.raw_data().begin(), p.raw_data().end());
  } else {
    switch (t.dtype) {
      case DType::F32: copy_field<float>(p.float_data(), t); break;
      case DType::I64: copy_field<int64_t>(p.int64_data(), t); break;
      case DType::I32: copy_field<int32_t>(p.int32_data(), t); break;
      case DType::U8: copy_field<uint8_t>(p.int32_data(), t); break;
      case DType::I8: copy_field<int8_t>(p.int32_data(), t); break;
      case DType::Bool: copy_field<uint8_t>(p.int32_data(), t); break;
      case DType::F16:
      case DType::BF16: copy_field<uint16_t>(p.int32_data(), t); break;
    }
  }
  if (t.bytes.size() != want)
    return make_error(source + ": initializer '" + t.name + "' holds " +
                      std::to_string(t.bytes.size()) + " bytes; its shape " + shape_str(t.shape) +
                      " needs " + std::to_string(want));
  return t;
}

Attribute from_proto(const pb::AttributeProto& p) {
  Attribute a;
  a.name = p.name();
  switch (p.type()) {
    case pb::AttributeProto::INT: a.kind = Attribute::Kind::Int; a.i_value = p.i(); break;
    case pb::AttributeProto::FLOAT: a.kind = Attribute::Kind::Float; a.f_value = p.f(); break;
    case pb::AttributeProto::STRING: a.kind = Attribute::Kind::String; a.s_value = p.s(); break;
    case pb::AttributeProto::INTS:
      a.kind = Attribute::Kind::Ints;
      a.ints.assign(p.ints().begin(), p.ints().end());
      break;
    case pb::AttributeProto::FLOATS:
      a.kind = Attribute::Kind::Floats;
      a.floats.assign(p.floats().begin(), p.floats().end());
      break;
    default:  // graphs, tensors, ...: kept by name only; the importer refuses their ops
      a.kind = Attribute::Kind::String;
      a.s_value = "<unsupported attribute type>";
      break;
  }
  return a;
}

}  // namespace

int64_t ir_version_for(int64_t opset) {
  if (opset >= 15) return 8;
  if (opset >= 13) return 7;
  return 6;
}

Result<std::string> serialize(const Model& m) {
  pb::ModelProto p = to_proto(m);
  if (auto c = check(p, "model '" + m.graph_name + "'"); !c) return c.error();
  std::string bytes;
  if (!p.SerializeToString(&bytes))
    return make_error("model '" + m.graph_name + "': protobuf could not serialise it (over 2 GiB?)");
  return bytes;
}

Result<void> write_model(const Model& m, const std::string& path) {
  auto bytes = serialize(m);
  if (!bytes) return bytes.error();
  if (auto w = write_text_atomically(path, *bytes); !w)
    return make_error("cannot write " + path + ": " + w.error().message);
  return {};
}

Result<Model> parse(const std::string& bytes, const std::string& source) {
  pb::ModelProto p;
  if (!p.ParseFromString(bytes))
    return make_error(source + ": not an ONNX model (the protobuf does not parse)");
  if (!p.has_graph()) return make_error(source + ": not an ONNX model (it has no graph)");
  if (auto c = check(p, source); !c) return c.error();
  Model m;
  m.producer_name = p.producer_name();
  m.producer_version = p.producer_version();
  m.doc = p.doc_string();
  m.opset = 0;
  for (const auto& o : p.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") m.opset = o.version();
  for (const auto& e : p.metadata_props()) m.metadata.emplace_back(e.key(), e.value());
  const pb::GraphProto& g = p.graph();
  m.graph_name = g.name();
  for (const auto& t : g.initializer()) {
    auto init = from_proto(t, source);
    if (!init) return init.error();
    m.initializers.push_back(std::move(*init));
  }
  for (const auto& v : g.input()) {
    if (m.initializer(v.name())) continue;  // older files list initializers as inputs too
    auto info = from_proto(v, source);
    if (!info) return info.error();
    m.inputs.push_back(std::move(*info));
  }
  for (const auto& v : g.output()) {
    auto info = from_proto(v, source);
    if (!info) return info.error();
    m.outputs.push_back(std::move(*info));
  }
  for (const auto& np : g.node()) {
    Node n;
    n.op_type = np.op_type();
    n.name = np.name();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) n.attrs.push_back(from_proto(a));
    m.nodes.push_back(std::move(n));
  }
  return m;
}

Result<Model> read_model(const std::string& path) {
  // protobuf refuses messages past 2 GiB anyway; the shared reader refuses a FIFO or a
  // device by name instead of blocking on it.
  constexpr uint64_t kMaxModelBytes = uint64_t{2} << 30;
  auto bytes = read_whole_file(path, kMaxModelBytes);
  if (!bytes) return bytes.error();
  return parse(std::string(bytes->begin(), bytes->end()), path);
}

}  // namespace mls::onnx
