// mls.plot and mls.ui from Lua (scripting/notebook/plot_lib.cpp, ui_lib.cpp): figures and
// widgets collected in a cell's output, widget values from Runtime::widget_values, and the
// refusals of bad arguments.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scripting/runtime.h"
#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("mls.plot calls append figures to the cell output in order", "[notebook][plot]") {
  lua::LuaHost h(cpu::backend());
  lua::CellOutput out;
  h.runtime().cell_output = &out;
  run_ok(h, R"(
    mls.plot.line{x = {1, 2, 3}, y = mls.tensor({3, 2, 1}), title = "loss", xlabel = "step"}
    mls.plot.scatter{series = {{name = "a", y = {1, 2}}, {name = "b", x = {1, 2}, y = {2, 1}}}}
    mls.plot.hist{values = mls.tensor({1, 2, 2, 3, 3, 3}), bins = 3, title = "h"}
    mls.plot.image{mls.zeros({3, 1, 4, 4}), cols = 2, title = "imgs"}
    mls.plot.heatmap{{{1, 2}, {3, 4}}, title = "m"}
  )");
  REQUIRE(out.figures.size() == 5);
  CHECK(out.figures[0].title == "loss");
  CHECK(has(out.figures[0].svg, "<polyline"));
  CHECK(has(out.figures[0].svg, ">step</text>"));
  CHECK(out.figures[0].width == 640);
  CHECK(out.figures[0].height == 400);
  CHECK(has(out.figures[1].svg, "class=\"legend\""));
  CHECK(has(out.figures[1].svg, ">b</text>"));
  CHECK(out.figures[2].title == "h");
  CHECK(has(out.figures[2].svg, "class=\"bar\""));
  CHECK(out.figures[3].title == "imgs");
  // 3 images of 4x4 in 2 columns: 2 rows; pixel scale floor(560 / 8) = 70 clamped to 16.
  CHECK(out.figures[3].width == 4 + 2 * (64 + 4));
  CHECK(out.figures[3].height == 24 + 4 + 2 * (64 + 4));
  CHECK(has(out.figures[4].svg, "fill=\"#fde725\""));
  // Without a cell output nothing is collected, and nothing fails.
  h.runtime().cell_output = nullptr;
  run_ok(h, "mls.plot.line{y = {1, 2}}");
  CHECK(out.figures.size() == 5);
}

TEST_CASE("mls.plot writes file= through the sandbox", "[notebook][plot]") {
  test::TempDir dir("mls_plot_file");
  lua::LuaHost h(cpu::backend(), sandboxed(dir.str()));
  run_ok(h, "mls.plot.line{y = {1, 2, 4}, file = '" + dir.file("f.svg") + "'}");
  std::ifstream f(dir.file("f.svg"));
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(ss.str().rfind("<svg", 0) == 0);
  CHECK(has(run_err(h, "mls.plot.line{y = {1, 2}, file = '/etc/mls_plot.svg'}"), "mls.plot.line"));
  CHECK_FALSE(std::filesystem::exists("/etc/mls_plot.svg"));
}

TEST_CASE("mls.plot refuses bad shapes and empty data, naming the argument", "[notebook][plot]") {
  lua::LuaHost h(cpu::backend());
  CHECK(has(run_err(h, "mls.plot.line{y = mls.zeros({2, 3})}"),
            "mls.plot.line: y must be 1-D, got shape [2,3]"));
  CHECK(has(run_err(h, "mls.plot.line{x = {1, 2, 3}, y = {1, 2}}"), "x has 3 values and y 2"));
  CHECK(has(run_err(h, "mls.plot.line{y = {}}"), "mls.plot.line: y is empty"));
  CHECK(has(run_err(h, "mls.plot.line{title = 'x'}"), "mls.plot.line: y is missing"));
  CHECK(has(run_err(h, "mls.plot.scatter{y = {1, 'a'}}"), "y[2] is not a number"));
  CHECK(
      has(run_err(h, "mls.plot.heatmap{mls.zeros({4})}"), "the matrix must be 2-D, got shape [4]"));
  CHECK(has(run_err(h, "mls.plot.heatmap{{{1, 2}, {3}}}"), "row 2 has 1 values"));
  CHECK(has(run_err(h, "mls.plot.image{mls.zeros({2, 2, 3, 3})}"),
            "the image must be (H,W), (N,H,W), (N,1,H,W) or (N,3,H,W), got shape [2,2,3,3]"));
  CHECK(has(run_err(h, "mls.plot.image{mls.zeros({4})}"), "got shape [4]"));
  CHECK(has(run_err(h, "mls.plot.hist{values = {}}"), "mls.plot.hist: values is empty"));
  CHECK(has(run_err(h, "mls.plot.hist{values = {0/0}}"), "no finite value"));
  CHECK(has(run_err(h, "mls.plot.line{y = {1}, title = 3}"), "title must be a string"));
}

