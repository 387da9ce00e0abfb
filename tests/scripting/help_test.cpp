// help(x) (scripting/help.h): entries for a few functions, modules and objects, searching, and
// the walk of the whole mls module that fails naming every function without an entry.
#include "scripting/help.h"

#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_string;
using mls::test::run_ok;

namespace {

// What help(<expr>) prints, captured by replacing print.
std::string help_of(lua::LuaHost& h, const std::string& expr) {
  run_ok(h, "local out = {}; local p = print; print = function(s) out[#out + 1] = s end; help(" +
                expr + "); print = p; captured = table.concat(out, '\\n')");
  return global_string(h, "captured");
}

bool has(const std::string& s, const std::string& part) {
  INFO(s);
  INFO(part);
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("help: every function of the mls module and every method of its objects has an entry",
          "[help]") {
  lua::LuaHost h(cpu::backend());
  const std::vector<std::string> missing = lua::undocumented(h.state());
  std::string names;
  for (const std::string& n : missing) names += n + "\n";
  INFO("functions with no help entry (add them to scripting/help_docs.cpp):\n" << names);
  CHECK(missing.empty());
  // The walk reaches deep names: a known function, a class method and a tensor method.
  lua_getglobal(h.state(), "mls");
  lua_getfield(h.state(), -1, "F");
  lua_getfield(h.state(), -1, "conv2d");
  CHECK(lua::function_name(h.state(), -1) == "mls.F.conv2d");
  lua_pop(h.state(), 3);
  // Every entry is complete.
  for (const lua::HelpEntry& e : lua::help_entries()) {
    INFO(e.name);
    CHECK(std::string(e.signature).size() > 0);
    CHECK(std::string(e.summary).size() > 0);
    CHECK(std::string(e.example).size() > 0);
  }
}

TEST_CASE("help: an undocumented function added to mls is named by the walk", "[help]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, "mls.nn.brand_new = function() end; mls.extra = {thing = function() end}");
  const std::vector<std::string> missing = lua::undocumented(h.state());
  CHECK(std::find(missing.begin(), missing.end(), "mls.nn.brand_new") != missing.end());
  CHECK(std::find(missing.begin(), missing.end(), "mls.extra") != missing.end());
  CHECK(std::find(missing.begin(), missing.end(), "mls.extra.thing") != missing.end());
}

TEST_CASE("help: functions show their signature, summary and example", "[help]") {
  lua::LuaHost h(cpu::backend());
  const std::string z = help_of(h, "mls.zeros");
  CHECK(z ==
        "mls.zeros(shape [, dtype])\n  a tensor of zeros; shape as a table {2, 3} or as "
        "integers\n  example: mls.zeros{2, 3}");
  CHECK(has(help_of(h, "mls.F.cross_entropy"), "label_smoothing"));
  CHECK(has(help_of(h, "mls.optim.SGD"), "momentum"));
  // A tensor method through the tensor, and the examples of the entries run.
  CHECK(has(help_of(h, "mls.ones{2}.sum"), "t:sum([axis | {axes} [, keepdim]])"));
  run_ok(h, "local x = mls.zeros{2, 3}; assert(x:numel() == 6)");
}

TEST_CASE("help: modules list their functions, objects their methods", "[help]") {
  lua::LuaHost h(cpu::backend());
  const std::string m = help_of(h, "mls");
  CHECK(has(m, "mls: the mlstudio module"));
  CHECK(has(m, "\n  mls.zeros(shape [, dtype])  -- a tensor of zeros"));
  CHECK(has(m, "\n  mls.nn  -- modules shaped like torch.nn"));
  CHECK_FALSE(has(m, "mls.F.linear"));  // one level only
  const std::string nn = help_of(h, "mls.nn");
  CHECK(has(nn, "nn.Linear(n_in, n_out"));
  CHECK(has(nn, "nn.Sequential(m1, m2, ...)"));
  const std::string t = help_of(h, "mls.randn{2}");
  CHECK(has(t, "a Tensor (mls.Tensor)"));
  CHECK(has(t, "t:matmul(b)  -- matrix product"));
  CHECK(has(t, "t:backward("));
  const std::string lin = help_of(h, "mls.nn.Linear(2, 3)");
  CHECK(has(lin, "nn.Linear(n_in, n_out"));
  CHECK(has(lin, "m:parameters()"));
  CHECK(has(help_of(h, "mls.nn.Sequential"), "seq:add(layer)"));
}

TEST_CASE("help: a word searches the entries; help() says how to use it", "[help]") {
  lua::LuaHost h(cpu::backend());
  const std::string s = help_of(h, "'softmax'");
  CHECK(has(s, "mls.softmax"));
  CHECK(has(s, "Tensor:log_softmax"));
  CHECK(has(s, "mls.nn.Softmax"));
  CHECK_FALSE(has(s, "mls.zeros"));
  CHECK(has(help_of(h, "'no-such-word'"), "no help entry"));
  CHECK(has(help_of(h, ""), "help(mls.zeros)"));
  CHECK(has(help_of(h, "'mls.nn.Linear'"), "nn.Linear(n_in, n_out"));
  CHECK(has(help_of(h, "function() end"), "not part of mls"));
}

TEST_CASE("help: exists in a sandboxed host too", "[help]") {
  lua::LuaHost h(cpu::backend(), mls::test::sandboxed("."));
  CHECK(has(help_of(h, "mls.ones"), "a tensor of ones"));
}
