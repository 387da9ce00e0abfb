#include <optional>

#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

// The value of a fill node in the new graph, if `r` is one.
std::optional<double> fill_value(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  if (v.kind != ValueKind::Node) return std::nullopt;
  const Node& n = g.nodes()[static_cast<size_t>(v.node)];
  if (n.op->name != "fill") return std::nullopt;
  return n.attrs.get_float("value");
}

const Node* producer(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  return v.kind == ValueKind::Node ? &g.nodes()[static_cast<size_t>(v.node)] : nullptr;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

Graph simplify_algebra(const Graph& g) {
  Rewriter rw(g);
  const Graph& out = rw.graph();
  for (const Node& n : g.nodes()) {
    if (n.outputs.size() != 1 || n.op->kind != OpKind::Compute) {
      rw.copy(n);
      continue;
    }
    const std::string& op = n.op->name;
    Refs in;
    for (Ref r : n.inputs) in.push_back(rw.map(r));
    const Shape out_shape = g.type_of(n.outputs[0]).shape;
    Ref result;
    auto same_shape = [&](Ref r) { return out.shape_of(r) == out_shape; };
    if ((op == "scale" && n.attrs.get_float("alpha") == 1.0) ||
        (op == "add_scalar" && n.attrs.get_float("value") == 0.0) ||
        ((op == "reshape" || op == "expand") && same_shape(in[0])) ||
        (op == "transpose" && is_identity_perm(n.attrs.get_ints("perm")))) {
      result = in[0];
    } else if (op == "neg" && producer(out, in[0]) && producer(out, in[0])->op->name == "neg") {
      result = producer(out, in[0])->inputs[0];
    } else if (op == "scale" && producer(out, in[0]) && producer(out, in[0])->op->name == "scale") {
      const Node* p = producer(out, in[0]);
      result = rw.emit(n, "scale", Refs{p->inputs[0]}, Attrs{{"alpha", p->attrs.get_float("alpha") * n.attrs.get_float("alpha")}})[0];
    } else if (op == "reshape" && producer(out, in[0]) && producer(out, in[0])->op->name == "reshape") {
      result = rw.emit(n, "reshape", Refs{producer(out, in[0])->inputs[0]}, n.attrs)[0];
    } else if (op == "mul" || op == "add" || op == "sub") {
      // x * 1, 1 * x, x + 0, 0 + x, x - 0 where broadcasting does not change x's shape.
      double unit = op == "mul" ? 1.0 : 0.0;
      auto a = fill_value(out, in[1]), b = fill_value(out, in[0]);
      if (a && *a == unit && same_shape(in[0])) result = in[0];
      else if (op != "sub" && b && *b == unit && same_shape(in[1])) result = in[1];
    }
    if (result.valid()) rw.replace(n.outputs[0], result);
    else rw.copy(n);
  }
  return rw.finish();
}

}  // namespace mls
