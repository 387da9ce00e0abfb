// mls.autodiff (scripting/notebook/autodiff_lib.cpp, autodiff_view.cpp) on the autodiff lab's
// example f(x) = x^2 sin x at x = 2: the value and derivative against float64; every wire's
// tangent against a central difference of that wire's value, and every wire's adjoint against
// a central difference of f when that wire alone is nudged, both computed here in float64 by
// re-evaluating the returned wire list (so neither the engine's rules nor its f32 arithmetic
// is used); the figures' labels; the refusals.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "scripting/notebook/autodiff_view.h"
#include "scripting/runtime.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

struct W {
  std::string name, op;
  std::vector<std::string> inputs;
  double value = 0, derived = 0;  // the tangent or the adjoint
  bool output = false;
};

// The wires of the result table in global `name`, field `mode_field` ("tangent"/"adjoint").
std::vector<W> read_wires(lua::LuaHost& h, const char* name, const char* field) {
  lua_State* L = h.state();
  std::vector<W> out;
  lua_getglobal(L, name);
  REQUIRE(lua_istable(L, -1));
  lua_getfield(L, -1, "wires");
  REQUIRE(lua_istable(L, -1));
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, -1));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, -1, i);
    W w;
    lua_getfield(L, -1, "name");
    w.name = lua_tostring(L, -1);
    lua_getfield(L, -2, "op");
    w.op = lua_tostring(L, -1);
    lua_getfield(L, -3, "value");
    w.value = lua_tonumber(L, -1);
    lua_getfield(L, -4, field);
    REQUIRE(lua_isnumber(L, -1));
    w.derived = lua_tonumber(L, -1);
    lua_getfield(L, -5, "output");
    w.output = lua_toboolean(L, -1);
    lua_getfield(L, -6, "inputs");
    for (lua_Integer k = 1; k <= static_cast<lua_Integer>(lua_rawlen(L, -1)); ++k) {
      lua_rawgeti(L, -1, k);
      w.inputs.push_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    lua_pop(L, 7);
    out.push_back(w);
  }
  lua_pop(L, 2);
  return out;
}

double number_field(lua::LuaHost& h, const char* global, const char* field) {
  lua_State* L = h.state();
  lua_getglobal(L, global);
  lua_getfield(L, -1, field);
  INFO(global << "." << field);
  REQUIRE(lua_isnumber(L, -1));
  const double v = lua_tonumber(L, -1);
  lua_pop(L, 2);
  return v;
}

// The wires' values in float64 for arguments `args` (in wire order), with wire `nudged`
// (if any) moved by `delta` after it is computed, so everything downstream sees it.
std::vector<double> eval64(const std::vector<W>& wires, const std::vector<double>& args,
                           int nudged = -1, double delta = 0) {
  std::vector<double> v(wires.size());
  size_t arg = 0;
  auto at = [&](const std::string& name) {
    for (size_t k = 0; k < wires.size(); ++k)
      if (wires[k].name == name) return v[k];
    FAIL("no wire " << name);
    return 0.0;
  };
  for (size_t k = 0; k < wires.size(); ++k) {
    const W& w = wires[k];
    if (w.op == "input") {
      v[k] = args.at(arg++);
    } else if (w.op == "mul") {
      v[k] = at(w.inputs[0]) * at(w.inputs[1]);
    } else if (w.op == "add") {
      v[k] = at(w.inputs[0]) + at(w.inputs[1]);
    } else if (w.op == "sin") {
      v[k] = std::sin(at(w.inputs[0]));
    } else if (w.op == "cos") {
      v[k] = std::cos(at(w.inputs[0]));
    } else {
      FAIL("the test's evaluator has no op " << w.op);
    }
    if (static_cast<int>(k) == nudged) v[k] += delta;
  }
  return v;
}

size_t output_of(const std::vector<W>& wires) {
  for (size_t k = 0; k < wires.size(); ++k)
    if (wires[k].output) return k;
  FAIL("no wire is marked output");
  return 0;
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

const char* kF = "f = function(x) return x * x * mls.sin(x) end\n";

}  // namespace

