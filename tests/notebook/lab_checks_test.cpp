// Check cells (scripting/notebook/lab_checks.h): the `lab` table exists only for them, they
// call the libraries as they were before any cell ran, and their reports become goals.
#include <catch2/catch.hpp>
#include <lua.hpp>

#include "engine/cpu/cpu_backend.h"
#include "scripting/notebook/session.h"

using namespace mls;
using namespace mls::lua;

namespace {

nodes::Cell cell(std::string id, std::string src, nodes::CellRole role = nodes::CellRole::Free) {
  nodes::Cell c;
  c.id = std::move(id);
  c.source = std::move(src);
  c.role = role;
  return c;
}
constexpr auto kCheck = nodes::CellRole::Check;

ScriptOptions options() {
  ScriptOptions o;
  o.sandbox = true;
  o.root = ".";
  o.db_path = ":memory:";
  return o;
}

nodes::LabSpec spec() {
  nodes::LabSpec l;
  l.present = true;
  l.goals = {{"value", "f(2) = 8", false}, {"deriv", "f'(2) = 12", false},
             {"shape", "the shape is 2x3", false}, {"secret", "hidden", true}};
  return l;
}

const GoalState& goal(const std::vector<GoalState>& gs, const std::string& id) {
  for (const auto& g : gs)
    if (g.id == id) return g;
  FAIL("no goal " << id);
  return gs.front();
}

}  // namespace

TEST_CASE("lab checks: reports become goals, unreported goals say why", "[notebook][lab]") {
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  std::vector<std::string> streamed;
  s.on_goal = [&](const GoalState& g) { streamed.push_back(g.id); };
  s.set_cells({cell("answer", "function f(x) return x * x * x end\nshape = {2, 3}"),
               cell("c1",
                    "lab.near('value', f(2), 8, 1e-12)\n"
                    "lab.equal('shape', shape, {2, 3})\n"
                    "lab.at_least('deriv', 11, 12)\n"
                    "lab.at_most('deriv', 11, 12)",
                    kCheck),
               cell("c2", "lab.check('secret', f(1) == 1)\nerror('the check broke here')", kCheck)});
  s.run_all();
  const auto g = s.lab_goals();
  REQUIRE(g.size() == 4);
  CHECK(goal(g, "value").passed);
  CHECK(goal(g, "value").message == "got 8, want 8 ± 1e-12");
  CHECK(goal(g, "shape").passed);
  CHECK(goal(g, "shape").message == "got {2, 3}");
  // Reported twice, failed once: failed, with the failing report's words.
  CHECK_FALSE(goal(g, "deriv").passed);
  CHECK(goal(g, "deriv").message == "got 11, want ≥ 12");
  // c2 reported it, then stopped with an error: failed (helper U: it might have stopped
  // before a failing report).
  CHECK_FALSE(goal(g, "secret").passed);
  CHECK(goal(g, "secret").message.find("check cell 'c2' stopped with an error") == 0);
  CHECK(streamed == std::vector<std::string>{"value", "shape", "deriv", "deriv", "secret"});
  // A check cell that fails still fails its output, naming its line.
  REQUIRE(s.output("c2"));
  CHECK_FALSE(s.output("c2")->ok);
  CHECK(s.output("c2")->error.find("cell c2:2:") != std::string::npos);

  // An unreported goal: "not checked", naming the check that failed first.
  s.set_cell(cell("c2", "error('broken before reporting')", kCheck), 2);
  s.run_checks(true);
  const auto g2 = s.lab_goals();
  CHECK_FALSE(goal(g2, "secret").reported);
  CHECK_FALSE(goal(g2, "secret").passed);
  CHECK(goal(g2, "secret").message.find("not checked: check cell 'c2' failed") == 0);
}

