// The fusion passes (engine/passes/fusion.cpp) and the fused ops' CPU kernels: the fused
// graph computes what the unfused one did (bit for bit for elementwise fusion, which
// reassociates nothing; to float tolerance where a GEMM with an epilogue replaces a matmul
// and an add), node counts drop by what each pattern removes, and planned bytes drop.
#include <cmath>
#include <limits>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "engine/ops/conv.h"
#include "engine/ops/fused.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "graph_fixtures.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

void require_identical(const Graph& a, const Graph& b, double lo = -1, double hi = 1) {
  auto x = outputs_on_random_inputs(a, {.lo = lo, .hi = hi}), y = outputs_on_random_inputs(b, {.lo = lo, .hi = hi});
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    INFO("output " << k);
    REQUIRE(x[k].size() == y[k].size());
    for (size_t i = 0; i < x[k].size(); ++i) {
      INFO("element " << i << ": " << x[k][i] << " vs " << y[k][i]);
      REQUIRE((x[k][i] == y[k][i] || (std::isnan(x[k][i]) && std::isnan(y[k][i]))));
    }
  }
}

void require_same(const Graph& a, const Graph& b, double tol) {
  auto x = outputs_on_random_inputs(a), y = outputs_on_random_inputs(b);
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) require_close(y[k], x[k], tol, tol, "output " + std::to_string(k));
}

size_t count(const Graph& g, std::string_view op, std::string_view attr_text = "") {
  size_t n = 0;
  for (const Node& node : g.nodes())
    if (node.op->name == op && node.attrs.to_string().find(attr_text) != std::string::npos) ++n;
  return n;
}

// The default pipeline with and without the two fusion passes.
std::vector<NamedPass> without_fusion() {
  std::vector<NamedPass> out;
  for (NamedPass& p : default_passes())
    if (p.name.find("fusion") == std::string::npos) out.push_back(std::move(p));
  return out;
}

struct Stages {
  std::vector<PassRecord> records;
  const Graph& last() const { return records.back().graph; }
  const Graph& after(const std::string& name) const {
    for (const PassRecord& r : records)
      if (r.name == name) return r.graph;
    FAIL("no stage " << name);
    return records.back().graph;
  }
  const Graph& before(const std::string& name) const {
    for (size_t i = 1; i < records.size(); ++i)
      if (records[i].name == name) return records[i - 1].graph;
    FAIL("no stage " << name);
    return records.back().graph;
  }
};

Stages passes(const Graph& g, const std::vector<NamedPass>& p) {
  auto r = run_passes(g, host(), p);
  REQUIRE(r.ok());
  return {std::move(*r)};
}

// A training step: the loss and the gradient of every parameter as outputs.
void make_training_step(Graph& g, Ref loss) {
  Refs wrt;
  for (Ref p : g.params())
    if (g.value(p).trainable) wrt.push_back(p);
  auto grads = append_backward(g, loss, wrt);
  REQUIRE(grads.ok());
  Refs outs{loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
}


}  // namespace

