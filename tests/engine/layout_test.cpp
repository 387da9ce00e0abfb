// What the registry walk does not cover for the layout family: the squeeze/unsqueeze
// builders, out-of-range gather indices, split outputs without a gradient, batched matmul
// at sizes that take each kernel path (one folded GEMM, a pool of small GEMMs, large GEMMs
// in turn), and type errors that name the shapes.
#include "engine/ops/layout.h"
#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "test_util.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;
using namespace mls::test;

namespace {

std::string infer_error(std::string_view op, const std::vector<ValueType>& types,
                        const Attrs& attrs) {
  cpu::init();
  Graph g("errors");
  Refs xs;
  for (size_t i = 0; i < types.size(); ++i)
    xs.push_back(g.add_input("x" + std::to_string(i), types[i]));
  auto r = g.add_node(op, xs, attrs);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("squeeze and unsqueeze emit reshapes", "[layout]") {
  cpu::init();
  Graph g("sq");
  Ref x = g.add_input("x", {DType::F32, {2, 1, 3, 1}});
  CHECK(g.shape_of(squeeze(g, x)) == Shape{2, 3});
  CHECK(g.shape_of(squeeze(g, x, {-1})) == Shape{2, 1, 3});
  CHECK(g.shape_of(squeeze(g, x, {0})) == Shape{2, 1, 3, 1});  // a non-1 axis stays, as in torch
  CHECK(g.shape_of(unsqueeze(g, x, 0)) == Shape{1, 2, 1, 3, 1});
  CHECK(g.shape_of(unsqueeze(g, x, -1)) == Shape{2, 1, 3, 1, 1});
  for (const Node& n : g.nodes()) CHECK(n.op->name == "reshape");
}

TEST_CASE("index_select gives zeros for out-of-range indices and index_add skips them",
          "[layout]") {
  EagerSession s(host());
  Ref x = s.leaf(Tensor::from_f32(host(), {3, 2}, {1, 2, 3, 4, 5, 6}), true);
  Ref idx = s.leaf(Tensor::from_i64(host(), {5}, {2, -1, 5, 0, 2}));
  Ref y = index_select(s, x, idx, 0);
  CHECK(s.value(y).to_f64() == std::vector<double>{5, 6, 0, 0, 0, 0, 1, 2, 5, 6});
  Ref w = s.leaf(Tensor::from_f32(host(), {5, 2}, {1, 10, 2, 20, 3, 30, 4, 40, 5, 50}));
  Ref loss = sum(s, mul(s, y, w), {}, false);
  Refs g = s.grad(loss, Refs{x});
  // Row 2 was picked twice (weights rows 0 and 4), row 0 once (row 3), row 1 never.
  CHECK(s.value(g[0]).to_f64() == std::vector<double>{4, 40, 0, 0, 6, 60});
}

TEST_CASE("split: outputs without a gradient contribute zeros", "[layout]") {
  cpu::init();
  Graph g("split");
  Ref x = g.add_input("x", {DType::F32, {3, 2}});
  Refs parts = split(g, x, 0, {1, 2});
  REQUIRE(parts.size() == 2);
  Ref w = g.add_constant("w", Tensor::from_f32(host(), {2, 2}, {1, 2, 3, 4}));
  Ref loss = sum(g, mul(g, parts[1], w), {}, false);
  auto grads = append_backward(g, loss, Refs{x});
  REQUIRE(grads.ok());
  g.set_outputs(*grads);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {3, 2}, {9, 9, 9, 9, 9, 9})).ok());
  plan->run();
  CHECK(plan->tensor((*grads)[0]).to_f64() == std::vector<double>{0, 0, 1, 2, 3, 4});
}

TEST_CASE("batched matmul matches the float64 reference on every kernel path", "[layout][matmul]") {
  cpu::init();
  const OpDef* op = op_registry().find("matmul");
  REQUIRE(op != nullptr);
  struct Case {
    Shape a, b;
    int64_t ta, tb;
    const char* what;
  };
  std::vector<Case> cases{
      {{6, 33, 17}, {17, 20}, 0, 0, "one B: a single GEMM over the batch"},
      {{2, 3, 9, 17}, {1, 20, 17}, 0, 1, "B with unit batch dims, transposed: folded too"},
      {{6, 33, 17}, {6, 17, 20}, 0, 0, "small GEMMs across the pool"},
      {{3, 1, 8, 5}, {4, 6, 8}, 1, 1, "broadcast batch dims, both transposed"},
      {{9, 4}, {5, 9, 7}, 1, 0, "one A, batched B"},
      {{2, 70, 90}, {3, 1, 90, 80}, 0, 0, "large GEMMs one after another"}};
  Rng rng(5);
  for (const Case& c : cases) {
    INFO(c.what);
    Attrs at{{"transpose_a", c.ta}, {"transpose_b", c.tb}};
    OpSample draw;
    RefArray a = random_array({DType::F32, c.a}, rng, draw),
             b = random_array({DType::F32, c.b}, rng, draw);
    auto want = op->reference(std::vector<RefArray>{a, b}, at);
    EagerSession s(host());
    Ref y = s.emit("matmul",
                   Refs{s.leaf(to_tensor(a, DType::F32)), s.leaf(to_tensor(b, DType::F32))}, at)[0];
    REQUIRE(s.value(y).shape() == want[0].shape);
    require_close(s.value(y).to_f64(), want[0].v, 1e-5, 1e-5, "product");
  }
}

TEST_CASE("layout ops' type errors name the shapes at fault", "[layout]") {
  using V = std::vector<int64_t>;
  ValueType a{DType::F32, {2, 3}}, b{DType::F32, {4, 5}};
  CHECK(infer_error("concat", {a, b}, {{"axis", int64_t{0}}})
            .find("[4,5] does not match input 0 [2,3]") != std::string::npos);
  CHECK(infer_error("split", {a}, {{"axis", int64_t{1}}, {"sizes", V{1, 1}}})
            .find("sum to 2 but axis 1 of [2,3]") != std::string::npos);
  CHECK(infer_error("pad", {a}, {{"pads", V{1, 1}}, {"value", 0.0}}).find("needs 2 per axis") !=
        std::string::npos);
  CHECK(
      infer_error(
          "slice", {a},
          {{"axis", int64_t{1}}, {"start", int64_t{3}}, {"end", int64_t{5}}, {"step", int64_t{1}}})
          .find("is empty") != std::string::npos);
  CHECK(infer_error("var", {ValueType{DType::F32, {2, 1}}},
                    {{"axes", V{1}}, {"keepdims", int64_t{0}}, {"correction", int64_t{1}}})
            .find("divides by zero") != std::string::npos);
  CHECK(infer_error("max", {a}, {{"axes", V{2}}, {"keepdims", int64_t{0}}})
            .find("out of range for [2,3]") != std::string::npos);
  CHECK(infer_error("index_select", {a, ValueType{DType::F32, {2}}}, {{"axis", int64_t{0}}})
            .find("i64 [K]") != std::string::npos);
  CHECK(infer_error("matmul", {ValueType{DType::F32, {2, 3, 4}}, ValueType{DType::F32, {3, 4, 5}}},
                    {{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}})
            .find("batch dimensions of [2,3,4] and [3,4,5] do not broadcast") != std::string::npos);
}
