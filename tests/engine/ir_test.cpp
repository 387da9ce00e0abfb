// The IR: type checking at construction, the verifier, the text form.
#include "engine/ir/graph.h"
#include "test_util.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;
using namespace mls::test;

TEST_CASE("add_node type-checks and names the op and label", "[ir]") {
  cpu::init();
  Graph g("g");
  Ref a = g.add_input("a", {DType::F32, {3, 4}});
  Ref b = g.add_input("b", {DType::F32, {5, 6}});
  g.set_label("fc2");
  auto r = g.add_node("matmul", {a, b}, {{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("node 'fc2'") != std::string::npos);
  CHECK(r.error().message.find("inner dimensions differ") != std::string::npos);
  auto u = g.add_node("no_such_op", {a}, {});
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message.find("unknown op 'no_such_op'") != std::string::npos);
  auto m = g.add_node("matmul", {a, b}, {});
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().message.find("missing attribute 'transpose_a'") != std::string::npos);
  auto bc = g.add_node("add", {a, b}, {});
  REQUIRE_FALSE(bc.ok());
  CHECK(bc.error().message.find("do not broadcast") != std::string::npos);
}

TEST_CASE("the text form lists inputs, params, typed nodes and labels", "[ir]") {
  cpu::init();
  Graph g("tiny");
  Ref x = g.add_input("x", {DType::F32, {2, 3}});
  Ref w = g.add_param("w", {DType::F32, {3, 4}});
  g.set_label("fc");
  Ref y = matmul(g, x, w);
  g.add_output(y);
  std::string t = g.to_text();
  CHECK(t.find("graph tiny(%x: f32[2,3]) params(%w: f32[3,4]) {") != std::string::npos);
  CHECK(t.find("%2: f32[2,4] = matmul(%x, %w) {transpose_a=0, transpose_b=0}  # fc") != std::string::npos);
  CHECK(t.find("return %2") != std::string::npos);
  CHECK(g.verify().ok());
}