TEST_CASE("programs print as nested calls and read back, bad ones are errors that say why", "[fusion]") {
  for (const char* text : {"relu(add(x0,x1))", "t0=sub(x0,x1); mul(t0,t0)", "scale(add_scalar(x0,1e-05),-0.5)",
                           "clamp(mul(x0,0.25),-inf,6)", "mul(sub(x0,add(x1,mul(x2,x3))),x4)"}) {
    auto p = FusedProgram::parse(text);
    INFO(text);
    REQUIRE(p.ok());
    CHECK(p->to_text() == text);
  }
  auto p = FusedProgram::parse("t0=sub(x1,x0); mul(t0,t0)");
  REQUIRE(p.ok());
  CHECK(p->num_inputs == 2);
  CHECK(p->code.size() == 4);  // x0, x1, sub, mul: the bound value is computed once
  auto bad = [](const char* text) {
    auto r = FusedProgram::parse(text);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(bad("foo(x0)").find("unknown op 'foo'") != std::string::npos);
  CHECK(bad("add(x0,x2)").find("input x1 is not used") != std::string::npos);
  CHECK(bad("scale(x0)").find("scale takes 1 operands and 1 attributes") != std::string::npos);
  CHECK(bad("x0").find("computes nothing") != std::string::npos);
  CHECK(bad("relu(x0").find("expected ')'") != std::string::npos);
}

TEST_CASE("an elementwise chain becomes one node: same bits, fewer planned bytes", "[fusion]") {
  Graph g("chain");
  Ref x = g.add_input("x", {DType::F32, {256, 128}});
  Ref s = g.add_input("s", {DType::F32, {256, 128}});
  Ref b = g.add_param("b", {DType::F32, {128}});
  Ref h = mul(g, add(g, x, b), s);                                   // b broadcasts over rows
  Ref e = exp(g, neg(g, abs(g, h)));
  Ref y = g.emit1("sigmoid", {sub(g, e, scale(g, s, 0.5))});
  g.add_output(y);
  REQUIRE(g.nodes().size() == 8);
  Graph f = fuse_elementwise(g);
  INFO(f.to_text());
  REQUIRE(f.verify().ok());
  CHECK(f.nodes().size() == 1);
  REQUIRE(count(f, "fused_elementwise") == 1);
  CHECK(f.nodes()[0].attrs.get_string("program") ==
        "sigmoid(sub(exp(neg(abs(mul(add(x0,x1),x2)))),scale(x2,0.5)))");
  CHECK(f.to_text().find("fused_elementwise(%x, %b, %s) {program=\"sigmoid(") != std::string::npos);
  require_identical(g, f);
  auto before = CompiledPlan::compile(g, host());
  auto after = CompiledPlan::compile(f, host());
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  INFO("arena " << before->stats().arena_bytes << " -> " << after->stats().arena_bytes);
  CHECK(after->stats().arena_bytes < before->stats().arena_bytes);
  CHECK(after->stats().arena_bytes <= 256 * 128 * 4);  // the output alone
}

TEST_CASE("scale by one inside a group is its operand", "[fusion]") {
  Graph g("one");
  Ref x = g.add_input("x", {DType::F32, {3, 5}});
  g.add_output(exp(g, mul(g, g.emit1("scale", {x}, {{"alpha", 1.0}}), x)));
  Graph f = fuse_elementwise(g);
  REQUIRE(f.nodes().size() == 1);
  CHECK(f.nodes()[0].attrs.get_string("program") == "exp(mul(x0,x0))");
  require_identical(g, f);
}

TEST_CASE("a value read outside the chain is not fused over", "[fusion]") {
  SECTION("a graph output in the middle") {
    Graph g("shared");
    Ref x = g.add_input("x", {DType::F32, {6, 7}});
    Ref a = exp(g, x);
    Ref c = mul(g, neg(g, a), x);
    g.set_outputs({c, a});
    Graph f = fuse_elementwise(g);
    INFO(f.to_text());
    CHECK(f.nodes().size() == 2);  // exp stays; neg and mul fuse
    CHECK(count(f, "exp") == 1);
    REQUIRE(count(f, "fused_elementwise") == 1);
    CHECK(f.nodes()[1].attrs.get_string("program") == "mul(neg(x0),x1)");
    require_identical(g, f);
  }
  SECTION("a second reader that is not elementwise") {
    Graph g("shared");
    Ref x = g.add_input("x", {DType::F32, {6, 7}});
    Ref y = g.add_input("y", {DType::F32, {6, 7}});
    Ref a = add(g, x, y);
    g.set_outputs({sum(g, a, {}, false), relu(g, a)});
    Graph f = fuse_elementwise(g);
    CHECK(f.nodes().size() == 3);
    CHECK(count(f, "fused_elementwise") == 0);
  }
  SECTION("two readers inside one group: a DAG, bound once") {
    Graph g("dag");
    Ref p = g.add_input("p", {DType::F32, {6, 7}});
    Ref t = g.add_input("t", {DType::F32, {7}});
    Ref d = sub(g, p, t);
    g.add_output(mul(g, d, d));
    Graph f = fuse_elementwise(g);
    REQUIRE(f.nodes().size() == 1);
    CHECK(f.nodes()[0].attrs.get_string("program") == "t0=sub(x0,x1); mul(t0,t0)");
    require_identical(g, f);
  }
}

TEST_CASE("a node that reads what an Update op writes is not moved past it", "[fusion]") {
  auto build = [](bool with_update) {
    Graph g("update");
    Ref x = g.add_input("x", {DType::F32, {4, 5}});
    Ref v = g.add_input("v", {DType::F32, {4, 5}});
    Ref p = g.add_param("p", {DType::F32, {4, 5}}, {}, false);
    Ref t = exp(g, p);
    if (with_update) ema_update(g, p, v, 0.5);  // p changes here: exp must have read it before
    g.add_output(add(g, t, x));
    return g;
  };
  Graph plain = build(false), updated = build(true);
  CHECK(fuse_elementwise(plain).nodes().size() == 1);  // the chain fuses without the update
  Graph f = fuse_elementwise(updated);
  CHECK(f.nodes().size() == 3);
  CHECK(count(f, "fused_elementwise") == 0);
}

TEST_CASE("every fused instruction computes the bits of its op's own kernel", "[fusion]") {
  struct Case {
    const char* op;
    Attrs attrs;
    int arity;
    double lo, hi;
  };
  const std::vector<Case> cases{
      {"neg", {}, 1, -2, 2},           {"abs", {}, 1, -2, 2},
      {"exp", {}, 1, -2, 2},           {"log", {}, 1, 0.1, 3},
      {"sqrt", {}, 1, 0.1, 3},         {"rsqrt", {}, 1, 0.1, 3},
      {"tanh", {}, 1, -3, 3},          {"sigmoid", {}, 1, -3, 3},
      {"relu", {}, 1, -2, 2},          {"silu", {}, 1, -3, 3},
      {"gelu", {}, 1, -3, 3},          {"gelu", {{"approximate", std::string("tanh")}}, 1, -3, 3},
      {"leaky_relu", {{"alpha", 0.2}}, 1, -2, 2},
      {"softplus", {{"beta", 2.0}, {"threshold", 1.5}}, 1, -2, 2},
      {"clamp", {{"min", -0.5}}, 1, -2, 2},
      {"clamp", {{"min", -0.5}, {"max", 0.75}}, 1, -2, 2},
      {"scale", {{"alpha", -1.7}}, 1, -2, 2},
      {"add_scalar", {{"value", 0.3}}, 1, -2, 2},
      {"add", {}, 2, -2, 2},           {"sub", {}, 2, -2, 2},
      {"mul", {}, 2, -2, 2},           {"div", {}, 2, 0.5, 2},
      {"maximum", {}, 2, -2, 2},       {"minimum", {}, 2, -2, 2},
      {"pow", {}, 2, 0.5, 2},          {"relu_backward", {}, 2, -2, 2},
      {"gelu_backward", {}, 2, -3, 3}, {"gelu_backward", {{"approximate", std::string("tanh")}}, 2, -3, 3},
      {"clamp_backward", {{"min", -0.5}, {"max", 0.5}}, 2, -1, 1}};
  // Second operands: the output's shape, a row, a column, a scalar (only ops that broadcast).
  const std::vector<Shape> second{{7, 300}, {300}, {7, 1}, {}};
  for (const Case& c : cases) {
    bool broadcasts = c.arity == 2 && std::string(c.op).find("backward") == std::string::npos;
    for (size_t k = 0; k < (broadcasts ? second.size() : 1); ++k) {
      INFO(c.op << " {" << c.attrs.to_string() << "} second operand " << shape_str(second[k]));
      Graph g("one");
      Ref x = g.add_input("x", {DType::F32, {7, 300}});  // 2100 elements: blocks end mid-row
      Refs in{x};
      if (c.arity == 2) in.push_back(g.add_input("y", {DType::F32, second[k]}));
      auto y = g.add_node(c.op, in, c.attrs);
      REQUIRE(y.ok());
      g.add_output(g.emit1("neg", {(*y)[0]}));
      Graph f = fuse_elementwise(g);
      REQUIRE(f.nodes().size() == 1);
      REQUIRE(count(f, "fused_elementwise") == 1);
      require_identical(g, f, c.lo, c.hi);
    }
  }
}

TEST_CASE("broadcast operands of every layout are gathered right", "[fusion]") {
  // Over [4, 3, 50]: a middle axis broadcast (runs copied), a column (runs filled), a
  // trailing 1 (merged with its neighbour), BatchNorm's per-channel shape.
  for (const Shape& s : std::vector<Shape>{{4, 1, 50}, {3, 1}, {4, 3, 1}, {1, 3, 1}, {50}, {1, 1, 1}}) {
    INFO("operand " << shape_str(s));
    Graph g("gather");
    Ref x = g.add_input("x", {DType::F32, {4, 3, 50}});
    Ref y = g.add_input("y", {DType::F32, s});
    Ref z = g.add_input("z", {DType::F32, s});
    g.add_output(add(g, mul(g, x, y), g.emit1("tanh", {sub(g, x, z)})));
    Graph f = fuse_elementwise(g);
    REQUIRE(f.nodes().size() == 1);
    require_identical(g, f);
  }
}

TEST_CASE("matmul + bias + relu fuses into linear_act, MLP training gives the same loss and gradients",
          "[fusion]") {
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {32, 20}});
  Ref labels = g.add_input("y", {DType::I64, {32}});
  Ref w1 = g.add_param("w1", {DType::F32, {20, 16}});
  Ref b1 = g.add_param("b1", {DType::F32, {16}});
  Ref w2 = g.add_param("w2", {DType::F32, {16, 4}});
  Ref b2 = g.add_param("b2", {DType::F32, {4}});
  Ref loss = cross_entropy(g, linear(g, relu(g, linear(g, x, w1, b1)), w2, b2), labels);
  make_training_step(g, loss);
  Stages fused = passes(g, default_passes());
  Stages plain = passes(g, without_fusion());
  const Graph& f = fused.last();
  INFO(f.to_text());
  // fc1: matmul, add, relu -> one node (relu_backward reads the ReLU's output, so its input
  // has no other reader); fc2: matmul, add -> one node.
  CHECK(fused.before("bias + activation fusion").nodes().size() -
            fused.after("bias + activation fusion").nodes().size() == 3);
  CHECK(count(f, "linear_act", "act=\"relu\"") == 1);
  CHECK(count(f, "linear_act", "act=\"none\"") == 1);
  CHECK(count(f, "matmul") == 3);  // the backward products (x needs no gradient)
  // The loss gradient's sub(g, mul(exp(log_softmax), sum)) fuses.
  CHECK(fused.after("elementwise fusion").nodes().size() <
        fused.before("elementwise fusion").nodes().size());
  CHECK(count(f, "fused_elementwise") >= 1);
  CHECK(f.nodes().size() < plain.last().nodes().size());
  require_same(plain.last(), f, 1e-5);
  require_same(g, f, 1e-5);
}

