// fuse_attention: scaled_dot_product_attention's composite (engine/ops/attention.h) becomes
// one "attention" node, on a forward graph before autodiff, so that the backward is the
// fused op's own (attention_backward) rather than the composite's, which keeps the [Tq, Tk]
// probabilities alive from forward to backward.
//
// The pattern, each intermediate read once and by nothing else:
//   matmul(softmax(scale(matmul(q, k, transpose_b)) [+ scale(causal_mask, -1e9)], -1), v)
// The mask is recognised by building causal_mask(tq, tk) again and comparing the two
// computations node by node: what the composite emits is the definition of what matches.
// A backend without the fused op's kernels keeps the composite (FusionSupport::attention).
#include <optional>

#include "engine/ops/attention.h"
#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

struct AttentionMatch {
  int32_t scores = -1, scaled = -1, masked = -1, softmax = -1;  // nodes the fused one replaces
  Ref q, k, v;
  double scale = 1.0;
  bool causal = false;
};

const Node* producer(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  return v.kind == ValueKind::Node ? &g.nodes()[static_cast<size_t>(v.node)] : nullptr;
}

int32_t node_of(const Graph& g, Ref r) {
  return g.value(r).node;
}

// Whether `a` in graph ga and `b` in gb are the same computation of no inputs: the same ops
// with the same attributes on the same operands, all the way down.
bool same_computation(const Graph& ga, Ref a, const Graph& gb, Ref b) {
  const Node* na = producer(ga, a);
  const Node* nb = producer(gb, b);
  if (!na || !nb) return false;
  if (na->op != nb->op || !(na->attrs == nb->attrs) || na->inputs.size() != nb->inputs.size() ||
      ga.value(a).output_index != gb.value(b).output_index || !(ga.type_of(a) == gb.type_of(b)))
    return false;
  for (size_t i = 0; i < na->inputs.size(); ++i)
    if (!same_computation(ga, na->inputs[i], gb, nb->inputs[i])) return false;
  return true;
}

bool is_causal_mask(const Graph& g, Ref m, int64_t tq, int64_t tk) {
  Graph t("causal_mask");
  return same_computation(g, m, t, causal_mask(t, tq, tk));
}

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), readers_(g.values().size(), 0) {
    for (const Node& n : g.nodes())
      for (Ref r : n.inputs) ++readers_[static_cast<size_t>(r.id)];
    for (Ref r : g.outputs()) readers_[static_cast<size_t>(r.id)] += 2;  // an output escapes
  }

  // The node's op and the only reader of its output 0 is the one that asks.
  const Node* single_use(Ref r, const char* op) const {
    const Node* n = producer(g_, r);
    if (!n || n->op->name != op || readers_[static_cast<size_t>(r.id)] != 1 ||
        n->outputs.size() != 1)
      return nullptr;
    return n;
  }

  std::optional<AttentionMatch> at(const Node& out) const {
    if (out.op->name != "matmul" || out.attrs.get_int_or("transpose_a", 0) ||
        out.attrs.get_int_or("transpose_b", 0))
      return std::nullopt;
    AttentionMatch m;
    const Node* sm = single_use(out.inputs[0], "softmax");
    if (!sm) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(g_.type_of(sm->inputs[0]).shape.size());
    const int64_t axis = sm->attrs.get_int("axis");
    if (rank != 3 || (axis != -1 && axis != rank - 1)) return std::nullopt;
    m.softmax = node_of(g_, out.inputs[0]);
    Ref scores = sm->inputs[0];
    if (const Node* add = single_use(scores, "add")) {
      const Node* ms = producer(g_, add->inputs[1]);
      if (!ms || ms->op->name != "scale" || ms->attrs.get_float("alpha") != -1e9)
        return std::nullopt;
      m.masked = node_of(g_, scores);
      m.causal = true;
      scores = add->inputs[0];
      const Shape s = g_.type_of(scores).shape;
      if (!is_causal_mask(g_, ms->inputs[0], s[1], s[2])) return std::nullopt;
    }
    const Node* sc = single_use(scores, "scale");
    if (!sc) return std::nullopt;
    m.scaled = node_of(g_, scores);
    m.scale = sc->attrs.get_float("alpha");
    const Node* qk = single_use(sc->inputs[0], "matmul");
    if (!qk || qk->attrs.get_int_or("transpose_a", 0) || !qk->attrs.get_int_or("transpose_b", 0))
      return std::nullopt;
    m.scores = node_of(g_, sc->inputs[0]);
    m.q = qk->inputs[0];
    m.k = qk->inputs[1];
    m.v = out.inputs[1];
    // The fused op's own shape rule (rank 3, f32, one batch and feature size): what it
    // refuses stays a composite.
    const OpDef* def = op_registry().find("attention");
    const std::vector<ValueType> in{g_.type_of(m.q), g_.type_of(m.k), g_.type_of(m.v)};
    if (!def || !def->infer(in, {{"causal", int64_t{m.causal}}, {"scale", m.scale}}))
      return std::nullopt;
    return m;
  }

 private:
  const Graph& g_;
  std::vector<int32_t> readers_;
};

}  // namespace

Graph fuse_attention(const Graph& g, const FusionSupport& s) {
  if (!s.attention) return g;
  Matcher matcher(g);
  std::vector<std::optional<AttentionMatch>> at(g.nodes().size());
  std::vector<bool> skip(g.nodes().size(), false);
  bool any = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    at[i] = matcher.at(g.nodes()[i]);
    if (!at[i]) continue;
    any = true;
    for (int32_t n : {at[i]->scores, at[i]->scaled, at[i]->masked, at[i]->softmax})
      if (n >= 0) skip[static_cast<size_t>(n)] = true;
  }
  if (!any) return g;
  Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (skip[i]) continue;
    if (!at[i]) {
      rw.copy(n);
      continue;
    }
    const AttentionMatch& m = *at[i];
    Refs r = rw.emit(n, "attention", {rw.map(m.q), rw.map(m.k), rw.map(m.v)},
                     {{"causal", int64_t{m.causal}}, {"scale", m.scale}});
    rw.replace(n.outputs[0], r[0]);
  }
  return rw.finish();
}

}  // namespace mls
