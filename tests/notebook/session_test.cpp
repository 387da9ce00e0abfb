// The notebook session (scripting/notebook/session.h): cells run in one Lua state, in
// dependency order, reactively or lazily.
#include <catch2/catch.hpp>
#include <lua.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/cpu/cpu_backend.h"
#include "scripting/notebook/session.h"
#include "scripting/runtime.h"

using namespace mls;
using namespace mls::lua;
using Ids = std::vector<std::string>;

namespace {

nodes::Cell lua_cell(std::string id, std::string src, bool on_demand = false) {
  nodes::Cell c;
  c.id = std::move(id);
  c.source = std::move(src);
  c.on_demand = on_demand;
  return c;
}

ScriptOptions options() {
  ScriptOptions o;
  o.sandbox = true;
  o.root = ".";
  o.db_path = ":memory:";
  return o;
}

double global_number(NotebookSession& s, const char* name) {
  lua_State* L = s.host().state();
  lua_getglobal(L, name);
  const double v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : -1e300;
  const bool nil = lua_isnil(L, -1);
  lua_pop(L, 1);
  return nil ? -2e300 : v;
}

// a -> b -> d, a -> c; e alone; a markdown cell between them.
std::vector<nodes::Cell> chain() {
  nodes::Cell md;
  md.id = "intro";
  md.kind = nodes::CellKind::Markdown;
  md.source = "# x = y";
  return {lua_cell("a", "x = 1"),     md,
          lua_cell("b", "y = x + 1"), lua_cell("c", "z = x * 10"),
          lua_cell("d", "w = y * 2"), lua_cell("e", "v = 5")};
}

}  // namespace

TEST_CASE("Notebook session: run_all runs the Lua cells in dependency order", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("use", "y = x + 1"), lua_cell("def", "x = 41")});
  CHECK(s.reads("use") == std::set<std::string>{"x"});
  CHECK(s.stale("use"));
  CHECK(s.run_all() == Ids{"def", "use"});
  CHECK(global_number(s, "y") == 42);
  CHECK_FALSE(s.stale("use"));
  REQUIRE(s.output("use") != nullptr);
  CHECK(s.output("use")->ok);
}

TEST_CASE("Notebook session: editing a cell re-runs exactly its dependents, in order",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells(chain());
  CHECK(s.run_all() == Ids{"a", "b", "c", "d", "e"});
  const std::string hash_d = s.output("d")->hash;
  s.set_cell(lua_cell("a", "x = 2"), 0);
  CHECK(s.stale("a"));
  CHECK(s.stale("d"));
  CHECK_FALSE(s.stale("e"));
  CHECK(s.run("a") == Ids{"a", "b", "c", "d"});
  CHECK(global_number(s, "w") == 6);
  CHECK(global_number(s, "z") == 20);
  // d's code is the same, its input changed: another hash.
  CHECK(s.output("d")->hash != hash_d);
  CHECK(s.current_hash("d") == s.output("d")->hash);
  CHECK(s.run("b") == Ids{"b", "d"});
  CHECK(s.run("e") == Ids{"e"});
}

TEST_CASE("Notebook session: lazy mode marks the dependents stale instead", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells(chain());
  s.run_all();
  s.set_lazy(true);
  s.set_cell(lua_cell("a", "x = 3"), 0);
  CHECK(s.run("a") == Ids{"a"});
  CHECK_FALSE(s.stale("a"));
  CHECK(s.stale("b"));
  CHECK(s.stale("c"));
  CHECK(s.stale("d"));
  CHECK_FALSE(s.stale("e"));
  CHECK(global_number(s, "w") == 4);  // not re-run yet
  CHECK(s.run_stale() == Ids{"b", "c", "d"});
  CHECK(global_number(s, "w") == 8);
}

