// Rewriter: copies a Graph into a new one node by node, so a pass can drop, replace or
// keep each node. Inputs, parameters and constants keep their order and names, so a plan
// compiled from the result binds exactly like one compiled from the source.
//
//   Rewriter rw(src);
//   for (const Node& n : src.nodes())
//     if (keep(n)) rw.copy(n); else rw.replace(n.outputs[0], rw.map(n.inputs[0]));
//   Graph out = rw.finish();
#pragma once

#include <vector>

#include "engine/ir/graph.h"

namespace mls {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src);
  // The new graph's value for a source value (asserts it has one).
  Ref map(Ref old) const;
  bool mapped(Ref old) const { return map_[static_cast<size_t>(old.id)].valid(); }
  // From now on, uses of `old` read `now` (a value of the new graph).
  void replace(Ref old, Ref now) { map_[static_cast<size_t>(old.id)] = now; }
  // Copies a node with its inputs mapped; its outputs map to the copies.
  Refs copy(const Node& n);
  // Emits a new node in the new graph, labelled like `like`.
  Refs emit(const Node& like, std::string_view op, const Refs& inputs, const Attrs& attrs);
  Graph& graph() { return out_; }
  const Graph& source() const { return src_; }
  // Maps the outputs and returns the new graph.
  Graph finish();

 private:
  const Graph& src_;
  Graph out_;
  std::vector<Ref> map_;
};

}  // namespace mls
