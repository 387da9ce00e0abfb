// The fused attention op against scaled_dot_product_attention's composite: values and
// gradients at sizes that cross the kernel's key and query tiles (64 and 32), the fusion
// pass (what it rewrites and what it leaves), and a few training steps of a tiny model with
// multi-head attention through build_step (fused on the CPU) beside the composite.
#include <string>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/ir/graph.h"
#include "engine/ops/attention.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"
#include "engine/train/step_graph.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

using Vec = std::vector<double>;

int count_ops(const Graph& g, std::string_view op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op->name == op;
  return n;
}

RefArray draw(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  OpSample range;
  range.lo = lo;
  range.hi = hi;
  return random_array({DType::F32, s}, rng, range);
}

struct Shapes {
  int64_t b, tq, tk, d, dv;
  bool causal;
};

std::string describe(const Shapes& s) {
  return "B " + std::to_string(s.b) + ", Tq " + std::to_string(s.tq) + ", Tk " +
         std::to_string(s.tk) + ", d " + std::to_string(s.d) + ", dv " + std::to_string(s.dv) +
         (s.causal ? ", causal" : "");
}

// o and the gradients of sum(o * w) for q, k, v, from the composite graph or the fused one.
struct Run {
  Vec o, dq, dk, dv;
};

Run run_attention(const Shapes& s, bool fused, const std::vector<RefArray>& in) {
  Graph g("attention");
  Ref q = g.add_input("q", {DType::F32, {s.b, s.tq, s.d}});
  Ref k = g.add_input("k", {DType::F32, {s.b, s.tk, s.d}});
  Ref v = g.add_input("v", {DType::F32, {s.b, s.tk, s.dv}});
  Ref w = g.add_input("w", {DType::F32, {s.b, s.tq, s.dv}});
  Ref o = scaled_dot_product_attention(g, q, k, v, s.causal);
  g.set_outputs({sum(g, mul(g, o, w), {}, false), o});
  if (fused) {
    g = fuse_attention(g);
    REQUIRE(count_ops(g, "attention") == 1);
    REQUIRE(count_ops(g, "softmax") == 0);
  }
  Ref loss = g.outputs()[0];
  o = g.outputs()[1];
  const Refs inputs = g.inputs();
  auto grads = append_backward(g, loss, std::span<const Ref>(inputs.data(), 3));
  REQUIRE(grads.ok());
  g.set_outputs({o, (*grads)[0], (*grads)[1], (*grads)[2]});
  if (fused) REQUIRE(count_ops(g, "attention_backward") == 1);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  for (size_t i = 0; i < 4; ++i) REQUIRE(plan->bind(inputs[i], to_tensor(in[i], DType::F32)).ok());
  plan->run();
  return {plan->tensor(o).to_f64(), plan->tensor((*grads)[0]).to_f64(),
          plan->tensor((*grads)[1]).to_f64(), plan->tensor((*grads)[2]).to_f64()};
}

}  // namespace