TEST_CASE("autodiff forward mode: x^2 sin x at 2, each wire's tangent a central difference",
          "[notebook][autodiff]") {
  lua::LuaHost h(cpu::backend());
  lua::CellOutput out;
  h.runtime().cell_output = &out;
  run_ok(h, std::string(kF) + "r = mls.autodiff.forward(f, 2)");
  CHECK(std::abs(number_field(h, "r", "value") - 3.6371897073) < 1e-5);
  CHECK(std::abs(number_field(h, "r", "derivative") - 1.9726023611) < 1e-5);
  // The float64 references themselves.
  CHECK(std::abs(4 * std::sin(2.0) - 3.6371897073) < 1e-9);
  CHECK(std::abs(4 * std::sin(2.0) + 4 * std::cos(2.0) - 1.9726023611) < 1e-9);

  const std::vector<W> wires = read_wires(h, "r", "tangent");
  // x, then v1 = x x, v2 = sin x, v3 = v1 v2 in execution order.
  REQUIRE(wires.size() == 4);
  CHECK(wires[0].name == "x");
  CHECK(wires[0].op == "input");
  CHECK(wires[1].op == "mul");
  CHECK(wires[1].inputs == std::vector<std::string>{"x", "x"});
  CHECK(wires[2].op == "sin");
  CHECK(wires[3].name == "v3");
  CHECK(wires[3].inputs == std::vector<std::string>{"v1", "v2"});
  CHECK(output_of(wires) == 3);
  const double hstep = 1e-5;
  const std::vector<double> at = eval64(wires, {2.0});
  const std::vector<double> plus = eval64(wires, {2.0 + hstep}),
                            minus = eval64(wires, {2.0 - hstep});
  for (size_t k = 0; k < wires.size(); ++k) {
    INFO("wire " << wires[k].name);
    CHECK(std::abs(wires[k].value - at[k]) < 1e-5 * std::max(1.0, std::abs(at[k])));
    const double fd = (plus[k] - minus[k]) / (2 * hstep);
    CHECK(std::abs(wires[k].derived - fd) < 1e-5 * std::max(1.0, std::abs(fd)));
  }
  CHECK(wires[1].derived == Approx(4.0).epsilon(1e-6));  // d(x x)/dx = 2x

  // The figure: the graph with each wire's dual number.
  REQUIRE(out.figures.size() == 1);
  const lua::Figure& fig = out.figures[0];
  CHECK(fig.title == "forward mode: f(2) = 3.6372, f'(2) = 1.9726");
  CHECK(has(fig.svg, ">(3.6372, 1.9726)</text>"));  // the output wire: (f, f')
  CHECK(has(fig.svg, ">(4.0000, 4.0000)</text>"));  // v1 = x x
  CHECK(has(fig.svg, ">(2.0000, 1.0000)</text>"));  // the input, seeded with 1
  CHECK(has(fig.svg, ">v2 = sin(x)</text>"));
  CHECK(has(fig.svg, ">v3 = v1 · v2</text>"));
  CHECK(fig.svg.rfind("<svg", 0) == 0);
  CHECK(has(fig.svg, "</svg>"));
}

TEST_CASE("autodiff reverse mode: each wire's adjoint is df/dv, the input's is f'(2)",
          "[notebook][autodiff]") {
  lua::LuaHost h(cpu::backend());
  lua::CellOutput out;
  h.runtime().cell_output = &out;
  run_ok(h, std::string(kF) + "r = mls.autodiff.reverse(f, 2)\nfw = mls.autodiff.forward(f, 2)");
  const double d = number_field(h, "r", "derivative");
  CHECK(std::abs(d - 1.9726023611) < 1e-5);
  const std::vector<W> wires = read_wires(h, "r", "adjoint");
  const std::vector<W> tangents = read_wires(h, "fw", "tangent");
  REQUIRE(wires.size() == 4);
  CHECK(wires[0].derived == d);                   // the input's adjoint is the derivative
  CHECK(wires[output_of(wires)].derived == 1.0);  // the seed
  // Each wire's adjoint against f's central difference with that wire alone nudged.
  const double hstep = 1e-5;
  const size_t f = output_of(wires);
  for (size_t k = 0; k < wires.size(); ++k) {
    INFO("wire " << wires[k].name);
    const double fd = (eval64(wires, {2.0}, static_cast<int>(k), hstep)[f] -
                       eval64(wires, {2.0}, static_cast<int>(k), -hstep)[f]) /
                      (2 * hstep);
    CHECK(std::abs(wires[k].derived - fd) < 1e-5 * std::max(1.0, std::abs(fd)));
  }
  // Where the graph splits at x: f' = v1' adj(v1) + v2' adj(v2), forward's tangents against
  // reverse's adjoints (the chain rule read both ways).
  CHECK(std::abs(tangents[1].derived * wires[1].derived + tangents[2].derived * wires[2].derived -
                 d) < 1e-5);
  REQUIRE(out.figures.size() == 2);
  CHECK(out.figures[0].title == "reverse mode: f(2) = 3.6372, f'(2) = 1.9726");
  CHECK(has(out.figures[0].svg, ">∂f/∂x = 1.9726</text>"));
  CHECK(has(out.figures[0].svg, ">∂f/∂v3 = 1.0000</text>"));
  CHECK(has(out.figures[0].svg, ">∂f/∂v2 = 4.0000</text>"));  // adj(v2) = v1 = x^2
}

