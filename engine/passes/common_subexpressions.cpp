#include <map>
#include <tuple>

#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

Graph eliminate_common_subexpressions(const Graph& g) {
  Rewriter rw(g);
  // (op, attributes, inputs in the new graph) -> the first node's outputs.
  std::map<std::tuple<std::string, std::string, std::vector<int32_t>>, Refs> seen;
  for (const Node& n : g.nodes()) {
    std::vector<int32_t> ins;
    for (Ref r : n.inputs) ins.push_back(rw.map(r).id);
    auto key = std::make_tuple(n.op->name, n.attrs.to_string(), ins);
    auto it = seen.find(key);
    if (n.op->kind != OpKind::Update && it != seen.end()) {
      for (size_t k = 0; k < n.outputs.size(); ++k) rw.replace(n.outputs[k], it->second[k]);
      continue;
    }
    Refs outs = rw.copy(n);
    if (n.op->kind != OpKind::Update) seen.emplace(std::move(key), outs);
  }
  return rw.finish();
}

}  // namespace mls