TEST_CASE("lab checks: a submission cannot reach lab or change what the checks call",
          "[notebook][lab]") {
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("probe", "had_lab = rawget(_G, 'lab') ~= nil\n"
                    "ok_call = pcall(function() rawget(_G, 'lab').check('value', true) end)"),
      cell("cheat",
           "lab = {near = function() return true end, check = function() end}\n"
           "math.abs = function() return 0 end\n"
           "string.rep = function() return 'forged' end\n"
           "mls.tensor = function() error('sabotaged') end\n"
           "function f(x) return 0 end"),
      cell("c1",
           "lab.near('value', f(2), 8, 0.5)\n"
           "lab.check('deriv', math.abs(-3) == 3 and ('ab'):rep(2) == 'abab')\n"
           "lab.check('shape', mls.tensor{{1, 2, 3}, {4, 5, 6}}:shape()[2] == 3)",
           kCheck),
  });
  s.run_all();
  lua_State* L = s.host().state();
  lua_getglobal(L, "had_lab");
  CHECK_FALSE(lua_toboolean(L, -1));
  lua_getglobal(L, "ok_call");
  CHECK_FALSE(lua_toboolean(L, -1));
  lua_pop(L, 2);
  const auto g = s.lab_goals();
  CHECK_FALSE(goal(g, "value").passed);  // the real lab.near: f(2) = 0 is not 8
  CHECK(goal(g, "value").message == "got 0, want 8 ± 0.5");
  CHECK(goal(g, "deriv").passed);  // the checks' math.abs and string.rep are the originals
  CHECK(goal(g, "shape").passed);  // ... and mls.tensor
  // After the checks, the student's own world is as the student left it.
  REQUIRE(s.host().run_string("forged = ('ab'):rep(2)"));
  lua_getglobal(L, "forged");
  CHECK(std::string(lua_tostring(L, -1)) == "forged");
  lua_pop(L, 1);
}

TEST_CASE("lab checks: values must be plain and goals must exist", "[notebook][lab]") {
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("liar", "liar = setmetatable({}, {__sub = function() return 0 end, __le = function() return true end})"),
      cell("c1", "lab.near('value', liar, 8, 1)", kCheck),
      cell("c2", "lab.check('nope', true)", kCheck),
      cell("c3", "lab.check('deriv', 1)", kCheck),
      cell("c4", "lab.near('shape', mls.tensor{8}, 8, 1)", kCheck),
  });
  s.run_all();
  CHECK(s.output("c1")->error.find("lab.near: the value must be a number, got table") != std::string::npos);
  CHECK(s.output("c2")->error.find("no goal 'nope' in this lab (its goals: value, deriv, shape, secret)") != std::string::npos);
  CHECK(s.output("c3")->error.find("lab.check: the second argument must be true or false") != std::string::npos);
  CHECK(s.output("c4")->error.find("pass t:item()") != std::string::npos);
  for (const auto& g : s.lab_goals()) CHECK_FALSE(g.passed);
}

TEST_CASE("lab checks: Check my work runs the visible checks again, fresh", "[notebook][lab]") {
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({cell("answer", "y = 7"), cell("c1", "lab.near('value', y, 8, 0)", kCheck),
               cell("h1", "lab.check('secret', true)", nodes::CellRole::HiddenCheck)});
  s.run_checks();
  CHECK_FALSE(goal(s.lab_goals(), "value").passed);
  CHECK_FALSE(goal(s.lab_goals(), "secret").reported);  // hidden: not run
  s.set_cell(cell("answer", "y = 8"), 0);
  s.run_checks();
  CHECK(goal(s.lab_goals(), "value").passed);
  // Restart keeps the lab; the copy is taken again from the fresh state.
  s.restart();
  s.run_checks(true);
  CHECK(goal(s.lab_goals(), "value").passed);
  CHECK(goal(s.lab_goals(), "secret").passed);
}

TEST_CASE("lab checks: a goal whose check never ran names the cell that failed", "[notebook][lab]") {
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({cell("answer", "y = nil + 1"), cell("c1", "lab.near('value', y, 8, 0)", kCheck)});
  s.run_all();
  const auto goals = s.lab_goals();
  const GoalState& g = goal(goals, "value");
  CHECK_FALSE(g.reported);
  INFO(g.message);
  CHECK(g.message.rfind("not checked (cell 'answer' failed: cell answer:1: attempt to perform arithmetic", 0) == 0);
}

// Red team (helper U): what a hostile submission tried, each a hole found and closed.

