#include "engine/onnx/onnx_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "engine/exec/compiled_plan.h"
#include "engine/ops/conv.h"

namespace mls::onnx {

namespace {

// [SECTION] translation state

struct Builder {
  const Model& m;
  OnnxGraph& out;
  int64_t batch;
  const Node* node = nullptr;  // the node being translated, for messages

  Graph& g() { return out.graph; }
  std::string where() const {
    return "node '" + (node->name.empty() ? node->outputs.at(0) : node->name) + "' (" + node->op_type + ")";
  }
  Error fail(const std::string& what) const { return Error{where() + ": " + what}; }

  Result<Ref> op(std::string_view name, std::initializer_list<Ref> in, const Attrs& attrs = {}) {
    auto r = g().add_node(name, std::span<const Ref>(in.begin(), in.size()), attrs);
    if (!r) return fail(r.error().message);
    return r->at(0);
  }

  // The value of input `i`: a defined value, or an initializer made a parameter.
  Result<Ref> in(size_t i) {
    if (i >= node->inputs.size() || node->inputs[i].empty())
      return fail("input " + std::to_string(i) + " is missing");
    const std::string& name = node->inputs[i];
    if (auto it = out.values.find(name); it != out.values.end()) return it->second;
    if (const CheckpointTensor* t = m.initializer(name)) {
      Ref r = g().add_param(name, {t->dtype, t->shape}, {}, false);
      out.weights[name] = t;
      out.values[name] = r;
      return r;
    }
    return fail("input '" + name + "' is defined by no earlier node, graph input or initializer");
  }
  bool has_input(size_t i) const { return i < node->inputs.size() && !node->inputs[i].empty(); }
  // An initializer's values (shapes, axes, scales): must be constant data.
  Result<std::vector<double>> constant(size_t i) {
    if (!has_input(i)) return fail("input " + std::to_string(i) + " is missing");
    const CheckpointTensor* t = m.initializer(node->inputs[i]);
    if (!t) return fail("input '" + node->inputs[i] + "' must be an initializer (a constant)");
    return values_of(*t);
  }
  Shape shape(Ref r) const { return out.graph.type_of(r).shape; }
};

using Translate = std::function<Result<Ref>(Builder&)>;

Result<Ref> unary(Builder& b, std::string_view op, const Attrs& attrs = {}) {
  auto x = b.in(0);
  if (!x) return x.error();
  return b.op(op, {*x}, attrs);
}

Result<Ref> binary(Builder& b, std::string_view op) {
  auto x = b.in(0), y = b.in(1);
  if (!x) return x.error();
  if (!y) return y.error();
  return b.op(op, {*x, *y});
}

int64_t norm_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// [1, .., C, .., 1] for per-channel values along `axis` of a rank-`rank` tensor.
Result<Ref> along_axis(Builder& b, Ref v, int64_t axis, size_t rank) {
  Shape s = b.shape(v);
  if (s.size() != 1) return v;  // already broadcastable (a scalar, or shaped by its writer)
  Shape target(rank, 1);
  target[static_cast<size_t>(axis)] = s[0];
  return b.op("reshape", {v}, {{"shape", target}});
}

// Strides, pads and dilations of a 2-D window op, checked against what the engine supports.
Result<Attrs> window_attrs(Builder& b, bool conv) {
  const Node& n = *b.node;
  if (n.string_or("auto_pad", "NOTSET") != "NOTSET")
    return b.fail("auto_pad '" + n.string_or("auto_pad", "") + "' is not supported (give explicit pads)");
  auto strides = n.ints_or("strides", {1, 1});
  auto pads = n.ints_or("pads", {0, 0, 0, 0});
  auto dil = n.ints_or("dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    return b.fail("only 2-D windows are supported");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    return b.fail("asymmetric pads are not supported");
  if (conv) {
    Conv2dParams p;
    p.stride = {strides[0], strides[1]};
    p.padding = {pads[0], pads[1]};
    p.dilation = {dil[0], dil[1]};
    p.groups = n.int_or("group", 1);
    auto op = n.ints_or("output_padding", {0, 0});
    if (op.size() == 2) p.output_padding = {op[0], op[1]};
    return conv2d_attrs(p, n.op_type == "ConvTranspose");
  }
  if (dil != std::vector<int64_t>{1, 1}) return b.fail("dilated pooling is not supported");
  if (n.int_or("ceil_mode", 0) != 0) return b.fail("ceil_mode 1 is not supported");
  auto k = n.ints_or("kernel_shape", {});
  if (k.size() != 2) return b.fail("kernel_shape must have two entries");
  Pool2dParams p;
  p.kernel = {k[0], k[1]};
  p.stride = {strides[0], strides[1]};
  p.padding = {pads[0], pads[1]};
  p.count_include_pad = n.int_or("count_include_pad", 0) != 0;  // ONNX's default is 0
  return pool2d_attrs(p, n.op_type == "AveragePool");
}

Result<Ref> conv(Builder& b) {
  auto x = b.in(0), w = b.in(1);
  if (!x) return x.error();
  if (!w) return w.error();
  auto attrs = window_attrs(b, true);
  if (!attrs) return attrs.error();
  const bool transposed = b.node->op_type == "ConvTranspose";
  auto y = b.op(transposed ? "conv_transpose2d" : "conv2d", {*x, *w}, *attrs);
  if (!y || !b.has_input(2)) return y;
  auto bias = b.in(2);
  if (!bias) return bias.error();
  auto shaped = along_axis(b, *bias, 1, b.shape(*y).size());
  if (!shaped) return shaped.error();
  return b.op("add", {*y, *shaped});
}

Result<Ref> gemm(Builder& b) {
  const Node& n = *b.node;
  auto a = b.in(0), w = b.in(1);
  if (!a) return a.error();
  if (!w) return w.error();
  if (b.shape(*a).size() != 2 || b.shape(*w).size() != 2) return b.fail("Gemm needs 2-D operands");
  auto y = b.op("matmul", {*a, *w},
                {{"transpose_a", n.int_or("transA", 0)}, {"transpose_b", n.int_or("transB", 0)}});
  if (!y) return y;
  if (double alpha = n.float_or("alpha", 1.0); alpha != 1.0) y = b.op("scale", {*y}, {{"alpha", alpha}});
  if (!y || !b.has_input(2)) return y;
  auto c = b.in(2);
  if (!c) return c.error();
  if (double beta = n.float_or("beta", 1.0); beta != 1.0) c = b.op("scale", {*c}, {{"alpha", beta}});
  if (!c) return c;
  return b.op("add", {*y, *c});
}

Result<Ref> batch_norm(Builder& b) {
  Refs v;
  for (size_t i = 0; i < 5; ++i) {
    auto r = b.in(i);
    if (!r) return r.error();
    v.push_back(*r);
  }
  const size_t rank = b.shape(v[0]).size();
  if (rank < 2) return b.fail("the input needs a channel axis");
  // y = (x - mean) * (scale / sqrt(var + eps)) + bias, per channel (axis 1).
  auto shifted = b.op("add_scalar", {v[4]}, {{"value", b.node->float_or("epsilon", 1e-5)}});
  if (!shifted) return shifted;
  auto root = b.op("sqrt", {*shifted});
  if (!root) return root;
  auto factor = b.op("div", {v[1], *root});
  if (!factor) return factor;
  auto f = along_axis(b, *factor, 1, rank), mu = along_axis(b, v[3], 1, rank), beta = along_axis(b, v[2], 1, rank);
  if (!f || !mu || !beta) return b.fail("per-channel values must be 1-D");
  auto centred = b.op("sub", {v[0], *mu});
  if (!centred) return centred;
  auto scaled = b.op("mul", {*centred, *f});
  if (!scaled) return scaled;
  return b.op("add", {*scaled, *beta});
}

Result<Ref> reshape_to(Builder& b, Ref x, Shape target) {
  return b.op("reshape", {x}, {{"shape", std::move(target)}});
}

Result<Ref> flatten(Builder& b) {
  auto x = b.in(0);
  if (!x) return x;
  Shape s = b.shape(*x);
  const int64_t axis = norm_axis(b.node->int_or("axis", 1), s.size());
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < s.size(); ++i) (static_cast<int64_t>(i) < axis ? outer : inner) *= s[i];
  return reshape_to(b, *x, {outer, inner});
}

Result<Ref> reshape(Builder& b) {
  auto x = b.in(0);
  if (!x) return x;
  auto spec = b.constant(1);
  if (!spec) return spec.error();
  const Shape in = b.shape(*x);
  Shape target;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < spec->size(); ++i) {
    auto d = static_cast<int64_t>((*spec)[i]);
    if (d == 0 && b.node->int_or("allowzero", 0) == 0) {
      if (i >= in.size()) return b.fail("shape entry 0 copies a dimension the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return b.fail("the shape has two -1 entries");
      infer_at = static_cast<int64_t>(i);
    } else {
      known *= d;
    }
    target.push_back(d);
  }
  if (infer_at >= 0) {
    if (known == 0 || numel(in) % known != 0)
      return b.fail("cannot reshape " + shape_str(in) + " to " + shape_str(target));
    target[static_cast<size_t>(infer_at)] = numel(in) / known;
  }
  return reshape_to(b, *x, target);
}

// A quantized value stays f32 in the engine: QuantizeLinear's rounding and clamping are
// applied, and DequantizeLinear undoes the scale and zero point. Per-axis scales are
// supported (axis attribute, 1-D scale).
Result<Ref> quantize(Builder& b, bool dequantize) {
  auto x = b.in(0), s = b.in(1);
  if (!x) return x;
  if (!s) return s;
  const size_t rank = b.shape(*x).size();
  const int64_t axis = norm_axis(b.node->int_or("axis", 1), rank);
  auto scale = along_axis(b, *s, axis, rank);
  if (!scale) return scale;
  Ref zp;
  DType qtype = DType::U8;
  if (b.has_input(2)) {
    auto z = b.in(2);
    if (!z) return z;
    qtype = b.g().type_of(*z).dtype;
    auto zf = b.op("cast", {*z}, {{"dtype", std::string("f32")}});
    if (!zf) return zf;
    auto shaped = along_axis(b, *zf, axis, rank);
    if (!shaped) return shaped;
    zp = *shaped;
  }
  Ref v = *x;
  if (b.g().type_of(v).dtype != DType::F32) {
    auto c = b.op("cast", {v}, {{"dtype", std::string("f32")}});
    if (!c) return c;
    v = *c;
  }
  if (dequantize) {
    if (zp.valid()) {
      auto d = b.op("sub", {v, zp});
      if (!d) return d;
      v = *d;
    }
    return b.op("mul", {v, *scale});
  }
  if (qtype != DType::U8 && qtype != DType::I8) return b.fail("only uint8 and int8 quantization is supported");
  auto q = b.op("div", {v, *scale});
  if (!q) return q;
  q = b.op("round", {*q});
  if (!q) return q;
  if (zp.valid()) q = b.op("add", {*q, zp});
  if (!q) return q;
  const double lo = qtype == DType::U8 ? 0 : -128, hi = qtype == DType::U8 ? 255 : 127;
  return b.op("clamp", {*q}, {{"min", lo}, {"max", hi}});
}

const std::unordered_map<std::string, Translate>& table() {
  static const std::unordered_map<std::string, Translate> t = {
      {"Identity", [](Builder& b) { return b.in(0); }},
      {"Dropout", [](Builder& b) { return b.in(0); }},  // inference: the identity
      {"Cast",
       [](Builder& b) -> Result<Ref> {
         DType to;
         if (!dtype_of_onnx(static_cast<int32_t>(b.node->int_or("to", 0)), &to))
           return b.fail("casts to an unsupported type");
         return unary(b, "cast", {{"dtype", std::string(dtype_name(to))}});
       }},
      {"Add", [](Builder& b) { return binary(b, "add"); }},
      {"Sub", [](Builder& b) { return binary(b, "sub"); }},
      {"Mul", [](Builder& b) { return binary(b, "mul"); }},
      {"Div", [](Builder& b) { return binary(b, "div"); }},
      {"MatMul",
       [](Builder& b) -> Result<Ref> {
         auto x = b.in(0), w = b.in(1);
         if (!x) return x;
         if (!w) return w;
         return b.op("matmul", {*x, *w}, {{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}});
       }},
      {"Gemm", gemm},
      {"Conv", conv},
      {"ConvTranspose", conv},
      {"Relu", [](Builder& b) { return unary(b, "relu"); }},
      {"Sigmoid", [](Builder& b) { return unary(b, "sigmoid"); }},
      {"Tanh", [](Builder& b) { return unary(b, "tanh"); }},
      {"Exp", [](Builder& b) { return unary(b, "exp"); }},
      {"Log", [](Builder& b) { return unary(b, "log"); }},
      {"Sqrt", [](Builder& b) { return unary(b, "sqrt"); }},
      {"Neg", [](Builder& b) { return unary(b, "neg"); }},
      {"Abs", [](Builder& b) { return unary(b, "abs"); }},
      {"Softplus", [](Builder& b) { return unary(b, "softplus"); }},
      {"LeakyRelu",
       [](Builder& b) { return unary(b, "leaky_relu", {{"alpha", b.node->float_or("alpha", 0.01)}}); }},
      {"Softmax", [](Builder& b) { return unary(b, "softmax", {{"axis", b.node->int_or("axis", -1)}}); }},
      {"LogSoftmax",
       [](Builder& b) { return unary(b, "log_softmax", {{"axis", b.node->int_or("axis", -1)}}); }},
      {"MaxPool",
       [](Builder& b) -> Result<Ref> {
         if (b.node->outputs.size() > 1) return b.fail("the Indices output is not supported");
         auto a = window_attrs(b, false);
         if (!a) return a.error();
         return unary(b, "max_pool2d", *a);
       }},
      {"AveragePool",
       [](Builder& b) -> Result<Ref> {
         auto a = window_attrs(b, false);
         if (!a) return a.error();
         return unary(b, "avg_pool2d", *a);
       }},
      {"GlobalAveragePool",
       [](Builder& b) {
         return unary(b, "mean", {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}});
       }},
      {"BatchNormalization",
       [](Builder& b) -> Result<Ref> {
         if (b.node->outputs.size() > 1) return b.fail("training mode (running statistics outputs) is not supported");
         return batch_norm(b);
       }},
      {"Flatten", flatten},
      {"Reshape", reshape},
      {"Transpose",
       [](Builder& b) -> Result<Ref> {
         auto x = b.in(0);
         if (!x) return x;
         std::vector<int64_t> perm(b.shape(*x).size());
         for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
         return b.op("transpose", {*x}, {{"perm", b.node->ints_or("perm", perm)}});
       }},
      {"Concat",
       [](Builder& b) -> Result<Ref> {
         Refs xs;
         for (size_t i = 0; i < b.node->inputs.size(); ++i) {
           auto r = b.in(i);
           if (!r) return r;
           xs.push_back(*r);
         }
         auto r = b.g().add_node("concat", xs, {{"axis", b.node->int_or("axis", 0)}});
         if (!r) return b.fail(r.error().message);
         return r->at(0);
       }},
      {"QuantizeLinear", [](Builder& b) { return quantize(b, false); }},
      {"DequantizeLinear", [](Builder& b) { return quantize(b, true); }},
  };
  return t;
}

}  // namespace

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [k, fn] : table()) v.push_back(k);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

