// The notebook's dependency graph (scripting/notebook/cell_graph.h).
#include <catch2/catch.hpp>

#include "scripting/notebook/cell_graph.h"

using namespace mls::lua;
using Ids = std::vector<std::string>;

namespace {
std::pair<std::string, CellSymbols> cell(std::string id, std::set<std::string> reads,
                                         std::set<std::string> writes) {
  return {std::move(id), CellSymbols{std::move(reads), std::move(writes), false}};
}
}  // namespace

TEST_CASE("Cell graph: topological order with ties in notebook order", "[notebook]") {
  // d reads y (from b), b reads x (from c): c before b before d; a and e are free.
  CellGraph g({cell("a", {}, {"p"}), cell("b", {"x"}, {"y"}), cell("c", {}, {"x"}),
               cell("d", {"y", "p"}, {}), cell("e", {"mls"}, {"q"})});
  CHECK(g.problems().empty());
  CHECK(g.order() == Ids{"a", "c", "b", "d", "e"});
  CHECK(g.definer("x") == "c");
  CHECK(g.definer("mls") == "");
  CHECK(g.readers("p") == Ids{"d"});
  CHECK(g.dependents("c") == Ids{"b", "d"});
  CHECK(g.dependents("a") == Ids{"d"});
  CHECK(g.dependents("d").empty());
  CHECK(g.dependencies("d") == Ids{"a", "c", "b"});
  CHECK(g.with_dependents({"b", "a"}) == Ids{"a", "b", "d"});
}

TEST_CASE("Cell graph: a name defined by two cells is a problem naming both", "[notebook]") {
  CellGraph g({cell("a", {}, {"x"}), cell("b", {"x"}, {}), cell("c", {}, {"x", "z"})});
  REQUIRE(g.problems().size() == 1);
  CHECK(g.problems()[0].cells == Ids{"a", "c"});
  CHECK(g.problems()[0].reason.find("'x' is defined by 2 cells: a and c") == 0);
  CHECK(g.blocked("a"));
  CHECK(g.blocked("c"));
  CHECK_FALSE(g.blocked("b"));
  CHECK(g.definer("x") == "a");
}

TEST_CASE("Cell graph: a cycle is a problem naming its cells in order", "[notebook]") {
  // a -> c -> b -> a (b reads z from c, a reads y from b, c reads x from a); d hangs below.
  CellGraph g({cell("a", {"y"}, {"x"}), cell("b", {"z"}, {"y"}), cell("c", {"x"}, {"z"}),
               cell("d", {"x"}, {}), cell("e", {}, {"w"})});
  REQUIRE(g.problems().size() == 1);
  const CellProblem& p = g.problems()[0];
  CHECK(p.cells == Ids{"a", "b", "c"});
  CHECK(p.reason.find("cells a -> c -> b -> a form a cycle") == 0);
  CHECK(p.reason.find("c reads 'x' from a") != std::string::npos);
  CHECK(g.blocked("a"));
  CHECK(g.blocked("b"));
  CHECK(g.blocked("c"));
  // d depends on the cycle: it is ordered after it and blocked too, without a problem of its own.
  CHECK(g.order() == Ids{"e", "a", "b", "c", "d"});
}
