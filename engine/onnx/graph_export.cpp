#include "engine/onnx/graph_export.h"

#include <set>

#include "engine/onnx/onnx_ops.h"

namespace mls::onnx {

namespace {

std::string op_where(const mls::Node& n) {
  return "op '" + n.op->name + "'" + (n.label.empty() ? "" : " (node '" + n.label + "')");
}

// The nodes the outputs depend on, by index.
std::vector<bool> needed_nodes(const Graph& g) {
  std::vector<bool> need(g.nodes().size(), false);
  std::vector<Ref> todo(g.outputs().begin(), g.outputs().end());
  std::set<int32_t> seen;
  while (!todo.empty()) {
    Ref r = todo.back();
    todo.pop_back();
    if (!seen.insert(r.id).second) continue;
    const Value& v = g.value(r);
    if (v.kind != ValueKind::Node) continue;
    need[static_cast<size_t>(v.node)] = true;
    for (Ref in : g.nodes()[static_cast<size_t>(v.node)].inputs) todo.push_back(in);
  }
  return need;
}

// Where a needed node cannot be written: the reason, or "".
std::string problem_of(const Graph& g, size_t k, const std::vector<bool>& need) {
  const mls::Node& n = g.nodes()[k];
  const OpMapping* mapping = mapping_for_engine(n.op->name);
  if (!mapping) return op_where(n) + " has no ONNX mapping";
  if (mapping->refuse)
    if (std::string why = mapping->refuse(n.attrs); !why.empty()) return op_where(n) + ": " + why;
  // Only output 0 is written: another output that a needed node reads cannot be.
  for (size_t o = 1; o < n.outputs.size(); ++o)
    for (size_t j = k + 1; j < g.nodes().size(); ++j)
      if (need[j])
        for (Ref in : g.nodes()[j].inputs)
          if (in == n.outputs[o])
            return op_where(n) + ": its output " + std::to_string(o) + " has no ONNX form";
  for (Ref out : g.outputs())
    for (size_t o = 1; o < n.outputs.size(); ++o)
      if (out == n.outputs[o])
        return op_where(n) + ": its output " + std::to_string(o) + " has no ONNX form";
  return "";
}

// A value's dims: "N" where the batch shows (a dim that differs in the twin, or dim 0 of the
// batch's size without one).
std::vector<Dim> dims_of(const Shape& s, const Shape* other, int64_t batch) {
  std::vector<Dim> d;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool varies =
        other ? (i < other->size() && (*other)[i] != s[i]) : (i == 0 && batch > 0 && s[0] == batch);
    if (varies)
      d.push_back(Dim::named("N"));
    else
      d.emplace_back(s[i]);
  }
  return d;
}

// The twin must be the same graph: same values and ops, in the same order.
Result<void> check_twin(const Graph& g, const Graph& t) {
  bool same = g.values().size() == t.values().size() && g.nodes().size() == t.nodes().size() &&
              g.outputs().size() == t.outputs().size() && g.inputs() == t.inputs();
  for (size_t k = 0; same && k < g.nodes().size(); ++k)
    same = g.nodes()[k].op == t.nodes()[k].op && g.nodes()[k].inputs == t.nodes()[k].inputs;
  for (size_t i = 0; same && i < g.outputs().size(); ++i) same = g.outputs()[i] == t.outputs()[i];
  if (same) return {};
  return make_error(
      "cannot export to ONNX: the model's graph at another batch size has other ops (does its "
      "forward depend on the batch size?)");
}

}  // namespace

std::string export_problems(const Graph& g) {
  const std::vector<bool> need = needed_nodes(g);
  std::string out;
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (need[k])
      if (std::string p = problem_of(g, k, need); !p.empty()) out += (out.empty() ? "" : "\n") + p;
  return out;
}

CheckpointTensor host_copy(const std::string& name, const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  CheckpointTensor out;
  out.name = name;
  out.dtype = c.dtype();
  out.shape = c.shape();
  out.bytes.resize(c.nbytes());
  if (!out.bytes.empty())
    c.backend().copy_to_host(*c.buffer(), c.byte_offset(), out.bytes.data(), out.bytes.size());
  return out;
}