TEST_CASE("fused attention matches the composite and a float64 reference across tiles",
          "[attention][fused]") {
  const Shapes cases[] = {
      {3, 70, 70, 20, 20, true},   // queries and keys past one tile, d not a multiple of 16
      {2, 33, 130, 17, 9, false},  // Tq < Tk, three key tiles, dv != d
      {2, 130, 45, 8, 12, true},   // Tq > Tk: queries past the last key see all keys
      {1, 1, 1, 5, 3, true},       // one query, one key
      {4, 16, 16, 64, 64, false},  // the transformer example's sizes
  };
  const OpDef* op = op_registry().find("attention");
  REQUIRE(op != nullptr);
  uint64_t seed = 1;
  for (const Shapes& s : cases) {
    INFO(describe(s));
    std::vector<RefArray> in{draw({s.b, s.tq, s.d}, seed++, -2, 2),
                             draw({s.b, s.tk, s.d}, seed++, -2, 2), draw({s.b, s.tk, s.dv}, seed++),
                             draw({s.b, s.tq, s.dv}, seed++)};
    const Run composite = run_attention(s, false, in);
    const Run fused = run_attention(s, true, in);
    const double alpha = 1.0 / std::sqrt(static_cast<double>(s.d));
    const auto want = op->reference(std::span<const RefArray>(in.data(), 3),
                                    {{"causal", int64_t{s.causal}}, {"scale", alpha}});
    require_close(fused.o, want[0].v, 1e-5, 1e-6, "o against float64");
    require_close(fused.o, composite.o, 1e-5, 1e-6, "o against the composite");
    require_close(fused.dq, composite.dq, 1e-5, 1e-5, "dq");
    require_close(fused.dk, composite.dk, 1e-5, 1e-5, "dk");
    require_close(fused.dv, composite.dv, 1e-5, 1e-5, "dv");
    if (s.causal)  // query 0 sees key 0 alone: its output is v's row 0
      for (int64_t x = 0; x < s.dv; ++x)
        CHECK(fused.o[static_cast<size_t>(x)] == Approx(in[2].v[static_cast<size_t>(x)]));
  }
}

TEST_CASE(
    "the attention fusion pass rewrites only the composite whose intermediates nobody else reads",
    "[attention][fused]") {
  auto build = [](bool causal, bool probabilities_out) {
    Graph g("attention");
    Ref q = g.add_input("q", {DType::F32, {2, 5, 4}});
    Ref k = g.add_input("k", {DType::F32, {2, 6, 4}});
    Ref v = g.add_input("v", {DType::F32, {2, 6, 3}});
    Ref o = scaled_dot_product_attention(g, q, k, v, causal);
    Refs outs{o};
    if (probabilities_out) {  // the weights as a second output (a view of them, say)
      const Node& last = g.nodes()[static_cast<size_t>(g.value(o).node)];
      outs.push_back(last.inputs[0]);
    }
    g.set_outputs(outs);
    return g;
  };
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Graph fused = fuse_attention(build(causal, false));
    REQUIRE(count_ops(fused, "attention") == 1);
    const Node* att = nullptr;
    for (const Node& n : fused.nodes())
      if (n.op->name == "attention") att = &n;
    CHECK(att->attrs.get_int("causal") == int64_t{causal});
    CHECK(att->attrs.get_float("scale") == Approx(0.5));
    CHECK(count_ops(eliminate_dead_code(fused), "matmul") == 0);
    // The probabilities are an output: the composite stays.
    CHECK(count_ops(fuse_attention(build(causal, true)), "attention") == 0);
    // A backend without the kernels keeps the composite.
    FusionSupport none;
    none.attention = false;
    CHECK(count_ops(fuse_attention(build(causal, false), none), "attention") == 0);
  }
  // A mask that is not causal_mask's (an additive mask of the user's) stays a composite.
  Graph g("masked");
  Ref q = g.add_input("q", {DType::F32, {1, 3, 2}});
  Ref m = g.add_input("m", {DType::F32, {3, 3}});
  Ref s = add(g, scale(g, matmul(g, q, q, false, true), 0.5), scale(g, m, -1e9));
  g.set_outputs({matmul(g, softmax(g, s, -1), q)});
  CHECK(count_ops(fuse_attention(g), "attention") == 0);
  CHECK(FusionSupport::of(host()).attention);
}