TEST_CASE("lab checks: code run during a check cannot rewrite the checks' string library",
          "[notebook][lab]") {
  // Strings' metatable is shared by every string; during a check its __index is the checks'
  // copy of `string`. A finaliser that runs then (or a student function the check calls)
  // used to reach that copy through getmetatable(""), and every later check used the forgery.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("cheat",
           "local original = string\n"
           "local function poison()\n"
           "  local mt = getmetatable('')\n"
           "  if type(mt) == 'table' and mt.__index ~= original then\n"
           "    mt.__index.upper = function() return 'FORGED' end\n"
           "  end\n"
           "end\n"
           "function f(x) poison() return 0 end\n"
           "got_mt = getmetatable('')"),
      cell("c1", "lab.near('value', f(2), 8, 0.5)", kCheck),
      cell("c2", "lab.equal('shape', ('abc'):upper(), 'ABC')", kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK_FALSE(goal(g, "value").passed);
  CHECK(goal(g, "shape").passed);
  CHECK(goal(g, "shape").message == "got \"ABC\"");
  lua_State* L = s.host().state();
  lua_getglobal(L, "got_mt");
  CHECK_FALSE(lua_istable(L, -1));  // the metatable is not handed out
  lua_pop(L, 1);
  // Strings still have their methods in the student's world.
  REQUIRE(s.host().run_string("up = ('ab'):upper()"));
  lua_getglobal(L, "up");
  CHECK(std::string(lua_tostring(L, -1)) == "AB");
  lua_pop(L, 1);
}

