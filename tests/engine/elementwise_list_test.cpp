// The elementwise list (engine/ops/elementwise_list.h) at run time: each entry names a
// registered op of its arity that the CPU runs, reads and prints back in a program, and maps
// to its op and attributes and back; each epilogue act applies one of its entries, and the
// CPU's GEMM (its AVX-512 vector form included) and convolution epilogues compute that
// entry's bits. That an entry or act without formulas fails the build of every backend is
// tests/gpu/elementwise_list_check.cmake's (a CTest of its own).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/op.h"
#include "engine/cpu/elementwise_dispatch.h"
#include "engine/cpu/gemm.h"
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

const Entry* entry_of(FusedCode code) {
  for (const Entry& e : kEntries)
    if (e.code == code) return &e;
  return nullptr;
}

// Bitwise equal, or both NaN.
size_t count_same(const std::vector<double>& a, const std::vector<double>& b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    same += a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) ? 1 : 0;
  return same;
}

}  // namespace

TEST_CASE("the codes are Input, Const, then the list in its order", "[fusion][elementwise_list]") {
  REQUIRE(std::size(kEntries) == 30);
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

TEST_CASE("every epilogue act applies a unary elementwise entry of its name",
          "[fusion][elementwise_list]") {
  REQUIRE(kEpilogueActs.front().first == EpilogueAct::None);
  CHECK(epilogue_fused_code(EpilogueAct::None) == FusedCode::Input);
  for (size_t i = 1; i < kEpilogueActs.size(); ++i) {
    const auto [act, name] = kEpilogueActs[i];
    INFO(name);
    CHECK(static_cast<size_t>(act) == i);  // the number the backends switch on
    const Entry* e = entry_of(epilogue_fused_code(act));
    REQUIRE(e != nullptr);
    CHECK(e->text == name);
    CHECK(e->operands == 1);
    CHECK(e->params == 0);
    CHECK(epilogue_act(name) == act);
  }
  // The fusion pass folds a node into an epilogue exactly when its op and attributes are an
  // act's entry: every other entry (a tanh-form gelu, a leaky relu) stays out.
  size_t folded = 0;
  for (const Entry& e : kEntries) {
    INFO(e.text);
    const auto [op, attrs] =
        FusedProgram::op_of({.code = e.code, .a = 0, .b = 1, .p0 = 0.25, .p1 = 0.75});
    const auto act = epilogue_act_of_op(op, attrs);
    if (!act) continue;
    ++folded;
    CHECK(epilogue_fused_code(*act) == e.code);
  }
  CHECK(folded == kEpilogueActs.size() - 1);
}

// gemm_simd.cpp applies relu in registers by hand and every other act with the list's
// scalar formulas over the rows just stored; the CBLAS path applies them all after the
// product. Each act, on each path and on shapes that reach the blocked kernel (with a tail),
// the matrix-vector kernels and the split-K forward, must give the bits of the act's
// elementwise formula applied to the same GEMM without an act.
TEST_CASE("every epilogue act computes its elementwise entry's bits in the CPU's GEMM",
          "[gemm][elementwise_list]") {
  using cpu::BiasAxis;
  using cpu::GemmArgs;
  cpu::ThreadPool pool(2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::array<int64_t, 3> shapes[] = {
      {37, 150, 300}, {1, 300, 200}, {40, 1, 33}, {4, 256, 1024}, {3, 5, 0}};
  for (const auto& mnk : shapes) {
    // Plain variables, not a structured binding: clang before 16 cannot capture those.
    const int64_t m = mnk[0], n = mnk[1], k = mnk[2];
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)),
        bias(static_cast<size_t>(n));
    for (auto* v : {&a, &b, &bias})
      for (float& x : *v) x = 2.0f * u(rng);
    for (auto fn : {&cpu::gemm, &cpu::gemm_cblas}) {
      auto run = [&](EpilogueAct act) {
        std::vector<float> c(static_cast<size_t>(m * n));
        fn(pool, GemmArgs{.m = m,
                          .n = n,
                          .k = k,
                          .a = a.data(),
                          .lda = k,
                          .b = b.data(),
                          .ldb = n,
                          .c = c.data(),
                          .ldc = n,
                          .bias = bias.data(),
                          .bias_axis = BiasAxis::Col,
                          .act = act});
        return c;
      };
      const std::vector<float> plain = run(EpilogueAct::None);
      for (size_t i = 1; i < kEpilogueActs.size(); ++i) {
        const auto [act, name] = kEpilogueActs[i];
        INFO(name << " on " << m << "x" << n << "x" << k
                  << (fn == &cpu::gemm ? " (cpu::gemm)" : " (CBLAS)"));
        const std::vector<float> got = run(act);
        std::vector<double> want(plain.size()), have(got.begin(), got.end());
        cpu::with_formula({.code = epilogue_fused_code(act)}, [&](auto f) {
          if constexpr (!cpu::kBinaryFormula<decltype(f)>)
            for (size_t j = 0; j < plain.size(); ++j) want[j] = f(plain[j]);
        });
        CHECK(count_same(want, have) == want.size());
      }
    }
  }
}

// A convolution's epilogue (the direct kernel and the im2col GEMM alike) against the act's
// op run by its own kernel on the same convolution without an act.
TEST_CASE("every epilogue act computes its elementwise entry's bits in the CPU's convolution",
          "[conv][elementwise_list]") {
  struct ConvCase {
    Shape x, w;
    Conv2dParams p;
  };
  const ConvCase cases[] = {
      {{2, 3, 10, 10}, {8, 3, 3, 3}, {.padding = {1, 1}}},
      {{1, 16, 14, 14}, {32, 16, 5, 5}, {.stride = {2, 2}, .padding = {2, 2}}},
      {{2, 32, 6, 6}, {16, 32, 1, 1}, {}},
      {{16, 2, 9, 9}, {4, 2, 3, 3}, {.padding = {1, 1}}}};  // 16 samples across the lanes
  for (const ConvCase& c : cases)
    for (size_t i = 1; i < kEpilogueActs.size(); ++i) {
      const EpilogueAct act = kEpilogueActs[i].first;
      const std::string_view name = kEpilogueActs[i].second;
      INFO(name << " on x " << shape_str(c.x) << ", w " << shape_str(c.w));
      auto graph = [&](bool fused) {
        Graph g("conv");
        Ref x = g.add_input("x", {DType::F32, c.x});
        Ref w = g.add_input("w", {DType::F32, c.w});
        Ref b = g.add_input("b", {DType::F32, {c.w[0]}});
        Ref y = conv2d_act(g, x, w, b, c.p, fused ? name : "none");
        if (!fused) {
          const auto [op, attrs] = FusedProgram::op_of({.code = epilogue_fused_code(act)});
          y = g.emit1(op, {y}, attrs);
        }
        g.add_output(y);
        return g;
      };
      const RandomFill fill{.lo = -1.5, .hi = 1.5};
      const auto plain = outputs_on_random_inputs(graph(false), fill),
                 fused = outputs_on_random_inputs(graph(true), fill);
      REQUIRE(plain.size() == 1);
      REQUIRE(fused.size() == 1);
      REQUIRE(plain[0].size() == fused[0].size());
      CHECK(count_same(plain[0], fused[0]) == plain[0].size());
    }
}