TEST_CASE("mls.ui widgets return their value, then Runtime::widget_values'", "[notebook][ui]") {
  lua::LuaHost h(cpu::backend());
  lua::CellOutput out;
  h.runtime().cell_output = &out;
  const char* code = R"(
    lr = mls.ui.slider("lr", {min = 0.001, max = 0.1, step = 0.001, value = 0.01, label = "learning rate"})
    act = mls.ui.select("act", {options = {"relu", "gelu"}, value = "relu"})
    flag = mls.ui.checkbox("flag", {value = true})
    n = mls.ui.button("go", {label = "Run"})
    ok = lr == 0.01 and act == "relu" and flag == true and n == 0
  )";
  run_ok(h, code);
  lua_getglobal(h.state(), "ok");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);
  REQUIRE(out.widgets.size() == 4);
  CHECK(out.widgets[0].kind == "slider");
  CHECK(out.widgets[0].label == "learning rate");
  CHECK(out.widgets[0].min == 0.001);
  CHECK(out.widgets[0].max == 0.1);
  CHECK(out.widgets[0].step == 0.001);
  CHECK(out.widgets[0].value == 0.01);
  CHECK(out.widgets[1].options == std::vector<std::string>{"relu", "gelu"});
  CHECK(out.widgets[2].value == true);
  CHECK(out.widgets[3].label == "Run");
  CHECK(out.widgets[3].value == 0);

  out = {};
  auto& wv = h.runtime().widget_values;
  wv["lr"] = 0.05;
  wv["act"] = "gelu";
  wv["flag"] = false;
  wv["go"] = 3;
  run_ok(h, code);
  CHECK(global_number(h, "lr") == 0.05);
  CHECK(global_number(h, "n") == 3);
  lua_getglobal(h.state(), "act");
  CHECK(std::string(lua_tostring(h.state(), -1)) == "gelu");
  lua_getglobal(h.state(), "flag");
  CHECK_FALSE(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 2);
  REQUIRE(out.widgets.size() == 4);
  CHECK(out.widgets[1].value == "gelu");

  // A value of the wrong type or not an option is ignored; a slider's is clamped.
  wv["lr"] = 5.0;
  wv["act"] = "tanh";
  wv["flag"] = "yes";
  run_ok(h, code);
  CHECK(global_number(h, "lr") == 0.1);
  lua_getglobal(h.state(), "act");
  CHECK(std::string(lua_tostring(h.state(), -1)) == "relu");
  lua_getglobal(h.state(), "flag");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 2);
}

TEST_CASE("mls.ui refuses bad specs", "[notebook][ui]") {
  lua::LuaHost h(cpu::backend());
  CHECK(has(run_err(h, "mls.ui.slider('a', {min = 1, max = 1})"),
            "mls.ui.slider: min (1.0) must be less than max (1.0)"));
  CHECK(has(run_err(h, "mls.ui.slider('a', {min = 0, max = 1, value = 2})"),
            "value 2.0 is outside [0.0, 1.0]"));
  CHECK(has(run_err(h, "mls.ui.slider('a', {step = -1})"), "step must be >= 0"));
  CHECK(has(run_err(h, "mls.ui.select('a', {options = {}})"), "mls.ui.select: options is empty"));
  CHECK(has(run_err(h, "mls.ui.select('a', {})"), "options must be a list of strings"));
  CHECK(has(run_err(h, "mls.ui.select('a', {options = {'x'}, value = 'y'})"),
            "value 'y' is not among the options"));
  CHECK(has(run_err(h, "mls.ui.checkbox('a', {value = 1})"), "value must be a boolean"));
  CHECK(has(run_err(h, "mls.ui.button()"), "bad argument #1"));
  // Defaults: a slider starts at min, a select at its first option.
  run_ok(
      h,
      "s = mls.ui.slider('s', {min = 2, max = 5}); o = mls.ui.select('o', {options = {'p', 'q'}})");
  CHECK(global_number(h, "s") == 2);
  lua_getglobal(h.state(), "o");
  CHECK(std::string(lua_tostring(h.state(), -1)) == "p");
  lua_pop(h.state(), 1);
}
