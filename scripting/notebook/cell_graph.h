// The dependency graph of a notebook's Lua cells: a cell that reads a global depends on the
// cell that defines it. Built from each cell's CellSymbols (cell_analysis.h) in notebook order.
//
//   CellGraph g({{"a", {.writes = {"x"}}}, {"b", {.reads = {"x"}, .writes = {"y"}}}});
//   g.order();            // {"a", "b"}: topological, ties in notebook order
//   g.dependents("a");    // {"b"}: transitively, in topological order
//   g.definer("x");       // "a"
//   g.problems();         // a name defined by two cells, a cycle
//
// A cell in a problem (defines a name another cell defines too, or is on a cycle) is in
// blocked(): the session refuses to run it, with the problem's reason.
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scripting/notebook/cell_analysis.h"

namespace mls::lua {

// Something wrong with the notebook's graph, shown on every cell it names.
struct CellProblem {
  std::vector<std::string> cells;  // the cells involved, notebook order
  std::string reason;              // "'x' is defined by two cells: a and c"
  bool operator==(const CellProblem&) const = default;
};

class CellGraph {
 public:
  CellGraph() = default;
  // The cells in notebook order.
  explicit CellGraph(const std::vector<std::pair<std::string, CellSymbols>>& cells);

  // Every cell, dependencies first, ties in notebook order; the cells on a cycle come last,
  // in notebook order.
  const std::vector<std::string>& order() const { return order_; }
  const std::vector<CellProblem>& problems() const { return problems_; }
  bool blocked(const std::string& id) const { return blocked_.count(id) > 0; }
  bool contains(const std::string& id) const { return index_.count(id) > 0; }
  // The cell that defines `name` ("" : none; of two, the first in notebook order).
  std::string definer(const std::string& name) const;
  // The cells that read `name`, notebook order.
  std::vector<std::string> readers(const std::string& name) const;
  // The cells that depend on `id`, transitively, in topological order (not `id` itself).
  std::vector<std::string> dependents(const std::string& id) const;
  // Of several cells: every cell depending on any of them, and they, in topological order.
  std::vector<std::string> with_dependents(const std::vector<std::string>& ids) const;
  // What `id` needs, transitively, in topological order (not `id` itself).
  std::vector<std::string> dependencies(const std::string& id) const;
  // The cells `id` reads from directly.
  const std::vector<int>& direct_inputs(int cell) const { return in_[static_cast<size_t>(cell)]; }
  int index(const std::string& id) const;  // notebook index; -1: none
  const std::string& id(int cell) const { return ids_[static_cast<size_t>(cell)]; }

 private:
  std::vector<std::string> collect(std::vector<int> start, bool forward, bool include_start) const;

  std::vector<std::string> ids_;
  std::unordered_map<std::string, int> index_;
  std::unordered_map<std::string, int> definer_;
  std::unordered_map<std::string, std::vector<int>> readers_;
  std::vector<std::vector<int>> out_, in_;  // edges definer -> reader, deduplicated
  std::vector<int> topo_pos_;               // a cell's place in order_
  std::vector<std::string> order_;
  std::vector<CellProblem> problems_;
  std::set<std::string> blocked_;
};

}  // namespace mls::lua
