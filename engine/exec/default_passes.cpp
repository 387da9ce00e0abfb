#include "engine/exec/default_passes.h"

namespace mls {

std::vector<NamedPass> default_passes() {
  auto wrap = [](Graph (*f)(const Graph&)) {
    return [f](const Graph& g, Backend&) -> Result<Graph> { return f(g); };
  };
  return {{"dead-code elimination", wrap(eliminate_dead_code)},
          {"algebraic simplification", wrap(simplify_algebra)},
          {"constant folding", [](const Graph& g, Backend& b) { return fold_constants(g, b); }},
          {"common-subexpression elimination", wrap(eliminate_common_subexpressions)},
          {"pool-gradient fusion",
           [](const Graph& g, Backend& b) -> Result<Graph> {
             return fuse_pool_gradients(g, FusionSupport::of(b));
           }},
          {"bias + activation fusion",
           [](const Graph& g, Backend& b) -> Result<Graph> {
             return fuse_linear_activation(g, FusionSupport::of(b));
           }},
          {"elementwise fusion",
           [](const Graph& g, Backend& b) -> Result<Graph> {
             return fuse_elementwise(g, FusionSupport::of(b));
           }},
          {"dead-code elimination", wrap(eliminate_dead_code)}};
}

}  // namespace mls