TEST_CASE("Notebook session: an on-demand cell is marked stale, not re-run, and so are its readers",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "x = 1"), lua_cell("slow", "y = x * 100", true),
               lua_cell("b", "z = y + 1"), lua_cell("c", "q = x + 1")});
  CHECK(s.run_all() == Ids{"a", "slow", "b", "c"});  // run all is asking
  CHECK(s.run("a") == Ids{"a", "c"});
  CHECK(s.stale("slow"));
  CHECK(s.stale("b"));
  CHECK(global_number(s, "z") == 101);
  CHECK(s.run("slow") == Ids{"slow", "b"});
  CHECK_FALSE(s.stale("b"));
}

TEST_CASE("Notebook session: print and returned values are the cell's text", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("p", "print('hello', 3)\nt = {a = 1}\nreturn 7, 'ok'")});
  CHECK(s.run("p") == Ids{"p"});
  const CellOutput* o = s.output("p");
  REQUIRE(o != nullptr);
  CHECK(o->ok);
  CHECK(o->text == "hello\t3\n7\tok\n");
  CHECK(o->cell_id == "p");
  CHECK(o->seconds >= 0);
  // print is the host's own again after the cell.
  lua_State* L = s.host().state();
  lua_getglobal(L, "print");
  CHECK(lua_isfunction(L, -1));
  lua_pop(L, 1);
  lua_getglobal(L, "__mls_cell");
  CHECK(lua_isnil(L, -1));
  lua_pop(L, 1);
}

TEST_CASE("Notebook session: a failing cell has its error line, and its dependents are not run",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "x = 1\nlocal t = nil\ny = t.field\n"), lua_cell("b", "z = y"),
               lua_cell("syn", "q = = 1")});
  CHECK(s.run_all() == Ids{"a", "syn"});
  const CellOutput* o = s.output("a");
  REQUIRE(o != nullptr);
  CHECK_FALSE(o->ok);
  CHECK(o->error_line == 3);
  CHECK(o->error.find("cell a:3:") != std::string::npos);
  CHECK(s.stale("b"));
  CHECK(s.output("b") == nullptr);
  CHECK_FALSE(s.output("syn")->ok);
  CHECK(s.output("syn")->error_line == 1);
  CHECK(s.output("syn")->error.rfind("cell syn:1:", 0) == 0);
}

TEST_CASE("Notebook session: a name defined twice and a cycle are refused with the reason",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "x = 1"), lua_cell("b", "x = 2"), lua_cell("c", "p = q"),
               lua_cell("d", "q = p")});
  REQUIRE(s.problems().size() == 2);
  CHECK(s.problems()[0].cells == Ids{"a", "b"});
  CHECK(s.problems()[1].cells == Ids{"c", "d"});
  CHECK(s.run("a") == Ids{"a"});
  CHECK_FALSE(s.output("a")->ok);
  CHECK(s.output("a")->error.find("'x' is defined by 2 cells: a and b") != std::string::npos);
  // c is refused, so d (which reads from c) is not run after it.
  CHECK(s.run("c") == Ids{"c"});
  CHECK(s.output("c")->error.find("cells c -> d -> c form a cycle") != std::string::npos);
  CHECK(s.run("d") == Ids{"d"});
  CHECK_FALSE(s.output("d")->ok);
  CHECK(global_number(s, "x") == -2e300);  // never assigned
}

TEST_CASE("Notebook session: an in-place change of another cell's table is a problem on both",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "cfg = {lr = 0.1, layers = {4, 8}}"),
               lua_cell("b", "cfg.layers[2] = 16"), lua_cell("c", "n = #cfg.layers")});
  s.run_all();
  REQUIRE(s.problems().size() == 1);
  CHECK(s.problems()[0].cells == Ids{"a", "b"});
  CHECK(s.problems()[0].reason.rfind(
            "cell b changed the table 'cfg' that cell a defines, in place:", 0) == 0);
  // A reader that does not change it is no problem; b edited not to: the problem goes.
  s.set_cell(lua_cell("b", "m = cfg.layers[2]"), 1);
  CHECK(s.problems().empty());
  s.run("b");
  CHECK(s.problems().empty());
}