TEST_CASE("gelu keeps its input for the backward pass: only matmul + bias fuse", "[fusion]") {
  Graph g("gelu");
  Ref x = g.add_input("x", {DType::F32, {8, 6}});
  Ref w = g.add_param("w", {DType::F32, {6, 5}});
  Ref b = g.add_param("b", {DType::F32, {5}});
  Ref loss = sum(g, gelu(g, linear(g, x, w, b)), {}, false);
  SECTION("inference: the whole chain") {
    g.set_outputs({loss});
    Graph f = passes(g, default_passes()).last();
    CHECK(count(f, "linear_act", "act=\"gelu\"") == 1);
    CHECK(count(f, "gelu") == 0);
    require_same(g, f, 1e-5);
  }
  SECTION("training: gelu_backward reads the pre-activation") {
    make_training_step(g, loss);
    Graph f = passes(g, default_passes()).last();
    INFO(f.to_text());
    CHECK(count(f, "linear_act", "act=\"none\"") == 1);
    CHECK(count(f, "gelu") == 1);
    require_same(g, f, 1e-5);
  }
}

TEST_CASE("conv2d + bias + relu fuses into conv2d_act, a LeNet-like step gives the same loss and gradients",
          "[fusion]") {
  Graph g("lenet");
  Ref x = g.add_input("x", {DType::F32, {8, 1, 12, 12}});
  Ref labels = g.add_input("y", {DType::I64, {8}});
  Ref k1 = g.add_param("conv1.weight", {DType::F32, {4, 1, 3, 3}});
  Ref c1 = g.add_param("conv1.bias", {DType::F32, {4}});
  Ref k2 = g.add_param("conv2.weight", {DType::F32, {6, 4, 3, 3}});
  Ref c2 = g.add_param("conv2.bias", {DType::F32, {6}});
  Ref w = g.add_param("fc.weight", {DType::F32, {24, 5}});
  Ref b = g.add_param("fc.bias", {DType::F32, {5}});
  Ref h = relu(g, add(g, conv2d(g, x, k1, {.padding = {1, 1}}), reshape(g, c1, {4, 1, 1})));  // direct kernel
  h = max_pool2d(g, h, {.kernel = {2, 2}});                                                   // [8,4,6,6]
  h = relu(g, add(g, conv2d(g, h, k2, {.stride = {2, 2}}), reshape(g, c2, {6, 1, 1})));       // im2col
  Ref loss = cross_entropy(g, linear(g, reshape(g, h, {8, 24}), w, b), labels);
  make_training_step(g, loss);
  Stages fused = passes(g, default_passes());
  const Graph& f = fused.last();
  INFO(f.to_text());
  CHECK(count(f, "conv2d_act", "act=\"relu\"") == 2);
  CHECK(count(f, "linear_act", "act=\"none\"") == 1);
  CHECK(count(f, "conv2d") == 0);
  // Two convolutions lose an add and a relu each, the dense layer its add.
  CHECK(fused.before("bias + activation fusion").nodes().size() -
            fused.after("bias + activation fusion").nodes().size() == 5);
  require_same(passes(g, without_fusion()).last(), f, 1e-5);
  require_same(g, f, 1e-5);
}

