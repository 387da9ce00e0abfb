// Each pass changes what it should (node counts, bytes) and nothing else (the outputs are
// equal before and after on random inputs).
#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "graph_fixtures.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

void require_same_outputs(const Graph& a, const Graph& b, double tol = 1e-6) {
  auto x = outputs_on_random_inputs(a, {.seed = 3}), y = outputs_on_random_inputs(b, {.seed = 3});
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) require_close(y[k], x[k], tol, tol, "output " + std::to_string(k));
}

}  // namespace

TEST_CASE("dead-code elimination drops exactly the unused nodes", "[passes]") {
  Graph g("dce");
  Ref x = g.add_input("x", {DType::F32, {4, 5}});
  Ref y = exp(g, x);
  (void)neg(g, y);                 // dead
  (void)sum(g, exp(g, y), {}, false);  // dead (2 nodes)
  g.set_outputs({relu(g, y)});
  Graph d = eliminate_dead_code(g);
  CHECK(g.nodes().size() == 5);
  CHECK(d.nodes().size() == 2);
  REQUIRE(d.verify().ok());
  require_same_outputs(g, d);
}

TEST_CASE("CSE merges repeated computations, not different ones", "[passes]") {
  Graph g("cse");
  Ref x = g.add_input("x", {DType::F32, {3, 3}});
  Ref a = exp(g, x), b = exp(g, x);         // same
  Ref c = scale(g, x, 2.0), d = scale(g, x, 3.0);  // different attributes
  g.set_outputs({add(g, a, b), add(g, c, d)});
  Graph e = eliminate_common_subexpressions(g);
  CHECK(g.nodes().size() == 6);
  CHECK(e.nodes().size() == 5);
  require_same_outputs(g, e);
}

TEST_CASE("constant folding evaluates constant chains once", "[passes]") {
  Graph g("fold");
  Ref x = g.add_input("x", {DType::F32, {2, 4}});
  Ref k = exp(g, add_scalar(g, fill(g, {DType::F32, {4}}, 0.5), 1.0));  // exp(1.5), constant
  g.set_outputs({mul(g, x, k)});
  auto f = fold_constants(g, host());
  REQUIRE(f.ok());
  CHECK(g.nodes().size() == 4);
  CHECK(f->nodes().size() == 2);  // the fill stays a node (free), the mul reads the folded constant
  Graph d = eliminate_dead_code(*f);
  CHECK(d.nodes().size() == 1);
  require_same_outputs(g, d);
  CHECK(outputs_on_random_inputs(d, {.seed = 3})[0].size() == 8);
}

TEST_CASE("algebraic simplification removes identities", "[passes]") {
  Graph g("alg");
  Ref x = g.add_input("x", {DType::F32, {3, 4}});
  Ref a = scale(g, scale(g, x, 2.0), 0.25);          // -> scale(x, 0.5)
  Ref b = neg(g, neg(g, exp(g, x)));                   // -> exp(x)
  Ref c = mul(g, a, fill(g, {DType::F32, {4}}, 1.0));  // -> a
  Ref d = g.emit1("reshape", {g.emit1("reshape", {b}, {{"shape", Shape{12}}})}, {{"shape", Shape{4, 3}}});
  g.set_outputs({c, d});
  Graph s = eliminate_dead_code(simplify_algebra(g));
  REQUIRE(s.verify().ok());
  CHECK(g.nodes().size() == 9);
  CHECK(s.nodes().size() == 3);  // scale, exp, one reshape
  require_same_outputs(g, s);
}

TEST_CASE("the default pipeline on an MLP training step: fewer nodes, same loss and gradients", "[passes]") {
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {16, 12}});
  Ref y = g.add_input("y", {DType::I64, {16}});
  Ref w1 = g.add_param("w1", {DType::F32, {12, 8}});
  Ref b1 = g.add_param("b1", {DType::F32, {8}});
  Ref w2 = g.add_param("w2", {DType::F32, {8, 3}});
  Ref loss = cross_entropy(g, linear(g, relu(g, linear(g, x, w1, b1)), w2, Ref{}), y, 0.1);
  auto grads = append_backward(g, loss, g.params());
  REQUIRE(grads.ok());
  Refs outs{loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  auto stages = run_passes(g, host(), default_passes());
  REQUIRE(stages.ok());
  const Graph& opt = stages->back().graph;
  INFO(opt.to_text());
  CHECK(opt.nodes().size() < g.nodes().size());
  CHECK(opt.params().size() == 3);
  require_same_outputs(g, opt, 1e-5);
  auto before = CompiledPlan::compile(g, host());
  auto after = CompiledPlan::compile(opt, host());
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  CHECK(after->stats().arena_bytes <= before->stats().arena_bytes);
}