namespace {

// A tiny classifier over sequences: x [N,T,E] -> causal two-head attention -> mean over T ->
// linear -> cross-entropy against labels [N].
ModelGraph tiny_attention_model(int64_t n, int64_t t, int64_t e, int64_t classes) {
  ModelGraph mg;
  Graph& g = mg.graph;
  mg.input = g.add_input("x", {DType::F32, {n, t, e}});
  mg.labels = g.add_input("labels", {DType::I64, {n}});
  Refs w;
  for (const char* name : {"wq", "wk", "wv", "wo"})
    w.push_back(g.add_param(name, {DType::F32, {e, e}}));
  Refs b;
  for (const char* name : {"bq", "bk", "bv", "bo"})
    b.push_back(g.add_param(name, {DType::F32, {e}}));
  Ref wc = g.add_param("wc", {DType::F32, {e, classes}});
  Ref h =
      multi_head_attention(g, mg.input, w[0], w[1], w[2], w[3], {b[0], b[1], b[2], b[3]}, 2, true);
  mg.logits = matmul(g, mean(g, h, {1}, false), wc);
  mg.loss = cross_entropy(g, mg.logits, mg.labels);
  return mg;
}

}  // namespace

TEST_CASE("a tiny model with multi-head attention trains to the same losses fused as composite",
          "[attention][fused]") {
  const int64_t n = 4, t = 40, e = 16, classes = 3;
  // Fused: build_step on the CPU, which has the kernels.
  auto fused = build_step(tiny_attention_model(n, t, e, classes), host(), StepOptions{});
  REQUIRE(fused.ok());
  CHECK(count_ops(fused->graph(), "attention") == 1);
  CHECK(count_ops(fused->graph(), "attention_backward") == 1);
  CHECK(count_ops(fused->graph(), "softmax") == 0);
  // Composite: the same model differentiated as built.
  ModelGraph plain = tiny_attention_model(n, t, e, classes);
  const Refs params = plain.graph.params();
  auto grads = append_backward(plain.graph, plain.loss, params);
  REQUIRE(grads.ok());
  Refs outs{plain.loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  plain.graph.set_outputs(outs);
  REQUIRE(count_ops(plain.graph, "attention") == 0);

  struct Path {
    const Graph& g;
    Ref input, labels;
    std::vector<RefArray> params;
  };
  const Graph& fg = fused->graph();
  Path paths[] = {{fg, fused->model.input, fused->model.labels, {}},
                  {plain.graph, plain.input, plain.labels, {}}};
  uint64_t seed = 100;
  for (Ref p : params) {
    const RefArray a = draw(plain.graph.type_of(p).shape, seed++, -0.5, 0.5);
    paths[0].params.push_back(a);
    paths[1].params.push_back(a);
  }
  const RefArray x = draw({n, t, e}, 7);
  const RefArray labels{{n}, {0, 2, 1, 2}};
  std::vector<std::vector<double>> losses(2);
  for (size_t pi = 0; pi < 2; ++pi) {
    Path& path = paths[pi];
    auto plan = CompiledPlan::compile(path.g, host());
    REQUIRE(plan.ok());
    REQUIRE(plan->bind(path.input, to_tensor(x, DType::F32)).ok());
    REQUIRE(plan->bind(path.labels, to_tensor(labels, DType::I64)).ok());
    for (int step = 0; step < 4; ++step) {
      std::vector<Tensor> bound;
      for (size_t i = 0; i < params.size(); ++i) {
        bound.push_back(to_tensor(path.params[i], DType::F32));
        REQUIRE(plan->bind(path.g.params()[i], bound.back()).ok());
      }
      plan->run();
      losses[pi].push_back(plan->tensor(path.g.outputs()[0]).to_f64()[0]);
      for (size_t i = 0; i < params.size(); ++i) {  // SGD, lr 0.5
        const Vec gr = plan->tensor(path.g.outputs()[1 + i]).to_f64();
        for (size_t j = 0; j < gr.size(); ++j) path.params[i].v[j] -= 0.5 * gr[j];
      }
    }
  }
  INFO("fused " << losses[0][0] << " .. " << losses[0][3] << ", composite " << losses[1][0]
                << " .. " << losses[1][3]);
  CHECK(losses[1][3] < losses[1][0]);  // it learns
  require_close(losses[0], losses[1], 1e-5, 1e-6, "losses, step by step");
}