TEST_CASE("BatchNorm's backward fuses: same step, fewer bytes written", "[fusion]") {
  Graph g("bn");
  Ref x = g.add_input("x", {DType::F32, {8, 3, 16, 16}});
  Ref labels = g.add_input("y", {DType::I64, {8}});
  Ref k = g.add_param("conv.weight", {DType::F32, {4, 3, 3, 3}});
  Ref gamma = g.add_param("bn.weight", {DType::F32, {4}});
  Ref beta = g.add_param("bn.bias", {DType::F32, {4}});
  Ref rm = g.add_param("bn.running_mean", {DType::F32, {4}}, {}, false);
  Ref rv = g.add_param("bn.running_var", {DType::F32, {4}}, {}, false);
  Ref w = g.add_param("fc.weight", {DType::F32, {16, 12}});
  BatchNormOut bn = batch_norm_train(g, conv2d(g, x, k, {.padding = {1, 1}}), gamma, beta);
  ema_update(g, rm, bn.mean, 0.1);
  ema_update(g, rv, scale(g, bn.var, 1.0), 0.1);
  Ref h = max_pool2d(g, relu(g, bn.y), {.kernel = {8, 8}});  // [8,4,2,2]
  Ref loss = cross_entropy(g, matmul(g, reshape(g, h, {8, 16}), w), labels);
  make_training_step(g, loss);
  const Graph plain = passes(g, without_fusion()).last();
  Stages fused = passes(g, default_passes());
  const Graph& f = fused.last();
  INFO(f.to_text());
  // xhat = (x - mean) * rstd, and dx = (g - (sg/m + xhat * sgx/m)) * gamma * rstd.
  CHECK(count(f, "fused_elementwise", "mul(sub(x0,x1),x2)") == 1);
  CHECK(count(f, "fused_elementwise", "mul(sub(x3,add(x2,mul(x0,x1))),x4)") == 1);
  // Elementwise fusion alone changes no bit of any output.
  require_identical(fused.before("elementwise fusion"), fused.after("elementwise fusion"));
  require_same(plain, f, 1e-5);
  auto before = CompiledPlan::compile(plain, host());
  auto after = CompiledPlan::compile(f, host());
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  // Bytes of intermediates written to memory: four [8,4,16,16] tensors fewer (x - mean, and
  // xhat * sgx/m, its sum with sg/m and g minus that). The arena's peak here is set by the
  // forward values the backward keeps, so it need not move.
  INFO("intermediates " << before->stats().unplanned_bytes << " -> " << after->stats().unplanned_bytes);
  CHECK(before->stats().unplanned_bytes - after->stats().unplanned_bytes >= 4 * 8 * 4 * 16 * 16 * sizeof(float));
}

