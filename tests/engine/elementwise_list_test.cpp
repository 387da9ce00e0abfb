// The elementwise list (engine/ops/elementwise_list.h) at run time: each entry names a
// registered op of its arity that the CPU runs, reads and prints back in a program, and maps
// to its op and attributes and back. That an entry without formulas fails the build of every
// backend is tests/gpu/elementwise_list_check.cmake's (a CTest of its own).
#include <catch2/catch.hpp>

#include <cmath>
#include <iterator>
#include <string>
#include <string_view>

#include "engine/core/op.h"
#include "engine/ops/fused.h"
#include "engine/passes/passes.h"
#include "graph_fixtures.h"

using namespace mls;
using namespace mls::test;

namespace {

struct Entry {
  FusedCode code;
  std::string_view text, op;
  int operands, params;
};

constexpr Entry kEntries[] = {
#define MLS_TEST_ENTRY(Name, text, op, operands, params) \
  {FusedCode::Name, #text, #op, operands, params},
    MLS_ELEMENTWISE(MLS_TEST_ENTRY)
#undef MLS_TEST_ENTRY
};

}  // namespace

TEST_CASE("the codes are Input, Const, then the list in its order", "[fusion][elementwise_list]") {
  REQUIRE(std::size(kEntries) == 28);
  for (size_t i = 0; i < std::size(kEntries); ++i) {
    INFO(kEntries[i].text);
    REQUIRE(static_cast<size_t>(kEntries[i].code) == i + 2);
  }
  CHECK(static_cast<int>(FusedCode::Relu) == 10);  // the number the shaders were written with
}

TEST_CASE("every entry names a registered op of its arity, with a CPU kernel",
          "[fusion][elementwise_list]") {
  for (const Entry& e : kEntries) {
    INFO(e.text << " (op " << e.op << ")");
    const OpDef* def = op_registry().find(e.op);
    REQUIRE(def != nullptr);
    CHECK(def->num_inputs == e.operands);
    CHECK(fused_operands(e.code) == e.operands);
    CHECK(op_registry().supports(e.op, DeviceKind::CPU, DType::F32));
  }
}

TEST_CASE("every entry reads and prints back in a program", "[fusion][elementwise_list]") {
  for (const Entry& e : kEntries) {
    std::string text = std::string(e.text) + (e.operands == 2 ? "(x0,x1" : "(x0");
    if (e.params >= 1) text += ",0.25";
    if (e.params == 2) text += ",0.75";
    text += ")";
    INFO(text);
    auto p = FusedProgram::parse(text);
    REQUIRE(p.ok());
    REQUIRE(p->num_inputs == e.operands);
    REQUIRE(p->code.back().code == e.code);
    CHECK(p->code.back().p0 == (e.params >= 1 ? 0.25 : 0.0));
    CHECK(p->code.back().p1 == (e.params == 2 ? 0.75 : 0.0));
    CHECK(p->to_text() == text);
  }
}

TEST_CASE("every entry maps to its op and attributes and back", "[fusion][elementwise_list]") {
  for (const Entry& e : kEntries) {
    INFO(e.text);
    const FusedInstr in{
        .code = e.code, .a = 0, .b = e.operands == 2 ? 1 : -1, .p0 = 0.25, .p1 = 0.75};
    auto [op, attrs] = FusedProgram::op_of(in);
    CHECK(op == e.op);
    // Every attribute the instruction carries is one the op declares.
    const OpDef* def = op_registry().find(op);
    REQUIRE(def != nullptr);
    for (const auto& [name, value] : attrs.items()) {
      INFO("attribute " << name);
      bool declared = false;
      for (const auto& spec : def->attrs) declared = declared || spec.name == name;
      CHECK(declared);
    }
    CHECK(static_cast<int>(attrs.items().size()) >= e.params);
    auto back = FusedProgram::instr_of(op, attrs);
    REQUIRE(back.has_value());
    CHECK(back->code == e.code);
    CHECK(back->p0 == (e.params >= 1 ? 0.25 : 0.0));
    CHECK(back->p1 == (e.params == 2 ? 0.75 : 0.0));
  }
  // Absent attributes take the op's defaults; open clamp bounds stay absent.
  auto leaky = FusedProgram::instr_of("leaky_relu", {});
  REQUIRE(leaky.has_value());
  CHECK(leaky->p0 == 0.01);
  auto clamp = FusedProgram::instr_of("clamp", {{"max", 6.0}});
  REQUIRE(clamp.has_value());
  CHECK(std::isinf(clamp->p0));
  CHECK(clamp->p0 < 0);
  CHECK(clamp->p1 == 6.0);
  CHECK(FusedProgram::op_of(*clamp).second.to_string() == Attrs{{"max", 6.0}}.to_string());
  auto gelu = FusedProgram::instr_of("gelu", {{"approximate", std::string("none")}});
  REQUIRE(gelu.has_value());
  CHECK(gelu->code == FusedCode::Gelu);
  CHECK(!FusedProgram::instr_of("matmul", {}).has_value());
}

// The fusion tests check each op over its own domain and broadcasts from a hand-kept list;
// this one follows the list, so an entry added to it is checked without further edits.
TEST_CASE("every entry's fused instruction computes its plain kernel's bits",
          "[fusion][elementwise_list]") {
  for (const Entry& e : kEntries) {
    INFO(e.text);
    const FusedInstr in{
        .code = e.code, .a = 0, .b = e.operands == 2 ? 1 : -1, .p0 = 0.25, .p1 = 0.75};
    auto [op, attrs] = FusedProgram::op_of(in);
    Graph g("one");
    Refs inputs{g.add_input("x", {DType::F32, {5, 301}})};
    if (e.operands == 2) inputs.push_back(g.add_input("y", {DType::F32, {5, 301}}));
    auto y = g.add_node(op, inputs, attrs);
    REQUIRE(y.ok());
    g.add_output(g.emit1("neg", {(*y)[0]}));
    const Graph f = fuse_elementwise(g);
    REQUIRE(f.nodes().size() == 1);
    REQUIRE(f.nodes().front().op->name == "fused_elementwise");
    const RandomFill fill{.lo = -2, .hi = 2};
    const auto plain = outputs_on_random_inputs(g, fill), fused = outputs_on_random_inputs(f, fill);
    REQUIRE(plain.size() == 1);
    REQUIRE(fused.size() == 1);
    REQUIRE(plain[0].size() == fused[0].size());
    size_t same = 0;
    for (size_t i = 0; i < plain[0].size(); ++i)
      same += plain[0][i] == fused[0][i] || (std::isnan(plain[0][i]) && std::isnan(fused[0][i]))
                  ? 1
                  : 0;
    CHECK(same == plain[0].size());
  }
}
