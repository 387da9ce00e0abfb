#include "engine/onnx/onnx_graph.h"

#include <algorithm>
#include <cstring>

#include "engine/exec/compiled_plan.h"
#include "engine/onnx/onnx_ops.h"

namespace mls::onnx {

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const OpMapping& e : op_mappings())
      if (!e.onnx.empty() && e.from_onnx) v.push_back(e.onnx);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

std::vector<std::string> unsupported_nodes(const Model& m) {
  std::vector<std::string> r;
  for (const Node& n : m.nodes)
    if (!n.domain.empty() || !mapping_for_onnx(n.op_type))
      r.push_back("node '" + (n.name.empty() ? (n.outputs.empty() ? "?" : n.outputs[0]) : n.name) +
                  "' (" + (n.domain.empty() ? "" : n.domain + ".") + n.op_type + ")");
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
  ImportContext b{m, out, batch};
  for (const Node& n : m.nodes) {
    b.node = &n;
    out.graph.set_label(n.name.empty() ? n.outputs.at(0) : n.name);
    if (n.outputs.empty()) return b.fail("the node has no output");
    auto r = mapping_for_onnx(n.op_type)->from_onnx(b);
    if (!r) return r.error();
    out.values[n.outputs[0]] = *r;
  }
  out.graph.set_label("");
  Refs outs;
  for (const ValueInfo& v : m.outputs) {
    auto it = out.values.find(v.name);
    if (it == out.values.end())
      return make_error("graph output '" + v.name + "' is computed by no node");
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
    if (it->second.dtype != t.dtype ||
        it->second.bytes.size() != static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype))
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
