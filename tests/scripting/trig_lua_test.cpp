// sin and cos from Lua (mls.sin, t:sin(), ...): values against the float64 library, and
// eager autograd through them against the hand derivative of the autodiff lab's example,
// f(x) = x^2 sin x at x = 2.
#include <cmath>

#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::run_err;
using mls::test::run_ok;

TEST_CASE("mls.sin, mls.cos and their methods match the float64 library over several periods",
          "[lua][trig]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local xs = {-9.5, -3.1, -1, 0, 0.5, 1.5707963, 2, 3.3, 7.9, 100.25}
    local t = mls.tensor(xs)
    local s, c = mls.sin(t):tolist(), t:cos():tolist()
    local s2 = t:sin():tolist()
    worst_sin, worst_cos, methods_differ = 0, 0, 0
    for i, x in ipairs(xs) do
      worst_sin = math.max(worst_sin, math.abs(s[i] - math.sin(x)))
      worst_cos = math.max(worst_cos, math.abs(c[i] - math.cos(x)))
      methods_differ = methods_differ + (s[i] == s2[i] and 0 or 1)
    end
  )");
  // f32 inputs: x is rounded to f32 first (|x| <= 100: within 4e-6 / 2), then one ulp or two.
  CHECK(global_number(h, "worst_sin") < 4e-6);
  CHECK(global_number(h, "worst_cos") < 4e-6);
  CHECK(global_number(h, "methods_differ") == 0);
  CHECK(run_err(h, "mls.sin(2)").find("tensor expected") != std::string::npos);
}

TEST_CASE("eager autograd: d/dx [x^2 sin x] at 2 is 2x sin x + x^2 cos x", "[lua][trig]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local x = mls.tensor{2}:requires_grad()
    local y = x * x * mls.sin(x)
    y:sum():backward()
    value, grad = y:item(), x.grad:item()
    local z = mls.tensor{0.5, -1.25}:requires_grad()
    z:cos():sum():backward()
    dcos1, dcos2 = table.unpack(z.grad:tolist())
  )");
  const double x = 2.0;
  const double want = 2 * x * std::sin(x) + x * x * std::cos(x);  // 1.9726023611...
  CHECK(std::abs(want - 1.9726023611) < 1e-9);
  CHECK(std::abs(global_number(h, "value") - x * x * std::sin(x)) < 1e-5);
  CHECK(std::abs(global_number(h, "grad") - want) < 1e-5);
  CHECK(std::abs(global_number(h, "dcos1") + std::sin(0.5)) < 1e-6);
  CHECK(std::abs(global_number(h, "dcos2") + std::sin(-1.25)) < 1e-6);
}
