#include "engine/passes/passes.h"

namespace mls {

Result<std::vector<PassRecord>> run_passes(const Graph& g, Backend& backend, const std::vector<NamedPass>& passes) {
  if (auto v = g.verify(); !v) return make_error("before the passes: " + v.error().message);
  std::vector<PassRecord> out;
  out.push_back({"input", g});
  for (const NamedPass& p : passes) {
    auto next = p.run(out.back().graph, backend);
    if (!next) return make_error(p.name + ": " + next.error().message);
    if (auto v = next->verify(); !v) return make_error("after " + p.name + ": " + v.error().message);
    out.push_back({p.name, std::move(*next)});
  }
  return out;
}

}  // namespace mls