TEST_CASE("Notebook session: removing a cell removes its names", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells(chain());
  s.run_all();
  CHECK(global_number(s, "v") == 5);
  s.remove_cell("e");
  CHECK(global_number(s, "v") == -2e300);
  CHECK(s.output("e") == nullptr);
  s.remove_cell("a");
  CHECK(global_number(s, "x") == -2e300);
  CHECK(s.stale("b"));
  CHECK(s.stale("d"));
  // A Lua cell turned into Markdown is no Lua cell any more: its names go too.
  auto cells = chain();
  cells.erase(cells.begin());                 // a
  cells.pop_back();                           // e
  cells[3].kind = nodes::CellKind::Markdown;  // d
  s.set_cells(cells);
  CHECK(global_number(s, "w") == -2e300);
  CHECK(s.output("d") == nullptr);
  CHECK(s.writes("d").empty());
  CHECK_FALSE(s.stale("d"));
}

TEST_CASE("Notebook session: restart gives a fresh state, keeps outputs, marks every cell stale",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells(chain());
  s.run_all();
  s.restart();
  CHECK(global_number(s, "x") == -2e300);
  CHECK(s.output("a") != nullptr);
  CHECK(s.stale("a"));
  CHECK(s.stale("e"));
  CHECK(s.run_stale() == Ids{"a", "b", "c", "d", "e"});
  CHECK(global_number(s, "w") == 4);
}

TEST_CASE("Notebook session: a widget re-runs its cell and that cell's readers only",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("w", "lr = 0.1"), lua_cell("train", "steps = lr * 10"),
               lua_cell("other", "k = 1"), lua_cell("more", "j = k + 1")});
  s.run_all();
  CHECK(s.set_widget("lr", 0.5) == Ids{"w", "train"});
  CHECK(s.host().runtime().widget_values.at("lr") == 0.5);
  CHECK(s.set_widget("nobody", 1).empty());
}

TEST_CASE("Notebook session: mls.project readers are found and re-run when the project changes",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("g", "proj = mls.project"), lua_cell("h", "n = proj and 1 or 0"),
               lua_cell("i", "u = 1")});
  CHECK(s.reads_project("g"));
  CHECK_FALSE(s.reads_project("h"));
  s.run_all();
  CHECK(s.mark_project_changed() == Ids{"g", "h"});
  s.set_lazy(true);
  CHECK(s.mark_project_changed().empty());
  CHECK(s.stale("g"));
  CHECK(s.stale("h"));
  CHECK_FALSE(s.stale("i"));
}

TEST_CASE("Notebook session: an interrupt from another thread stops while true do end",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  std::atomic<bool> stop{false};
  s.set_interrupt(&stop);
  s.set_cells({lua_cell("loop", "while true do end"), lua_cell("after", "y = 1")});
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ran = s.run_all();
  t.join();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(ran == Ids{"loop"});
  REQUIRE(s.output("loop") != nullptr);
  CHECK_FALSE(s.output("loop")->ok);
  CHECK(s.output("loop")->error.find("interrupted") != std::string::npos);
  CHECK(s.stale("after"));
  s.set_interrupt(nullptr);
}

TEST_CASE("Notebook session: run_to runs what a cell needs that is stale, then it", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells(chain());
  CHECK(s.run_to("d") == Ids{"a", "b", "d"});
  CHECK(global_number(s, "w") == 4);
  CHECK(s.stale("c"));
  // b is edited: only b is stale among d's inputs.
  s.set_cell(lua_cell("b", "y = x + 2"), 2);
  CHECK(s.run_to("d") == Ids{"b", "d"});
  CHECK(global_number(s, "w") == 6);
}

