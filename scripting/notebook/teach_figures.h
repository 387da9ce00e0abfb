// The teaching figures behind mls.teach (teach_lib.cpp), as SVG: an engine Graph drawn top
// to bottom with each node coloured by what it is (forward, backward, made by a pass, run on
// the device or on the CPU), the eager op sequence beside the traced graph, the compiler's
// passes as node counts and a before/after, and memory by category as bars. No Lua and no
// Qt: the same figures in the GUI, the HTML export and `notebook run --figures`.
//
//   std::vector<teach::EagerOp> ops = {{"mul", "[2,3]"}, {"add", "[2,3]"}};
//   Figure f = teach::eager_vs_traced_figure(ops, traced_graph, 2, 0.0);
//   Figure p = teach::passes_figure(counts);            // "input 41 nodes -> ... 26 nodes"
//   Figure m = teach::memory_figure({{"checkpointing off", cats}});
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/ir/graph.h"
#include "scripting/notebook/cell_output.h"

namespace mls::lua::teach {

// A node's colours in a drawn graph, and what the legend calls it.
struct NodeStyle {
  std::string fill, stroke;
};

// A graph drawn into an SVG group of `width` pixels: sources (inputs, parameters) as small
// grey tags one row above their first user, each node a box (op, label, output shape) one row
// below the lowest of its producers, a curve per edge. Constants are not drawn.
struct GraphDrawing {
  std::string svg;  // elements only, placed from (0, 0): wrap it in <g transform=...>
  double height = 0;
};
// `numbered`: each box carries its node's place in the graph (1, 2, ...) at its left.
GraphDrawing draw_graph(const Graph& g, double width,
                        const std::function<NodeStyle(size_t node)>& style, bool numbered = false);

// The colours the figures use (one home, so the legends match the boxes).
NodeStyle forward_style();
NodeStyle backward_style();
NodeStyle fused_style();     // a node a pass made (a fused kernel)
NodeStyle device_style();    // runs on the device
NodeStyle fallback_style();  // runs on the CPU: the device has no kernel for it
NodeStyle placed_style();    // runs on the CPU: the project places it there

// One op of an eager run, in the order it ran.
struct EagerOp {
  std::string op;
  std::string shape;  // its first output's shape, "[2,3]"
};

// Left: the eager ops one row each; right: the traced graph. `optimized_nodes`: the graph's
// node count after the compiler's passes; `max_abs_diff`: between the two results.
Figure eager_vs_traced_figure(const std::vector<EagerOp>& ops, const Graph& traced,
                              size_t optimized_nodes, double max_abs_diff);

// One stage of the pass pipeline: its name and the graph's node count after it.
struct PassCount {
  std::string name;
  size_t nodes = 0;
};
// The pipeline as one bar per stage ("input" first), the passes that changed the graph
// marked with the change.
Figure passes_figure(const std::vector<PassCount>& stages, const std::string& title);
// The step before any pass and after the last, side by side; nodes whose op the first has
// not (kernels the passes made) coloured as fused.
Figure before_after_figure(const Graph& before, const Graph& after, const std::string& title);

// Where each node runs: kind 0 the device, 1 a CPU fallback, 2 placed on the CPU; -1 not
// scheduled (dead code, drawn grey). `transfers`: what the copies cost ("" for none).
Figure placement_figure(const Graph& g, const std::vector<int>& where, const std::string& device,
                        const std::string& title, const std::string& transfers = "");

// Memory of one configuration by category (bytes), in the order given.
struct MemoryColumn {
  std::string name;  // "checkpointing off"
  std::vector<std::pair<std::string, int64_t>> categories;
  int64_t total = 0;
};
// One group of bars per category, one bar per column; each bar labelled with its size.
Figure memory_figure(const std::vector<MemoryColumn>& columns, const std::string& title);

// "1.2 MiB", "940.0 KiB", "512 B".
std::string bytes_label(int64_t bytes);
// "[128,256]" ("[]" for a scalar).
std::string shape_label(const Shape& s);

}  // namespace mls::lua::teach