TEST_CASE("a fused graph differentiates again: its gradient equals the unfused graph's", "[fusion]") {
  Graph g("again");
  Ref x = g.add_input("x", {DType::F32, {5, 6}});
  Ref c = g.add_input("c", {DType::F32, {6}});
  g.add_output(sum(g, mul(g, g.emit1("tanh", {add(g, x, c)}), exp(g, scale(g, x, 0.5))), {}, false));
  Graph f = fuse_elementwise(g);
  REQUIRE(count(f, "fused_elementwise") == 1);
  auto grad = [](Graph h) {
    auto gr = append_backward(h, h.outputs()[0], h.inputs());
    REQUIRE(gr.ok());
    h.set_outputs(*gr);
    return h;
  };
  require_same(grad(g), grad(f), 1e-6);
}

TEST_CASE("the epilogue activations are one list that names registered ops", "[fusion]") {
  mls::test::host();
  for (const auto& [act, name] : kEpilogueActs) {
    INFO(name);
    CHECK(epilogue_act(name) == act);
    CHECK(epilogue_act_name(act) == name);
    if (act == EpilogueAct::None) continue;
    CHECK(op_registry().find(name) != nullptr);  // the fusion pass matches that op's nodes
    CHECK(epilogue_act_of_op(name, Attrs{}) == act);
  }
  CHECK_FALSE(epilogue_act("gelu_tanh"));
  Attrs tanh_form;
  tanh_form.set("approximate", std::string("tanh"));
  CHECK_FALSE(epilogue_act_of_op("gelu", tanh_form));  // the epilogue has the erf form only
  CHECK_FALSE(epilogue_act_of_op("exp", Attrs{}));
  CHECK(epilogue_act_names() == "none, relu, sigmoid, tanh, gelu or silu");
}