TEST_CASE("Notebook session: an edit that stops defining a name removes it", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "old = 1\nkept = 2"), lua_cell("b", "r = old")});
  s.run_all();
  CHECK(global_number(s, "old") == 1);
  s.set_cell(lua_cell("a", "new = 1\nkept = 3"), 0);
  CHECK(global_number(s, "old") == -2e300);
  CHECK(global_number(s, "kept") == 2);  // still defined by a: kept until a runs again
  CHECK(s.stale("b"));
  CHECK(s.run("a") == Ids{"a"});  // b no longer reads anything a defines
  CHECK(global_number(s, "kept") == 3);
}

TEST_CASE("Notebook session: the hash covers the code, the inputs and a widget's value",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("w", "lr = 0.1"), lua_cell("t", "s = lr * 2")});
  s.run_all();
  const std::string w0 = s.output("w")->hash, t0 = s.output("t")->hash;
  CHECK(w0.size() == 16);
  CHECK(s.current_hash("t") == t0);
  s.set_widget("lr", 0.7);
  CHECK(s.output("w")->hash != w0);
  CHECK(s.output("t")->hash != t0);
  // The same code and inputs again: the same hashes.
  s.set_widget("lr", 0.1);
  s.host().runtime().widget_values.erase("lr");
  s.run("w");
  CHECK(s.output("w")->hash == w0);
  CHECK(s.output("t")->hash == t0);
}

TEST_CASE("Notebook session: an error raised in another cell's function marks this cell's line",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("lib", "function boom()\n  error('bad input')\nend"),
               lua_cell("use", "local a = 1\n\nboom()")});
  CHECK(s.run_all() == Ids{"lib", "use"});
  const CellOutput* o = s.output("use");
  REQUIRE(o != nullptr);
  CHECK_FALSE(o->ok);
  CHECK(o->error.rfind("cell lib:2: bad input", 0) == 0);
  CHECK(o->error.find("cell use:3:") != std::string::npos);  // the traceback
  CHECK(o->error_line == 3);
}

TEST_CASE("Notebook session: tensors in a watched table count by identity", "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "params = {w = mls.ones{2, 2}}"), lua_cell("b", "y = params.w + 1"),
               lua_cell("c", "params.w = params.w * 2")});
  s.set_lazy(true);  // each cell when asked
  s.run("a");
  s.run("b");  // a new tensor from w: params is unchanged
  CHECK(s.problems().empty());
  CHECK(s.output("b")->ok);
  s.run("c");  // another tensor in params.w: a change
  REQUIRE(s.problems().size() == 1);
  CHECK(s.problems()[0].cells == Ids{"a", "c"});
  CHECK(s.problems()[0].reason.find("'params'") != std::string::npos);
}

TEST_CASE("Notebook session: the hash of a cell that reads the project covers the model",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("p", "local p = mls.project\nn = p and 1 or 0"), lua_cell("q", "m = 2")});
  s.set_project_text("model A");
  const std::string p0 = s.current_hash("p"), q0 = s.current_hash("q");
  // Another model: the project's reader has another hash (a saved output of it is stale),
  // a cell that does not read the project keeps its own.
  s.set_project_text("model B");
  CHECK(s.current_hash("p") != p0);
  CHECK(s.current_hash("q") == q0);
  s.set_project_text("model A");
  CHECK(s.current_hash("p") == p0);
}

TEST_CASE("Notebook session: a kept print or return hook writes only into the running cell",
          "[notebook]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("a", "keep = print\nkeep_ret = rawget(_G, '__mls_cell_return')"),
               lua_cell("b", "keep('into b')\nif keep_ret then keep_ret('returned into b') end\nlocal n = keep and 1")});
  s.run_all();
  REQUIRE(s.output("a"));
  REQUIRE(s.output("b"));
  CHECK(s.output("a")->ok);
  CHECK(s.output("b")->ok);
  CHECK(s.output("a")->text.empty());
  CHECK(s.output("b")->text.find("into b") != std::string::npos);
  // Between cells there is no output to write: nothing happens (the outputs are unchanged).
  const std::string before = s.output("b")->text;
  REQUIRE(s.host().run_string("keep('between cells')\nif keep_ret then keep_ret('x') end"));
  CHECK(s.output("b")->text == before);
}