std::vector<std::string> unsupported_nodes(const Model& m) {
  std::vector<std::string> r;
  for (const Node& n : m.nodes)
    if (!n.domain.empty() || !table().count(n.op_type))
      r.push_back("node '" + (n.name.empty() ? (n.outputs.empty() ? "?" : n.outputs[0]) : n.name) + "' (" +
                  (n.domain.empty() ? "" : n.domain + ".") + n.op_type + ")");
  return r;
}

Result<OnnxGraph> to_graph(const Model& m, int64_t batch) {
  if (auto bad = unsupported_nodes(m); !bad.empty()) {
    std::string list;
    for (const std::string& s : bad) list += (list.empty() ? "" : ", ") + s;
    return make_error("unsupported ONNX ops: " + list);
  }
  OnnxGraph out{Graph(m.graph_name.empty() ? "onnx" : m.graph_name), {}, {}, &m};
  for (const ValueInfo& v : m.inputs) {
    Shape s;
    for (const Dim& d : v.dims) {
      if (!d.param.empty() || d.value < 0)
        s.push_back(batch);
      else
        s.push_back(d.value);
    }
    out.values[v.name] = out.graph.add_input(v.name, {v.dtype, s});
  }
  Builder b{m, out, batch};
  for (const Node& n : m.nodes) {
    b.node = &n;
    out.graph.set_label(n.name.empty() ? n.outputs.at(0) : n.name);
    if (n.outputs.empty()) return b.fail("the node has no output");
    auto r = table().at(n.op_type)(b);
    if (!r) return r.error();
    out.values[n.outputs[0]] = *r;
  }
  out.graph.set_label("");
  Refs outs;
  for (const ValueInfo& v : m.outputs) {
    auto it = out.values.find(v.name);
    if (it == out.values.end()) return make_error("graph output '" + v.name + "' is computed by no node");
    outs.push_back(it->second);
  }
  out.graph.set_outputs(outs);
  if (auto v = out.graph.verify(); !v) return v.error();
  return out;
}