TEST_CASE("autodiff compare draws both modes side by side and they agree", "[notebook][autodiff]") {
  lua::LuaHost h(cpu::backend());
  lua::CellOutput out;
  h.runtime().cell_output = &out;
  run_ok(h, std::string(kF) + R"(
    c = mls.autodiff.compare(f, 2)
    agree = c.agree
    fwd, rev = c.forward.derivative, c.reverse.derivative
  )");
  lua_getglobal(h.state(), "agree");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);
  CHECK(std::abs(global_number(h, "fwd") - 1.9726023611) < 1e-5);
  CHECK(std::abs(global_number(h, "rev") - 1.9726023611) < 1e-5);
  REQUIRE(out.figures.size() == 1);
  const std::string& svg = out.figures[0].svg;
  CHECK(has(svg, ">forward mode: f(2) = 3.6372, f'(2) = 1.9726</text>"));
  CHECK(has(svg, ">reverse mode: f(2) = 3.6372, f'(2) = 1.9726</text>"));
  CHECK(has(svg, ">(3.6372, 1.9726)</text>"));
  CHECK(has(svg, ">∂f/∂x = 1.9726</text>"));
  CHECK(out.figures[0].width > 900);  // two panels
  // A long function is not drawn (the cell says so), but its numbers come back.
  run_ok(h, R"(
    local long = function(x) local y = x for i = 1, 250 do y = mls.sin(y) + x end return y end
    n_long = #mls.autodiff.compare(long, 1).forward.wires
  )");
  CHECK(global_number(h, "n_long") == 501);  // x, then a sin and an add per step
  CHECK(out.figures.size() == 1);
  CHECK(has(out.text, "mls.autodiff.compare: 501 values, too many to draw (at most 400)"));
  // Outside a notebook cell nothing is collected, and nothing fails.
  h.runtime().cell_output = nullptr;
  run_ok(h, "mls.autodiff.compare(f, 1)");
  CHECK(out.figures.size() == 1);
}

TEST_CASE("autodiff with two arguments: a directional tangent and the whole gradient",
          "[notebook][autodiff]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    g = function(a, b) return a * mls.cos(b) + b end
    fx = mls.autodiff.forward(g, {2, 0.5}, {1, 0})
    fy = mls.autodiff.forward(g, {2, 0.5}, {0, 1})
    r = mls.autodiff.reverse(g, {2, 0.5})
    g1, g2 = r.gradient[1], r.gradient[2]
    n1, n2 = r.wires[1].name, r.wires[2].name
  )");
  const double a = 2, b = 0.5;
  CHECK(std::abs(number_field(h, "fx", "value") - (a * std::cos(b) + b)) < 1e-5);
  CHECK(std::abs(number_field(h, "fx", "derivative") - std::cos(b)) < 1e-6);
  CHECK(std::abs(number_field(h, "fy", "derivative") - (1 - a * std::sin(b))) < 1e-5);
  CHECK(std::abs(global_number(h, "g1") - std::cos(b)) < 1e-6);
  CHECK(std::abs(global_number(h, "g2") - (1 - a * std::sin(b))) < 1e-5);
  // The wires carry the function's own parameter names.
  CHECK(mls::test::global_string(h, "n1") == "a");
  CHECK(mls::test::global_string(h, "n2") == "b");
  const std::vector<W> wires = read_wires(h, "fy", "tangent");
  const double hstep = 1e-5;
  const auto plus = eval64(wires, {a, b + hstep}), minus = eval64(wires, {a, b - hstep});
  for (size_t k = 0; k < wires.size(); ++k) {
    INFO("wire " << wires[k].name);
    CHECK(std::abs(wires[k].derived - (plus[k] - minus[k]) / (2 * hstep)) < 1e-5);
  }
}

TEST_CASE("autodiff refuses a bad point, a failing function and a result that is not a scalar",
          "[notebook][autodiff]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, kF);
  CHECK(has(run_err(h, "mls.autodiff.forward(f, 'two')"),
            "bad argument #2 to 'forward' (x: a number"));
  CHECK(has(run_err(h, "mls.autodiff.forward(2, 2)"), "bad argument #1 to 'forward'"));
  CHECK(has(run_err(h, "mls.autodiff.reverse(f, {2, 'a'})"), "x[2] is not a number"));
  CHECK(has(run_err(h, "mls.autodiff.forward(f, {1, 2}, {1})"),
            "dx must have one entry per argument (2)"));
  const std::string failed =
      run_err(h, "mls.autodiff.forward(function(x) return math.sin(x) end, 2)");
  CHECK(has(failed, "mls.autodiff.forward: f failed:"));
  CHECK(has(failed, "number expected"));
  CHECK(has(run_err(h, "mls.autodiff.compare(function(x) return 3 end, 2)"),
            "f must return a tensor computed from its argument, got number"));
  CHECK(has(run_err(h, "mls.autodiff.reverse(function(x) return mls.ones{3} * x end, 2)"),
            "f must return one number (a one-element f32 tensor), got f32[3]"));
  CHECK(has(run_err(h, "mls.autodiff.forward(function(x) return mls.ones{1} end, 2)"),
            "f's result does not depend on its argument"));
  // The host is still usable after each refusal.
  run_ok(h, "ok = mls.autodiff.forward(f, 2).value");
  CHECK(std::abs(global_number(h, "ok") - 3.6371897073) < 1e-5);
}
