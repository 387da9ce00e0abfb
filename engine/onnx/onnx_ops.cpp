// The ONNX op mapping table (onnx_ops.h): one entry per op, read by the importer and the
// graph exporter alike.
//
// [SECTION] contexts
// [SECTION] 1:1 ops with renamed attributes
// [SECTION] windows: Conv, ConvTranspose, MaxPool, AveragePool
// [SECTION] import-only composites
// [SECTION] export-only decompositions
// [SECTION] the table
#include "engine/onnx/onnx_ops.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "engine/onnx/onnx_windows.h"
#include "engine/ops/conv.h"

namespace mls::onnx {

// [SECTION] contexts

std::string ImportContext::where() const {
  return "node '" + (node->name.empty() ? node->outputs.at(0) : node->name) + "' (" +
         node->op_type + ")";
}

Result<Ref> ImportContext::op(std::string_view name, const Refs& in, const Attrs& attrs) {
  auto r = g().add_node(name, std::span<const Ref>(in.data(), in.size()), attrs);
  if (!r) return fail(r.error().message);
  return r->at(0);
}

Result<Ref> ImportContext::op(std::string_view name, std::initializer_list<Ref> in,
                              const Attrs& attrs) {
  return op(name, Refs(in), attrs);
}

Result<Ref> ImportContext::in(size_t i) {
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

Result<std::vector<double>> ImportContext::constant(size_t i) {
  if (!has_input(i)) return fail("input " + std::to_string(i) + " is missing");
  const CheckpointTensor* t = m.initializer(node->inputs[i]);
  if (!t) return fail("input '" + node->inputs[i] + "' must be an initializer (a constant)");
  return values_of(*t);
}

std::string ExportContext::where() const {
  return "op '" + node.op->name + "'" + (node.label.empty() ? "" : " (node '" + node.label + "')");
}

void ExportContext::emit(const std::string& op_type, std::vector<std::string> ins,
                         std::vector<Attribute> attrs) {
  m.add(op_type, std::move(ins), std::move(attrs), output);
}

std::string ExportContext::step(const std::string& op_type, std::vector<std::string> ins,
                                std::vector<Attribute> attrs) {
  return m.add(op_type, std::move(ins), std::move(attrs), m.fresh(output + "/" + op_type));
}

std::vector<size_t> ExportContext::batch_dims() const {
  const Shape out = out_shape();
  std::vector<size_t> dims;
  if (twin) {
    const Shape other = twin_graph->type_of(twin->outputs.at(0)).shape;
    for (size_t i = 0; i < out.size() && i < other.size(); ++i)
      if (out[i] != other[i]) dims.push_back(i);
  } else if (dynamic_batch && !out.empty() && !node.inputs.empty()) {
    const Shape in = in_shape(0);
    if (!in.empty() && out[0] == in[0]) dims.push_back(0);
  }
  return dims;
}

std::string ExportContext::scalar(float v) {
  return m.add_scalar(m.fresh(output + ".c"), v);
}

std::string ExportContext::ints(const std::vector<int64_t>& v) {
  return m.add_ints(m.fresh(output + ".shape"), v);
}

namespace {

int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// [1, .., C, .., 1] for per-channel values along `axis` of a rank-`rank` tensor.
Result<Ref> along_axis(ImportContext& c, Ref v, int64_t axis, size_t rank) {
  Shape s = c.shape(v);
  if (s.size() != 1) return v;  // already broadcastable (a scalar, or shaped by its writer)
  Shape target(rank, 1);
  target[static_cast<size_t>(axis)] = s[0];
  return c.op("reshape", {v}, {{"shape", target}});
}

// [SECTION] 1:1 ops with renamed attributes

// One attribute under its ONNX and its engine name, with ONNX's default (what an absent
// ONNX attribute means, and what an engine node without it is written with).
struct AttrRule {
  const char* onnx;
  const char* engine;
  AttrValue fallback;
};

Attrs engine_attrs(const Node& n, const std::vector<AttrRule>& rules) {
  Attrs a;
  for (const AttrRule& r : rules) {
    if (const auto* i = std::get_if<int64_t>(&r.fallback))
      a.set(r.engine, n.int_or(r.onnx, *i));
    else if (const auto* d = std::get_if<double>(&r.fallback))
      a.set(r.engine, n.float_or(r.onnx, *d));
    else if (const auto* l = std::get_if<std::vector<int64_t>>(&r.fallback))
      a.set(r.engine, n.ints_or(r.onnx, *l));
    else
      a.set(r.engine, n.string_or(r.onnx, std::get<std::string>(r.fallback)));
  }
  return a;
}

std::vector<Attribute> onnx_attrs(const Attrs& a, const std::vector<AttrRule>& rules) {
  std::vector<Attribute> out;
  for (const AttrRule& r : rules) {
    const AttrValue* v = a.find(r.engine);
    const AttrValue& val = v ? *v : r.fallback;
    if (const auto* i = std::get_if<int64_t>(&val))
      out.push_back(Attribute::i(r.onnx, *i));
    else if (const auto* d = std::get_if<double>(&val))
      out.push_back(Attribute::f(r.onnx, *d));
    else if (const auto* l = std::get_if<std::vector<int64_t>>(&val))
      out.push_back(Attribute::list(r.onnx, *l));
    else
      out.push_back(Attribute::s(r.onnx, std::get<std::string>(val)));
  }
  return out;
}

// Inputs in order, attributes renamed: the whole of both directions for most ops.
OpMapping same(std::string onnx_op, std::string engine_op, std::vector<AttrRule> rules = {}) {
  OpMapping m{onnx_op, engine_op, {}, {}, {}};
  m.from_onnx = [engine_op, rules](ImportContext& c) -> Result<Ref> {
    Refs ins;
    for (size_t i = 0; i < c.node->inputs.size(); ++i) {
      if (!c.has_input(i)) continue;
      auto r = c.in(i);
      if (!r) return r;
      ins.push_back(*r);
    }
    return c.op(engine_op, ins, engine_attrs(*c.node, rules));
  };
  m.to_onnx = [onnx_op, rules](ExportContext& c) -> Result<void> {
    c.emit(onnx_op, c.inputs, onnx_attrs(c.node.attrs, rules));
    return {};
  };
  return m;
}

OpMapping cast() {
  OpMapping m{"Cast", "cast", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    DType to;
    if (!dtype_of_onnx(static_cast<int32_t>(c.node->int_or("to", 0)), &to))
      return c.fail("casts to an unsupported type");
    auto x = c.in(0);
    if (!x) return x;
    return c.op("cast", {*x}, {{"dtype", std::string(dtype_name(to))}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    auto to = parse_dtype(c.node.attrs.get_string("dtype"));
    const int32_t code = to ? onnx_type_of(*to) : -1;
    if (code < 0) return c.fail("ONNX has no type for " + c.node.attrs.get_string("dtype"));
    c.emit("Cast", c.inputs, {Attribute::i("to", code)});
    return {};
  };
  return m;
}

// MatMul reads as a plain product; an engine product with transposed operands is written
// with a Transpose of the operand's last two axes before it.
OpMapping matmul() {
  OpMapping m{"MatMul", "matmul", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    auto x = c.in(0), w = c.in(1);
    if (!x) return x;
    if (!w) return w;
    return c.op("matmul", {*x, *w}, {{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    std::vector<std::string> ins = c.inputs;
    const char* flags[] = {"transpose_a", "transpose_b"};
    for (size_t i = 0; i < 2; ++i) {
      if (c.node.attrs.get_int_or(flags[i], 0) == 0) continue;
      const size_t rank = c.in_shape(i).size();
      if (rank < 2) return c.fail("a transposed operand needs two axes");
      std::vector<int64_t> perm(rank);
      for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(k);
      std::swap(perm[rank - 1], perm[rank - 2]);
      ins[i] = c.step("Transpose", {ins[i]}, {Attribute::list("perm", perm)});
    }
    c.emit("MatMul", ins);
    return {};
  };
  return m;
}

// The target shape goes in an i64 initializer. Where the engine's reshape keeps dim 0 (the
// batch) it is written as 0 ("copy the input's"), so the file runs at any batch size.
OpMapping reshape() {
  OpMapping m{"Reshape", "reshape", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    auto x = c.in(0);
    if (!x) return x;
    auto spec = c.constant(1);
    if (!spec) return spec.error();
    const Shape in = c.shape(*x);
    Shape target;
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < spec->size(); ++i) {
      auto d = static_cast<int64_t>((*spec)[i]);
      if (d == 0 && c.node->int_or("allowzero", 0) == 0) {
        if (i >= in.size()) return c.fail("shape entry 0 copies a dimension the input lacks");
        d = in[i];
      }
      if (d == -1) {
        if (infer_at >= 0) return c.fail("the shape has two -1 entries");
        infer_at = static_cast<int64_t>(i);
      } else {
        known *= d;
      }
      target.push_back(d);
    }
    if (infer_at >= 0) {
      if (known == 0 || numel(in) % known != 0)
        return c.fail("cannot reshape " + shape_str(in) + " to " + shape_str(target));
      target[static_cast<size_t>(infer_at)] = numel(in) / known;
    }
    return c.op("reshape", {*x}, {{"shape", target}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    Shape target = c.out_shape();
    const Shape in = c.in_shape(0);
    // [N, ...] -> [N, rest]: ONNX's own Flatten (what the importer reads back as a Flatten).
    if (target.size() == 2 && in.size() >= 2 && target[0] == in[0] &&
        target[1] * in[0] == numel(in)) {
      c.emit("Flatten", c.inputs, {Attribute::i("axis", 1)});
      return {};
    }
    // The dim that carries the batch is left for ONNX to work out: 0 ("the input's") where it
    // is the input's dim 0, else -1. Two such dims cannot both be left open.
    const std::vector<size_t> varying = c.batch_dims();
    if (varying.size() > 1)
      return c.fail("the batch size reaches " + std::to_string(varying.size()) +
                    " dims of the target shape " + shape_str(target) +
                    ": ONNX can leave only one open");
    if (varying.size() == 1) {
      const size_t d = varying[0];
      bool keeps = d == 0 && target[0] == in[0];
      if (keeps && c.twin)
        keeps = c.twin_graph->type_of(c.twin->outputs[0]).shape[0] ==
                c.twin_graph->type_of(c.twin->inputs[0]).shape[0];
      target[d] = keeps ? 0 : -1;
    }
    c.emit("Reshape", {c.inputs[0], c.ints(target)});
    return {};
  };
  return m;
}

OpMapping transpose() {
  OpMapping m{"Transpose", "transpose", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    auto x = c.in(0);
    if (!x) return x;
    std::vector<int64_t> perm(c.shape(*x).size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
    return c.op("transpose", {*x}, {{"perm", c.node->ints_or("perm", perm)}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    c.emit("Transpose", c.inputs, {Attribute::list("perm", c.node.attrs.get_ints("perm"))});
    return {};
  };
  return m;
}

// ONNX's Concat wants a non-negative axis in files older tools read; it is written so.
OpMapping concat() {
  OpMapping m{"Concat", "concat", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    Refs xs;
    for (size_t i = 0; i < c.node->inputs.size(); ++i) {
      auto r = c.in(i);
      if (!r) return r;
      xs.push_back(*r);
    }
    return c.op("concat", xs, {{"axis", c.node->int_or("axis", 0)}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    const int64_t axis = norm_axis(c.node.attrs.get_int("axis"), c.out_shape().size());
    c.emit("Concat", c.inputs, {Attribute::i("axis", axis)});
    return {};
  };
  return m;
}

// ReduceMean (opset 17: axes an attribute) <-> mean; GlobalAveragePool reads as a mean too.
OpMapping reduce_mean() {
  OpMapping m{"ReduceMean", "mean", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    auto x = c.in(0);
    if (!x) return x;
    std::vector<int64_t> all(c.shape(*x).size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return c.op(
        "mean", {*x},
        {{"axes", c.node->ints_or("axes", all)}, {"keepdims", c.node->int_or("keepdims", 1)}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    std::vector<int64_t> axes = c.node.attrs.get_ints("axes");
    if (axes.empty())  // the engine's "every axis"
      for (size_t i = 0; i < c.in_shape(0).size(); ++i) axes.push_back(static_cast<int64_t>(i));
    c.emit("ReduceMean", c.inputs,
           {Attribute::list("axes", axes),
            Attribute::i("keepdims", c.node.attrs.get_int_or("keepdims", 0))});
    return {};
  };
  return m;
}

// LayerNormalization over the trailing axes that gamma covers.
OpMapping layer_norm() {
  OpMapping m{"LayerNormalization", "layer_norm", {}, {}, {}};
  m.from_onnx = [](ImportContext& c) -> Result<Ref> {
    if (c.node->outputs.size() > 1)
      return c.fail("the Mean and InvStdDev outputs are not supported");
    auto x = c.in(0), g = c.in(1), b = c.in(2);
    if (!x) return x;
    if (!g) return g;
    if (!b) return b;
    const size_t rank = c.shape(*x).size();
    const int64_t axis = norm_axis(c.node->int_or("axis", -1), rank);
    if (axis + static_cast<int64_t>(c.shape(*g).size()) != static_cast<int64_t>(rank))
      return c.fail("the scale must cover the axes from " + std::to_string(axis) + " on");
    return c.op("layer_norm", {*x, *g, *b}, {{"eps", c.node->float_or("epsilon", 1e-5)}});
  };
  m.to_onnx = [](ExportContext& c) -> Result<void> {
    const auto axis = static_cast<int64_t>(c.in_shape(0).size() - c.in_shape(1).size());
    c.emit("LayerNormalization", c.inputs,
           {Attribute::i("axis", axis),
            Attribute::f("epsilon", c.node.attrs.get_float_or("eps", 1e-5))});
    return {};
  };
  return m;
}

// [SECTION] windows: Conv, ConvTranspose, MaxPool, AveragePool

// The window attributes (onnx_windows.h), refused with the node named.
Result<Attrs> window_from_onnx(ImportContext& c, bool conv) {
  if (conv) {
    auto p = conv_window(*c.node);
    if (!p) return c.fail(p.error().message);
    return conv2d_attrs(*p, c.node->op_type == "ConvTranspose");
  }
  auto p = pool_window(*c.node);
  if (!p) return c.fail(p.error().message);
  return pool2d_attrs(*p, c.node->op_type == "AveragePool");
}

std::vector<int64_t> pads_of(const Pair2& p) {
  return {p[0], p[1], p[0], p[1]};
}

OpMapping conv(bool transposed) {
  const std::string onnx_op = transposed ? "ConvTranspose" : "Conv";
  const std::string engine_op = transposed ? "conv_transpose2d" : "conv2d";
  OpMapping m{onnx_op, engine_op, {}, {}, {}};
  m.from_onnx = [engine_op](ImportContext& c) -> Result<Ref> {
    auto x = c.in(0), w = c.in(1);
    if (!x) return x;
    if (!w) return w;
    auto attrs = window_from_onnx(c, true);
    if (!attrs) return attrs.error();
    auto y = c.op(engine_op, {*x, *w}, *attrs);
    if (!y || !c.has_input(2)) return y;
    auto bias = c.in(2);
    if (!bias) return bias;
    auto shaped = along_axis(c, *bias, 1, c.shape(*y).size());
    if (!shaped) return shaped;
    return c.op("add", {*y, *shaped});
  };
  m.to_onnx = [onnx_op, transposed](ExportContext& c) -> Result<void> {
    auto p = conv2d_params(c.node.attrs);
    if (!p) return c.fail(p.error().message);
    const Shape w = c.in_shape(1);
    std::vector<Attribute> a{Attribute::list("kernel_shape", {w.at(2), w.at(3)}),
                             Attribute::list("strides", {p->stride[0], p->stride[1]}),
                             Attribute::list("pads", pads_of(p->padding)),
                             Attribute::list("dilations", {p->dilation[0], p->dilation[1]}),
                             Attribute::i("group", p->groups)};
    if (transposed)
      a.push_back(Attribute::list("output_padding", {p->output_padding[0], p->output_padding[1]}));
    c.emit(onnx_op, c.inputs, a);
    return {};
  };
  return m;
}

OpMapping pool(bool avg) {
  const std::string onnx_op = avg ? "AveragePool" : "MaxPool";
  const std::string engine_op = avg ? "avg_pool2d" : "max_pool2d";
  OpMapping m{onnx_op, engine_op, {}, {}, {}};
  m.from_onnx = [engine_op, avg](ImportContext& c) -> Result<Ref> {
    if (!avg && c.node->outputs.size() > 1) return c.fail("the Indices output is not supported");
    auto a = window_from_onnx(c, false);
    if (!a) return a.error();
    auto x = c.in(0);
    if (!x) return x;
    return c.op(engine_op, {*x}, *a);
  };
  m.to_onnx = [onnx_op, avg](ExportContext& c) -> Result<void> {
    auto p = pool2d_params(c.node.attrs);
    if (!p) return c.fail(p.error().message);
    std::vector<Attribute> a{Attribute::list("kernel_shape", {p->kernel[0], p->kernel[1]}),
                             Attribute::list("strides", {p->stride[0], p->stride[1]}),
                             Attribute::list("pads", pads_of(p->padding))};
    if (avg) a.push_back(Attribute::i("count_include_pad", p->count_include_pad ? 1 : 0));
    c.emit(onnx_op, c.inputs, a);
    return {};
  };
  return m;
}

// [SECTION] import-only composites

Result<Ref> gemm(ImportContext& c) {
  const Node& n = *c.node;
  auto a = c.in(0), w = c.in(1);
  if (!a) return a;
  if (!w) return w;
  if (c.shape(*a).size() != 2 || c.shape(*w).size() != 2) return c.fail("Gemm needs 2-D operands");
  auto y = c.op("matmul", {*a, *w},
                {{"transpose_a", n.int_or("transA", 0)}, {"transpose_b", n.int_or("transB", 0)}});
  if (!y) return y;
  if (double alpha = n.float_or("alpha", 1.0); alpha != 1.0)
    y = c.op("scale", {*y}, {{"alpha", alpha}});
  if (!y || !c.has_input(2)) return y;
  auto b = c.in(2);
  if (!b) return b;
  if (double beta = n.float_or("beta", 1.0); beta != 1.0)
    b = c.op("scale", {*b}, {{"alpha", beta}});
  if (!b) return b;
  return c.op("add", {*y, *b});
}

Result<Ref> batch_norm(ImportContext& c) {
  if (c.node->outputs.size() > 1)
    return c.fail("training mode (running statistics outputs) is not supported");
  Refs v;
  for (size_t i = 0; i < 5; ++i) {
    auto r = c.in(i);
    if (!r) return r;
    v.push_back(*r);
  }
  const size_t rank = c.shape(v[0]).size();
  if (rank < 2) return c.fail("the input needs a channel axis");
  // y = (x - mean) * (scale / sqrt(var + eps)) + bias, per channel (axis 1).
  auto shifted = c.op("add_scalar", {v[4]}, {{"value", c.node->float_or("epsilon", 1e-5)}});
  if (!shifted) return shifted;
  auto root = c.op("sqrt", {*shifted});
  if (!root) return root;
  auto factor = c.op("div", {v[1], *root});
  if (!factor) return factor;
  auto f = along_axis(c, *factor, 1, rank), mu = along_axis(c, v[3], 1, rank),
       beta = along_axis(c, v[2], 1, rank);
  if (!f || !mu || !beta) return c.fail("per-channel values must be 1-D");
  auto centred = c.op("sub", {v[0], *mu});
  if (!centred) return centred;
  auto scaled = c.op("mul", {*centred, *f});
  if (!scaled) return scaled;
  return c.op("add", {*scaled, *beta});
}

Result<Ref> flatten(ImportContext& c) {
  auto x = c.in(0);
  if (!x) return x;
  Shape s = c.shape(*x);
  const int64_t axis = norm_axis(c.node->int_or("axis", 1), s.size());
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < s.size(); ++i) (static_cast<int64_t>(i) < axis ? outer : inner) *= s[i];
  return c.op("reshape", {*x}, {{"shape", Shape{outer, inner}}});
}

// A quantized value stays f32 in the engine: QuantizeLinear's rounding and clamping are
// applied, and DequantizeLinear undoes the scale and zero point. Per-axis scales are
// supported (axis attribute, 1-D scale).
Result<Ref> quantize(ImportContext& c, bool dequantize) {
  auto x = c.in(0), s = c.in(1);
  if (!x) return x;
  if (!s) return s;
  const size_t rank = c.shape(*x).size();
  const int64_t axis = norm_axis(c.node->int_or("axis", 1), rank);
  auto scale = along_axis(c, *s, axis, rank);
  if (!scale) return scale;
  Ref zp;
  DType qtype = DType::U8;
  if (c.has_input(2)) {
    auto z = c.in(2);
    if (!z) return z;
    qtype = c.g().type_of(*z).dtype;
    auto zf = c.op("cast", {*z}, {{"dtype", std::string("f32")}});
    if (!zf) return zf;
    auto shaped = along_axis(c, *zf, axis, rank);
    if (!shaped) return shaped;
    zp = *shaped;
  }
  Ref v = *x;
  if (c.g().type_of(v).dtype != DType::F32) {
    auto cv = c.op("cast", {v}, {{"dtype", std::string("f32")}});
    if (!cv) return cv;
    v = *cv;
  }
  if (dequantize) {
    if (zp.valid()) {
      auto d = c.op("sub", {v, zp});
      if (!d) return d;
      v = *d;
    }
    return c.op("mul", {v, *scale});
  }
  if (qtype != DType::U8 && qtype != DType::I8)
    return c.fail("only uint8 and int8 quantization is supported");
  auto q = c.op("div", {v, *scale});
  if (!q) return q;
  q = c.op("round", {*q});
  if (!q) return q;
  if (zp.valid()) q = c.op("add", {*q, zp});
  if (!q) return q;
  const double lo = qtype == DType::U8 ? 0 : -128, hi = qtype == DType::U8 ? 255 : 127;
  return c.op("clamp", {*q}, {{"min", lo}, {"max", hi}});
}

OpMapping import_only(std::string onnx_op, FromOnnx fn) {
  return {std::move(onnx_op), "", std::move(fn), {}, {}};
}

// [SECTION] export-only decompositions

OpMapping export_only(std::string engine_op, ToOnnx fn, Refusal refuse = {}) {
  return {"", std::move(engine_op), {}, std::move(fn), std::move(refuse)};
}

// scale and add_scalar: Mul and Add by an f32 scalar.
OpMapping by_scalar(std::string engine_op, std::string onnx_op, const char* attr) {
  return export_only(engine_op, [onnx_op, attr](ExportContext& c) -> Result<void> {
    c.emit(onnx_op, {c.inputs[0], c.scalar(static_cast<float>(c.node.attrs.get_float(attr)))});
    return {};
  });
}

Result<void> clamp_to_onnx(ExportContext& c) {
  const double lo = c.node.attrs.get_float_or("min", -INFINITY),
               hi = c.node.attrs.get_float_or("max", INFINITY);
  // Clip's bounds are optional inputs: "" leaves one out.
  c.emit("Clip", {c.inputs[0], std::isinf(lo) ? "" : c.scalar(static_cast<float>(lo)),
                  std::isinf(hi) ? "" : c.scalar(static_cast<float>(hi))});
  return {};
}

// Clip with constant bounds (absent: none on that side).
Result<Ref> clamp_from_onnx(ImportContext& c) {
  auto x = c.in(0);
  if (!x) return x;
  Attrs a;
  const char* names[] = {"min", "max"};
  for (size_t i = 1; i < 3; ++i) {
    if (!c.has_input(i)) continue;
    auto v = c.constant(i);
    if (!v) return v.error();
    if (v->size() != 1)
      return c.fail(std::string("the ") + names[i - 1] + " bound must be one value");
    a.set(names[i - 1], v->at(0));
  }
  return c.op("clamp", {*x}, a);
}

Result<void> silu_to_onnx(ExportContext& c) {
  c.emit("Mul", {c.inputs[0], c.step("Sigmoid", {c.inputs[0]})});
  return {};
}

// Opset 17 has no Gelu; the tanh form is written out. The exact form needs Erf, which the
// engine has not, so the check every export runs could not run the file: refused.
std::string gelu_refusal(const Attrs& a) {
  if (a.has("approximate") && a.get_string("approximate") == "tanh") return "";
  return "exact GELU needs ONNX Erf, which the export check cannot run yet; use approximate 'tanh'";
}

Result<void> gelu_to_onnx(ExportContext& c) {
  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  const std::string& x = c.inputs[0];
  std::string x3 = c.step("Mul", {c.step("Mul", {x, x}), x});
  std::string inner = c.step("Add", {x, c.step("Mul", {x3, c.scalar(0.044715f)})});
  std::string t = c.step("Tanh", {c.step("Mul", {inner, c.scalar(0.7978845608f)})});
  c.emit("Mul", {c.step("Mul", {x, c.scalar(0.5f)}), c.step("Add", {t, c.scalar(1.0f)})});
  return {};
}

// ONNX's Softplus is log(1 + exp(x)): beta 1, and no threshold (past 20 the two agree in f32).
std::string softplus_refusal(const Attrs& a) {
  if (a.get_float_or("beta", 1.0) != 1.0 || a.get_float_or("threshold", 20.0) < 20.0)
    return "Softplus with beta != 1 or threshold < 20 has no ONNX op";
  return "";
}

// Evaluation-mode dropout is the identity.
std::string dropout_refusal(const Attrs& a) {
  return a.get_int_or("training", 1) != 0 ? "training-mode dropout has no ONNX form" : "";
}

// Expand with a constant shape: numpy broadcasting of the input's shape and that one.
Result<Ref> expand_from_onnx(ImportContext& c) {
  auto x = c.in(0);
  if (!x) return x;
  auto spec = c.constant(1);
  if (!spec) return spec.error();
  const Shape in = c.shape(*x);
  Shape out(std::max(in.size(), spec->size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t a = i + in.size() >= out.size() ? in[i + in.size() - out.size()] : 1;
    const int64_t b = i + spec->size() >= out.size()
                          ? static_cast<int64_t>((*spec)[i + spec->size() - out.size()])
                          : 1;
    if (a != b && a != 1 && b != 1)
      return c.fail("cannot broadcast " + shape_str(in) + " to the shape given");
    out[i] = a == 1 ? b : a;
  }
  // The shape is the file's to choose: a hostile one must not make the engine allocate
  // without bound (2^31 elements at most, the product checked before it can wrap).
  constexpr int64_t kMaxElements = int64_t{1} << 31;
  int64_t n = 1;
  for (int64_t d : out) {
    if (d < 0 || (d > 0 && n > kMaxElements / d))
      return c.fail("the shape asks for more than 2^31 elements");
    n *= d;
  }
  return c.op("expand", {*x}, {{"shape", out}});
}

// A dim the input already has is written as 1 (Expand keeps the input's there), so a batch
// dim the input carries stays the file's batch.
Result<void> expand_to_onnx(ExportContext& c) {
  Shape target = c.out_shape();
  const Shape in = c.in_shape(0);
  for (size_t i = 0; i < in.size() && i < target.size(); ++i) {
    const size_t t = target.size() - in.size() + i;
    if (in[i] == target[t]) target[t] = 1;
  }
  c.emit("Expand", {c.inputs[0], c.ints(target)});
  return {};
}

// [SECTION] the table

std::vector<OpMapping> make_table() {
  std::vector<OpMapping> t = {
      // Elementwise, 1:1.
      same("Add", "add"),
      same("Sub", "sub"),
      same("Mul", "mul"),
      same("Div", "div"),
      same("Relu", "relu"),
      same("Sigmoid", "sigmoid"),
      same("Tanh", "tanh"),
      same("Exp", "exp"),
      same("Log", "log"),
      same("Sqrt", "sqrt"),
      same("Neg", "neg"),
      same("Abs", "abs"),
      same("Sin", "sin"),
      same("Cos", "cos"),
      same("Pow", "pow"),
      same("Max", "maximum"),
      same("Min", "minimum"),
      same("Sign", "sign"),
      same("Round", "round"),
      same("LeakyRelu", "leaky_relu", {{"alpha", "alpha", 0.01}}),
      same("Softmax", "softmax", {{"axis", "axis", int64_t{-1}}}),
      same("LogSoftmax", "log_softmax", {{"axis", "axis", int64_t{-1}}}),
      // Softplus reads 1:1; only beta 1 writes back.
      {"Softplus", "softplus", same("Softplus", "softplus").from_onnx,
       same("Softplus", "softplus").to_onnx, softplus_refusal},
      cast(),
      matmul(),
      conv(false),
      conv(true),
      pool(false),
      pool(true),
      reshape(),
      transpose(),
      concat(),
      reduce_mean(),
      layer_norm(),
      // Read as several engine ops.
      import_only("Identity", [](ImportContext& c) { return c.in(0); }),
      import_only("Dropout", [](ImportContext& c) { return c.in(0); }),  // inference: the identity
      import_only("Gemm", gemm),
      import_only("BatchNormalization", batch_norm),
      import_only("Flatten", flatten),
      import_only("GlobalAveragePool",
                  [](ImportContext& c) -> Result<Ref> {
                    auto x = c.in(0);
                    if (!x) return x;
                    return c.op("mean", {*x},
                                {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}});
                  }),
      import_only("QuantizeLinear", [](ImportContext& c) { return quantize(c, false); }),
      import_only("DequantizeLinear", [](ImportContext& c) { return quantize(c, true); }),
      // Written as several ONNX ops.
      by_scalar("scale", "Mul", "alpha"),
      by_scalar("add_scalar", "Add", "value"),
      {"Clip", "clamp", clamp_from_onnx, clamp_to_onnx, {}},
      export_only("silu", silu_to_onnx),
      export_only("rsqrt",
                  [](ExportContext& c) -> Result<void> {
                    c.emit("Div", {c.scalar(1.0f), c.step("Sqrt", c.inputs)});
                    return {};
                  }),
      export_only("gelu", gelu_to_onnx, gelu_refusal),
      export_only(
          "dropout",
          [](ExportContext& c) -> Result<void> {
            c.emit("Identity", {c.inputs[0]});
            return {};
          },
          dropout_refusal),
      {"Expand", "expand", expand_from_onnx, expand_to_onnx, {}},
  };
  return t;
}

}  // namespace

const std::vector<OpMapping>& op_mappings() {
  static const std::vector<OpMapping> t = make_table();
  return t;
}

const OpMapping* mapping_for_onnx(std::string_view op_type) {
  static const auto index = [] {
    std::unordered_map<std::string, const OpMapping*> m;
    for (const OpMapping& e : op_mappings())
      if (!e.onnx.empty() && e.from_onnx) m.emplace(e.onnx, &e);
    return m;
  }();
  auto it = index.find(std::string(op_type));
  return it == index.end() ? nullptr : it->second;
}

const OpMapping* mapping_for_engine(std::string_view op) {
  static const auto index = [] {
    std::unordered_map<std::string, const OpMapping*> m;
    for (const OpMapping& e : op_mappings())
      if (!e.engine.empty() && e.to_onnx) m.emplace(e.engine, &e);
    return m;
  }();
  auto it = index.find(std::string(op));
  return it == index.end() ? nullptr : it->second;
}

}  // namespace mls::onnx