TEST_CASE("lab checks: a check cell that stops with an error fails the goals it reported",
          "[notebook][lab]") {
  // The README's "a goal reported more than once passes only if every report passed": a
  // student function that answers the first call right and raises on the second used to
  // keep the first report's pass.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  std::vector<std::pair<std::string, bool>> streamed;
  s.on_goal = [&](const GoalState& g) { streamed.emplace_back(g.id, g.passed); };
  s.set_cells({
      cell("answer",
           "calls = 0\nfunction f(x) calls = calls + 1\n"
           "  if calls > 1 then error('stop here') end\n  return 8 end"),
      cell("c1",
           "lab.near('value', f(2), 8, 1e-9)\n"
           "lab.near('value', f(3), 27, 1e-9)",
           kCheck),
      cell("c2", "lab.equal('shape', 1, 1)", kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK_FALSE(goal(g, "value").passed);
  CHECK(goal(g, "value").reported);
  CHECK(goal(g, "value").message.find("check cell 'c1' stopped with an error after reporting: ") ==
        0);
  CHECK(goal(g, "value").message.find("stop here") != std::string::npos);
  CHECK(goal(g, "shape").passed);
  // Reports leave the session when their cell ends: a grader that kills the process in the
  // middle of a cell has heard nothing from that cell.
  CHECK(streamed == std::vector<std::pair<std::string, bool>>{{"value", false}, {"shape", true}});
}

TEST_CASE(
    "lab checks: a locked cell's globals are the ones the checks read, made with the "
    "original libraries",
    "[notebook][lab]") {
  // The tensors lab: a locked cell makes seq, a check compares the student's batch_first
  // with it. A student cell that ran first replaced mls.arange (seq came out zeros), and a
  // student function the check called replaced seq itself (rawset: no second definer).
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("poison", "local zeros = mls.zeros\nmls.arange = function(n) return zeros{n} end"),
      cell("setup", "seq = mls.arange(6):float():reshape{3, 2}\nlimit = 6",
           nodes::CellRole::Locked),
      cell("answer",
           "batch_first = mls.zeros{2, 3}\n"
           "function f(x) rawset(_G, 'limit', 0) return 8 end"),
      cell("c1",
           "lab.check('shape', (batch_first - seq:transpose(1, 2)):abs():max():item() == 0)\n"
           "lab.near('value', f(2), 8, 0)\n"
           "lab.at_most('deriv', 3, limit)",
           kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK(goal(g, "value").passed);
  CHECK_FALSE(goal(g, "shape").passed);  // seq is 0..5 for the check: zeros are wrong
  CHECK(goal(g, "deriv").passed);        // limit is still 6 for the check
  CHECK(goal(g, "deriv").message == "got 3, want ≤ 6");
  // The student's world has what the student made: the locked cell's seq (from the real
  // arange) and the limit f set.
  lua_State* L = s.host().state();
  REQUIRE(s.host().run_string("seq_sum = seq:sum():item()"));
  lua_getglobal(L, "seq_sum");
  CHECK(lua_tonumber(L, -1) == 15);
  lua_getglobal(L, "limit");
  CHECK(lua_tonumber(L, -1) == 0);
  lua_pop(L, 2);
}

TEST_CASE("lab checks: a metatable on _G cannot wrap a check cell in pcall", "[notebook][lab]") {
  // The session handed each cell's chunk over through a global: a __newindex on _G got the
  // check's chunk and stored it wrapped in pcall, so a check that stopped with an error
  // ended "ok" and kept the reports made before the error.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("hook",
           "setmetatable(_G, {__newindex = function(t, k, v)\n"
           "  if type(v) == 'function' and k:sub(1, 6) == '__mls_' then\n"
           "    local real = v\n"
           "    v = function(...) local ok, r = pcall(real, ...) return r end\n"
           "  end\n"
           "  rawset(t, k, v)\n"
           "end})"),
      cell("answer",
           "calls = 0\nfunction f(x) calls = calls + 1\n"
           "  if calls > 1 then error('stop here') end\n  return 8 end"),
      cell("c1", "lab.near('value', f(2), 8, 1e-9)\nlab.near('value', f(3), 27, 1e-9)", kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK_FALSE(goal(g, "value").passed);
  CHECK(goal(g, "value").message.find("stopped with an error") != std::string::npos);
  REQUIRE(s.output("c1"));
  CHECK_FALSE(s.output("c1")->ok);
}

TEST_CASE(
    "lab checks: a check cell's chunk cannot be taken and run again inside another "
    "check",
    "[notebook][lab]") {
  // The chunk sat in a global while its cell ran: f, called by c1, took it and raised (c1
  // reported nothing); g, called by c2, ran it again under pcall with f right once, and
  // c2's clean end committed c1's pass.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("answer",
           "calls = 0\nstolen = nil\n"
           "function f(x)\n"
           "  if not stolen then stolen = rawget(_G, '__mls_cell') error('taken') end\n"
           "  calls = calls + 1\n"
           "  if calls > 1 then error('stop here') end\n"
           "  return 8\n"
           "end\n"
           "function g() if stolen then pcall(stolen) end return 1 end"),
      cell("c1", "lab.near('value', f(2), 8, 1e-9)\nlab.near('value', f(3), 27, 1e-9)", kCheck),
      cell("c2", "lab.equal('shape', g(), 1)", kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK(goal(g, "shape").passed);
  CHECK_FALSE(goal(g, "value").passed);
  CHECK(goal(g, "value").message.find("not checked: check cell 'c1' failed") == 0);
}

TEST_CASE("lab checks: mls.nn is the checks' own", "[notebook][lab]") {
  // mls.nn is Lua: the copy of the globals shared its classes' metatables (mls.nn.Linear's
  // __index is the original mls.nn.Module), and its functions read the student's globals
  // (pairs) and the mls table they were loaded with (mls.F). Module.num_parameters replaced
  // in an answer cell answered the checks' models too.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("cheat",
           "getmetatable(mls.nn.Linear).__index.num_parameters = function() return 7 end\n"
           "mls.nn.Module.parameters = function() return {} end\n"
           "local real_pairs = pairs\n"
           "pairs = function(t) return real_pairs({}) end\n"
           "mls.F.linear = function() error('sabotaged') end\n"
           "mine = mls.nn.Linear(3, 2):num_parameters()"),
      cell("c1",
           "local m = mls.nn.Linear(3, 2)\n"
           "lab.equal('value', m:num_parameters(), 8)\n"
           "lab.equal('shape', #m:parameters(), 2)\n"
           "lab.equal('deriv', m(mls.ones{1, 3}):shape(), {1, 2})",
           kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK(goal(g, "value").passed);
  CHECK(goal(g, "shape").passed);
  CHECK(goal(g, "deriv").passed);
  lua_State* L = s.host().state();
  lua_getglobal(L, "mine");
  CHECK(lua_tointeger(L, -1) == 7);  // the student's world keeps its change
  lua_pop(L, 1);
}

TEST_CASE("lab checks: lab.equal compares strings and numbers exactly", "[notebook][lab]") {
  // lab.equal compared text: strings were quoted without escapes, so the one-element array
  // {'relu", "tanh'} equalled {"relu", "tanh"}, and numbers were written with 10 digits, so
  // 12345678904 equalled 12345678901.
  NotebookSession s(cpu::backend(), options());
  s.set_lab(spec());
  s.set_cells({
      cell("answer", "names = {'relu\", \"tanh'}\ncount = 12345678904"),
      cell("c1",
           "lab.equal('value', names, {'relu', 'tanh'})\n"
           "lab.equal('deriv', count, 12345678901)\n"
           "lab.equal('shape', {2, 3.0, 'a\\\\\"b'}, {2.0, 3, 'a\\\\\"b'})",
           kCheck),
  });
  s.run_all();
  const auto g = s.lab_goals();
  CHECK_FALSE(goal(g, "value").passed);
  CHECK_FALSE(goal(g, "deriv").passed);
  CHECK(goal(g, "deriv").message == "got 12345678904, want 12345678901");
  CHECK(goal(g, "shape").passed);  // 2 and 2.0 are equal, and so are equal strings
}