Result<ValueNames> append_graph(Model& m, const Graph& g,
                                const std::map<std::string, CheckpointTensor>& params,
                                const GraphExportOptions& o) {
  if (std::string p = export_problems(g); !p.empty()) {
    std::string list;
    for (size_t at = 0, next; at < p.size(); at = next + 1) {
      next = p.find('\n', at);
      if (next == std::string::npos) next = p.size();
      list += "\n  " + p.substr(at, next - at);
    }
    return make_error("cannot export to ONNX:" + list);
  }
  if (o.twin)
    if (auto t = check_twin(g, *o.twin); !t) return t.error();
  const std::vector<bool> need = needed_nodes(g);
  // Readers of each value: needed nodes, the outputs, and the caller's kept values.
  std::vector<int> uses(g.values().size(), 0);
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (need[k])
      for (Ref in : g.nodes()[k].inputs) ++uses[static_cast<size_t>(in.id)];
  for (Ref r : g.outputs()) ++uses[static_cast<size_t>(r.id)];
  for (int32_t id : o.keep) ++uses.at(static_cast<size_t>(id));
  auto used = [&](int32_t id) { return uses[static_cast<size_t>(id)] > 0; };
  auto single = [&](Ref r) { return uses[static_cast<size_t>(r.id)] == 1; };

  // Ops written together as one ONNX op (Conv with its bias, Gemm, BatchNormalization).
  std::map<size_t, IdiomMatch> idioms;  // by root node
  std::vector<bool> absorbed(g.nodes().size(), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    if (!need[k] || absorbed[k]) continue;
    auto match = match_idiom(g, k, single);
    if (!match) continue;
    bool free = true;
    for (int32_t a : match->absorbed) {
      const auto i = static_cast<size_t>(a);
      free = free && need[i] && !absorbed[i] && !idioms.count(i);
    }
    if (!free) continue;
    for (int32_t a : match->absorbed) absorbed[static_cast<size_t>(a)] = true;
    idioms.emplace(k, std::move(*match));
  }

  // The graph's outputs take their ONNX names from the options where the value is a node's.
  std::vector<std::string> out_names;
  for (size_t i = 0; i < g.outputs().size(); ++i)
    out_names.push_back(i < o.output_names.size()
                            ? o.output_names[i]
                            : (i == 0 ? "output" : "output_" + std::to_string(i + 1)));
  std::map<int32_t, std::string> wanted;  // value id -> output name, first output of a value
  for (size_t i = 0; i < g.outputs().size(); ++i) wanted.emplace(g.outputs()[i].id, out_names[i]);

  ValueNames names;
  for (Ref r : g.inputs()) {
    if (!used(r.id)) continue;
    const Value& v = g.value(r);
    if (auto it = o.bound_inputs.find(v.name); it != o.bound_inputs.end()) {
      names[r.id] = it->second;
      continue;
    }
    const std::string name = m.fresh(v.name.empty() ? "input" : v.name);
    const Shape* other = o.twin ? &o.twin->value(r).type.shape : nullptr;
    m.inputs.push_back({name, v.type.dtype, dims_of(v.type.shape, other, o.batch)});
    names[r.id] = name;
  }
  for (Ref r : g.params()) {
    if (!used(r.id)) continue;
    const Value& v = g.value(r);
    auto it = params.find(v.name);
    if (it == params.end())
      return make_error("cannot export to ONNX: no value for parameter '" + v.name + "'");
    if (it->second.shape != v.type.shape || it->second.dtype != v.type.dtype)
      return make_error("cannot export to ONNX: parameter '" + v.name + "' is " + type_str(v.type) +
                        " in the graph but " + type_str({it->second.dtype, it->second.shape}) +
                        " in the values given");
    names[r.id] = m.add_initializer(v.name, it->second);
  }
  for (size_t i = 0; i < g.values().size(); ++i) {
    const Value& v = g.values()[i];
    if (v.kind != ValueKind::Const || !used(static_cast<int32_t>(i))) continue;
    names[static_cast<int32_t>(i)] =
        m.add_initializer(v.name.empty() ? "const" : v.name, host_copy("", v.constant));
  }

  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!need[k] || absorbed[k]) continue;
    const mls::Node& n = nodes[k];
    const auto idiom = idioms.find(k);
    ExportContext c{
        m, g, n, {}, "", o.batch > 0 || o.twin, o.twin, o.twin ? &o.twin->nodes()[k] : nullptr};
    for (Ref in : idiom == idioms.end() ? n.inputs : idiom->second.inputs)
      c.inputs.push_back(names.at(in.id));
    const Ref out = n.outputs.at(0);
    if (auto w = wanted.find(out.id); w != wanted.end() && m.fresh(w->second) == w->second) {
      c.output = w->second;
    } else {
      // The last op of a labelled group (a document node, a layer) is named after it.
      const bool last = k + 1 == nodes.size() || nodes[k + 1].label != n.label;
      const std::string base =
          n.label.empty() ? n.op->name : (last ? n.label : n.label + "/" + n.op->name);
      c.output = m.fresh(base);
    }
    auto r =
        idiom == idioms.end() ? mapping_for_engine(n.op->name)->to_onnx(c) : idiom->second.write(c);
    if (!r) return make_error("cannot export to ONNX: " + r.error().message);
    names[out.id] = c.output;
  }

  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Ref r = g.outputs()[i];
    std::string name = names.at(r.id);
    if (name != out_names[i]) name = m.add("Identity", {name}, {}, m.fresh(out_names[i]));
    const ValueType& t = g.type_of(r);
    const Shape* other = o.twin ? &o.twin->value(r).type.shape : nullptr;
    m.outputs.push_back({name, t.dtype, dims_of(t.shape, other, o.batch)});
  }
  return names;
}

Result<Model> export_graph(const Graph& g, const std::map<std::string, CheckpointTensor>& params,
                           const GraphExportOptions& o) {
  Model m;
  m.opset = o.opset;
  m.graph_name = o.graph_name.empty() ? g.name() : o.graph_name;
  auto r = append_graph(m, g, params, o);
  if (!r) return r.error();
  return m;
}

}  // namespace mls::onnx