std::vector<float> HostValue::floats() const {
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

Result<std::vector<HostValue>> run(const OnnxGraph& g, Backend& backend,
                                   const std::map<std::string, HostValue>& inputs,
                                   const std::vector<std::string>& names) {
  PlanOptions opt;
  for (const std::string& n : names) {
    auto it = g.values.find(n);
    if (it == g.values.end()) return make_error("no value '" + n + "' in the ONNX graph");
    opt.outputs.push_back(it->second);
  }
  auto plan = CompiledPlan::compile(g.graph, backend, opt);
  if (!plan) return plan.error();
  std::vector<Tensor> keep;
  for (const auto& [name, t] : g.weights) {
    Ref r = g.values.at(name);
    keep.push_back(Tensor::empty(backend, t->dtype, t->shape, AllocTag::Parameter));
    keep.back().fill_raw(t->bytes.data(), t->bytes.size());
    if (auto b = plan->bind(r, keep.back()); !b) return b.error();
  }
  for (Ref r : g.graph.inputs()) {
    const std::string& name = g.graph.value(r).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) return make_error("no data for the ONNX input '" + name + "'");
    const ValueType& t = g.graph.type_of(r);
    if (it->second.dtype != t.dtype || it->second.bytes.size() != static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype))
      return make_error("ONNX input '" + name + "' expects " + std::string(dtype_name(t.dtype)) +
                        shape_str(t.shape) + ", got " + std::string(dtype_name(it->second.dtype)) +
                        shape_str(it->second.shape));
    keep.push_back(Tensor::empty(backend, t.dtype, t.shape, AllocTag::Input));
    keep.back().fill_raw(it->second.bytes.data(), it->second.bytes.size());
    if (auto b = plan->bind(r, keep.back()); !b) return b.error();
  }
  plan->run();
  std::vector<HostValue> out;
  for (Ref r : opt.outputs) {
    const Tensor& t = plan->tensor(r);
    HostValue h;
    h.shape = t.shape();
    h.dtype = t.dtype();
    h.bytes.resize(t.nbytes());
    backend.copy_to_host(*t.buffer(), t.byte_offset(), h.bytes.data(), h.bytes.size());
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace mls::onnx
