// One layered, top-to-bottom layout of an IR graph, shared by the editor's step-through view
// (editor/step_view.cpp) and the teaching figures (teach_figures.cpp: draw_graph). No Qt:
// positions are doubles in the caller's units.
//
// A node's rank is one below the lowest of the nodes it reads (from 1); an input or parameter
// a drawn node reads is a source one rank above its first user. Rows are ordered top down by
// the mean x of what feeds each entry (one sweep keeps chains straight and crossings few).
//
//   IrRanks r = rank_ir(g, {.forward_only = true, .backward_below = true});
//   place_ir_rows(g, r, 0, [&](size_t k, size_t count) { return x_of(k, count); });
//   r.node_x[i], r.node_rank[i];  r.value_x[v], r.source_rank[v]
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "engine/ir/graph.h"

namespace mls::lua {

struct IrLayoutOptions {
  bool forward_only = false;      // backward nodes are left out
  bool backward_below = false;    // a backward node starts below the forward drawn before it
  bool order_by_sources = false;  // the columns of the sources a node reads count in its place
};

struct IrRanks {
  struct Entry {
    bool node;     // a node, else a source value
    size_t index;  // the node's or the value's index
  };
  std::vector<bool> drawn;               // per node
  std::vector<int> node_rank;            // per node (0 when not drawn)
  std::vector<int> source_rank;          // per value: the source's rank, -1 when not drawn
  std::vector<std::vector<Entry>> rows;  // per rank: sources first, then nodes, in graph order
  std::vector<double> node_x, value_x;   // per node / value: set by place_ir_rows
  size_t widest() const;                 // the most entries in one row (at least 1)
};

IrRanks rank_ir(const Graph& g, const IrLayoutOptions& options);

// Orders each row, top down, by the mean x of what feeds each entry (a source, and a node with
// nothing placed above it, sit at `middle`; ties keep graph order) and gives the k-th of a row
// of `count` entries the x `column_x(k, count)`. `options` as given to rank_ir.
void place_ir_rows(const Graph& g, IrRanks& r, const IrLayoutOptions& options, double middle,
                   const std::function<double(size_t k, size_t count)>& column_x);

}  // namespace mls::lua
