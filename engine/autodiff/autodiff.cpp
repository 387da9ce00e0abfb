#include "engine/autodiff/autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include "engine/ir/graph.h"

namespace mls {

Refs backprop(Emitter& e, std::span<const TapeEntry> tape, Ref loss, std::span<const Ref> wrt,
              Ref seed) {
  // Which values depend on a wrt value (forward sweep).
  std::unordered_set<int32_t> needs;
  for (Ref w : wrt) needs.insert(w.id);
  for (const TapeEntry& t : tape) {
    if (t.op->kind != OpKind::Compute) continue;
    bool any = false;
    for (Ref r : t.inputs) any = any || needs.count(r.id);
    if (any)
      for (Ref r : t.outputs) needs.insert(r.id);
  }
  std::unordered_map<int32_t, Ref> grads;
  if (!needs.count(loss.id)) return Refs(wrt.size());
  grads[loss.id] = seed.valid() ? seed : fill(e, e.type_of(loss), 1.0);

  for (size_t k = tape.size(); k-- > 0;) {
    const TapeEntry& t = tape[k];
    if (t.op->kind != OpKind::Compute) continue;
    Refs gouts(t.outputs.size());
    bool any_out = false;
    for (size_t i = 0; i < t.outputs.size(); ++i) {
      auto it = grads.find(t.outputs[i].id);
      if (it != grads.end()) {
        gouts[i] = it->second;
        any_out = true;
      }
    }
    uint64_t mask = 0;
    for (size_t i = 0; i < t.inputs.size(); ++i)
      if (needs.count(t.inputs[i].id)) mask |= uint64_t{1} << i;
    if (!any_out || mask == 0) continue;
    e.set_scope(t.label);
    GradContext ctx{e, t.inputs, t.outputs, gouts, t.attrs, mask};
    Refs gin = t.op->vjp(ctx);
    MLS_CHECK(gin.size() == t.inputs.size(), "a vjp rule returned the wrong number of gradients");
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      if (!((mask >> i) & 1) || !gin[i].valid()) continue;
      Ref& slot = grads[t.inputs[i].id];
      slot = accumulate(e, slot, gin[i]);
    }
  }
  Refs out;
  for (Ref w : wrt) {
    auto it = grads.find(w.id);
    out.push_back(it == grads.end() ? Ref{} : it->second);
  }
  return out;
}

Refs forward_tangents(Emitter& e, std::span<const TapeEntry> tape, std::span<const Ref> primals,
                      std::span<const Ref> tangents, std::span<const Ref> outputs) {
  std::unordered_map<int32_t, Ref> tan;
  for (size_t i = 0; i < primals.size(); ++i) tan[primals[i].id] = tangents[i];
  for (const TapeEntry& t : tape) {
    if (t.op->kind != OpKind::Compute) continue;
    Refs tin(t.inputs.size());
    bool any = false;
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      auto it = tan.find(t.inputs[i].id);
      if (it != tan.end()) {
        tin[i] = it->second;
        any = true;
      }
    }
    if (!any) continue;
    e.set_scope(t.label);
    Refs tout = t.op->jvp(JvpContext{e, t.inputs, t.outputs, tin, t.attrs});
    for (size_t i = 0; i < t.outputs.size(); ++i)
      if (tout[i].valid()) tan[t.outputs[i].id] = tout[i];
  }
  Refs out;
  for (Ref o : outputs) {
    auto it = tan.find(o.id);
    out.push_back(it == tan.end() ? Ref{} : it->second);
  }
  return out;
}

std::vector<TapeEntry> tape_of(const Graph& g) {
  std::vector<TapeEntry> tape;
  tape.reserve(g.nodes().size());
  for (const Node& n : g.nodes()) tape.push_back({n.op, n.attrs, n.inputs, n.outputs, n.label});
  return tape;
}

Result<Refs> append_backward(Graph& g, Ref loss, std::span<const Ref> wrt) {
  if (!loss.valid() || !g.type_of(loss).shape.empty())
    return make_error("graph '" + g.name() + "': the loss must be a scalar, got " +
                      (loss.valid() ? type_str(g.type_of(loss)) : std::string("no value")));
  std::vector<TapeEntry> tape = tape_of(g);
  std::string saved = g.label();
  g.set_backward_mode(true);
  Refs grads = backprop(g, tape, loss, wrt);
  g.set_scope("");
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].valid()) grads[i] = fill(g, g.type_of(wrt[i]), 0.0);
  g.set_backward_mode(false);
  g.set_label(saved);
  return grads;
}

Refs append_jvp(Graph& g, std::span<const Ref> primals, std::span<const Ref> tangents,
                std::span<const Ref> outputs) {
  std::vector<TapeEntry> tape = tape_of(g);
  std::string saved = g.label();
  Refs t = forward_tangents(g, tape, primals, tangents, outputs);
  g.set_label(saved);
  return t;
}

}  // namespace mls
