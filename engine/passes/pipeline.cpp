#include "engine/passes/passes.h"

namespace mls {

std::vector<NamedPass> default_passes() {
  auto wrap = [](Graph (*f)(const Graph&)) {
    return [f](const Graph& g, Backend&) -> Result<Graph> { return f(g); };
  };
  return {{"dead-code elimination", wrap(eliminate_dead_code)},
          {"algebraic simplification", wrap(simplify_algebra)},
          {"constant folding", [](const Graph& g, Backend& b) { return fold_constants(g, b); }},
          {"common-subexpression elimination", wrap(eliminate_common_subexpressions)},
          {"bias + activation fusion",
           [](const Graph& g, Backend& b) -> Result<Graph> { return fuse_linear_activation(g, FusionSupport::of(b)); }},
          {"elementwise fusion",
           [](const Graph& g, Backend& b) -> Result<Graph> { return fuse_elementwise(g, FusionSupport::of(b)); }},
          {"dead-code elimination", wrap(eliminate_dead_code)}};
}

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
