// Graph -> Graph passes. Each returns a new graph with the same inputs, parameters
// (same order) and outputs, computing the same values; the verifier runs after each.
//
//   Result<std::vector<PassRecord>> stages = run_passes(g, cpu, default_passes());
//   const Graph& optimised = stages->back().graph;
//   for (auto& s : *stages) std::cout << s.name << ": " << s.graph.nodes().size() << "\n";
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/ir/graph.h"

namespace mls {

// Drops nodes that no output needs.
Graph eliminate_dead_code(const Graph& g);
// Merges nodes that apply the same op with the same attributes to the same inputs.
Graph eliminate_common_subexpressions(const Graph& g);
// Evaluates nodes whose inputs are all constants (a fill counts) and whose result is small,
// replacing them by constants.
Result<Graph> fold_constants(const Graph& g, Backend& backend);
// Rewrites identities: x*1, x+0, scale(x,1), scale(scale(x,a),b), neg(neg(x)),
// reshape(reshape(x)), same-shape reshape/expand, identity transposes.
Graph simplify_algebra(const Graph& g);

struct PassRecord {
  std::string name;
  Graph graph;
};
using Pass = std::function<Result<Graph>(const Graph&, Backend&)>;
struct NamedPass {
  std::string name;
  Pass run;
};
// verify -> dce -> simplify -> fold -> cse -> dce
std::vector<NamedPass> default_passes();
// The input graph first (as "input"), then the graph after each pass.
Result<std::vector<PassRecord>> run_passes(const Graph& g, Backend& backend, const std::vector<NamedPass>& passes);

}  // namespace mls
