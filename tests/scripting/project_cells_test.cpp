// mls.project's notebook cells: p:cells(), p:add_cell, p:set_cell_source, p:remove_cell go
// through the document's undoable cell commands (nodes/notebook_edit.h).
#include "engine/cpu/cpu_backend.h"
#include "nodes/document.h"
#include "nodes/edit.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::global_string;
using mls::test::run_err;
using mls::test::run_ok;

TEST_CASE("mls.project cells: add, edit, list, remove and undo through the edit commands",
          "[lua][notebook]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local p = mls.project.open(")" MLS_SOURCE_DIR R"(/resources/examples/fashion-mnist-mlp.mls")
    before = p:text()
    a = p:add_cell{source = "x = 1"}
    b = p:add_cell{kind = "markdown", source = "# Title\n\ntext", at = 1}
    v = p:add_cell{kind = "view", view = "graph", id = "g"}
    p:set_cell_source(a, "x = 2\ny = x")
    local cells = p:cells()
    n = #cells
    order = cells[1].id .. " " .. cells[2].id .. " " .. cells[3].id
    src = cells[2].source
    kind1 = cells[1].kind
    view3 = cells[3].view
    ok, err = pcall(function() p:add_cell{kind = "view", view = "plot"} end)
    ok2, err2 = pcall(function() p:set_cell_source("nope", "x") end)
    p:remove_cell(b)
    after_remove = #p:cells()
    local hist = p:history()
    last = hist[#hist]
    for i = 1, 5 do p:undo() end
    same = p:text() == before
  )");
  CHECK(global_string(h, "a") == "cell1");
  CHECK(global_string(h, "b") == "cell2");
  CHECK(global_string(h, "v") == "g");
  CHECK(global_number(h, "n") == 3);
  CHECK(global_string(h, "order") == "cell2 cell1 g");
  CHECK(global_string(h, "src") == "x = 2\ny = x");
  CHECK(global_string(h, "kind1") == "markdown");
  CHECK(global_string(h, "view3") == "graph");
  CHECK_THAT(global_string(h, "err"), Catch::Contains("unknown view 'plot'"));
  CHECK_THAT(global_string(h, "err2"), Catch::Contains("no cell 'nope' in the notebook"));
  CHECK(global_number(h, "after_remove") == 2);
  CHECK(global_string(h, "last") == "Remove cell cell2");
  lua_getglobal(h.state(), "same");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);
  CHECK_THAT(run_err(h, R"(
    local p = mls.project.open(")" MLS_SOURCE_DIR R"(/resources/examples/fashion-mnist-mlp.mls")
    p:add_cell{kind = "python"})"),
             Catch::Contains("unknown kind 'python'"));
}
