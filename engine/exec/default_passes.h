// The default pass pipeline, and constant folding, the pass in it that runs kernels (an
// EagerSession on the backend): they sit in exec, above the graph rewrites of engine/passes,
// because they execute.
//
//   Result<std::vector<PassRecord>> stages = run_passes(g, cpu, default_passes());
//   const Graph& optimised = stages->back().graph;
//   for (auto& s : *stages) std::cout << s.name << ": " << s.graph.nodes().size() << "\n";
#pragma once

#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/ir/graph.h"
#include "engine/passes/passes.h"

namespace mls {

// Evaluates nodes whose inputs are all constants (a fill counts) and whose result is small,
// replacing them by constants.
Result<Graph> fold_constants(const Graph& g, Backend& backend);

// verify -> dce -> simplify -> fold -> cse -> bias/activation fusion -> elementwise fusion -> dce
std::vector<NamedPass> default_passes();

}  // namespace mls
