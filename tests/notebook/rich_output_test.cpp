// A cell's returned values as rich outputs (scripting/notebook/rich_output.h): tensors as
// tables of their printed values with heatmaps and image grids, models and projects as
// summary tables, and the tables' round trip through P.outputs.json.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "engine/cpu/cpu_backend.h"
#include "nodes/document.h"
#include "scripting/notebook/outputs.h"
#include "scripting/notebook/rich_output.h"
#include "scripting/notebook/session.h"

using namespace mls;
using namespace mls::lua;
namespace fs = std::filesystem;

namespace {

nodes::Cell lua_cell(std::string id, std::string src) {
  nodes::Cell c;
  c.id = std::move(id);
  c.source = std::move(src);
  return c;
}

ScriptOptions options() {
  ScriptOptions o;
  o.sandbox = true;
  o.root = ".";
  o.db_path = ":memory:";
  return o;
}

// Runs one cell alone and returns its output.
CellOutput run_cell(const std::string& src) {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("c", src)});
  s.run_all();
  REQUIRE(s.output("c") != nullptr);
  INFO(s.output("c")->error);
  REQUIRE(s.output("c")->ok);
  return *s.output("c");
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

fs::path repo_file(const std::string& rel) {
  for (fs::path d = fs::current_path(); !d.empty(); d = d.parent_path()) {
    if (fs::exists(d / rel)) return d / rel;
    if (d == d.parent_path()) break;
  }
  return rel;
}

}  // namespace

TEST_CASE("A returned 2-D tensor is a table of its printed values and a heatmap", "[rich]") {
  const CellOutput out =
      run_cell("local m = mls.tensor{{1, 2.5, -3}, {4, 5, 6.25}}\nprint(m)\nreturn m");
  // What print shows, then the returned tensor named (its values are in the table).
  CHECK(out.text ==
        "tensor([[ 1.0000,  2.5000, -3.0000],\n"
        "        [ 4.0000,  5.0000,  6.2500]])\n"
        "tensor [2, 3] f32\n");
  REQUIRE(out.tables.size() == 1);
  const Table& t = out.tables[0];
  CHECK(t.title == "tensor [2, 3] f32");
  CHECK(t.shape == std::vector<int64_t>{2, 3});
  CHECK(t.columns == std::vector<std::string>{"0", "1", "2"});
  CHECK(t.row_labels == std::vector<std::string>{"0", "1"});
  CHECK(t.rows == std::vector<std::vector<std::string>>{{"1.0000", "2.5000", "-3.0000"},
                                                        {"4.0000", "5.0000", "6.2500"}});
  CHECK_FALSE(t.truncated);
  CHECK(t.total_rows == 2);
  CHECK(t.total_cols == 3);
  // A heatmap: one cell a value, the minimum (-3) viridis' first colour, the maximum its last.
  REQUIRE(out.figures.size() == 1);
  const std::string& svg = out.figures[0].svg;
  CHECK(count(svg, "class=\"cell\"") == 6);
  CHECK(has(svg, "fill=\"#440154\""));
  CHECK(has(svg, "fill=\"#fde725\""));
  CHECK(out.figures[0].title == "tensor [2, 3] f32");
  CHECK(out.figures[0].width > 0);
  CHECK(out.figures[0].height > 0);
}

TEST_CASE("A large returned tensor keeps its first 100 rows and 64 columns", "[rich]") {
  // 300 x 100 values 0 .. 29999: row r, column c holds r * 100 + c.
  const CellOutput out = run_cell("return mls.arange(0, 30000):float():reshape{300, 100}");
  REQUIRE(out.tables.size() == 1);
  const Table& t = out.tables[0];
  CHECK(t.truncated);
  CHECK(t.total_rows == 300);
  CHECK(t.total_cols == 100);
  REQUIRE(t.rows.size() == 100);
  REQUIRE(t.columns.size() == 64);
  CHECK(t.rows[0][0] == "0.0000");
  CHECK(t.rows[99][63] == "9963.0000");
  CHECK(t.rows[7][5] == "705.0000");
  CHECK(t.row_labels[99] == "99");
  // The heatmap averages blocks: 300 rows in blocks of 5, 100 columns in blocks of 2.
  REQUIRE(out.figures.size() == 1);
  CHECK(has(out.figures[0].title, "means of 5x2 blocks"));
  CHECK(count(out.figures[0].svg, "class=\"cell\"") == 60 * 50);
}

TEST_CASE("Returned 1-D and 3-D tensors: a value column, and rows labelled by index", "[rich]") {
  const CellOutput out = run_cell(
      "local v = mls.tensor{0.5, 0.00001, 2}\nprint(v)\n"
      "return v, mls.arange(0, 24):long():reshape{2, 3, 4}");
  REQUIRE(out.tables.size() == 2);
  CHECK(out.text ==
        "tensor([5.0000e-01, 1.0000e-05, 2.0000e+00])\n"
        "tensor [3] f32\ttensor [2, 3, 4] i64\n");
  const Table& v = out.tables[0];
  CHECK(v.columns == std::vector<std::string>{"value"});
  // The print's scientific format (a magnitude under 1e-4): the same in the table.
  CHECK(v.rows ==
        std::vector<std::vector<std::string>>{{"5.0000e-01"}, {"1.0000e-05"}, {"2.0000e+00"}});
  const Table& m = out.tables[1];
  CHECK(m.title == "value 2: tensor [2, 3, 4] i64");
  CHECK(m.total_rows == 6);
  CHECK(m.total_cols == 4);
  CHECK(m.row_labels ==
        std::vector<std::string>{"[0,0]", "[0,1]", "[0,2]", "[1,0]", "[1,1]", "[1,2]"});
  CHECK(m.rows[4] == std::vector<std::string>{"16", "17", "18", "19"});
  // (2,3,4) is a batch of two 3x4 images: one image grid, no heatmap.
  REQUIRE(out.figures.size() == 1);
  CHECK(has(out.figures[0].svg, "<rect"));
}

TEST_CASE("A returned image batch shows its first 16 images as a grid", "[rich]") {
  const CellOutput out = run_cell("return mls.arange(0, 20 * 16):float():reshape{20, 1, 4, 4}");
  REQUIRE(out.figures.size() == 1);
  CHECK(has(out.figures[0].title, "the first 16 of 20"));
  const std::string& svg = out.figures[0].svg;
  // One <g> per image in render_images' grid.
  CHECK(count(svg, "<g ") == 16);
  REQUIRE(out.tables.size() == 1);
  CHECK(out.tables[0].total_rows == 20 * 4);
  CHECK(out.tables[0].row_labels[5] == "[1,0,1]");  // (20,1,4) rows: 5 = 1 * 4 + 1
}

TEST_CASE("A scalar, a string or a plain table returns text only", "[rich]") {
  const CellOutput out = run_cell("return mls.tensor{3}:sum(), 'x', {a = 1}");
  CHECK(out.tables.empty());
  CHECK(out.figures.empty());
  CHECK(has(out.text, "x"));
}

TEST_CASE("A returned nn module is summarised: layers, types, parameter counts, total", "[rich]") {
  const CellOutput out = run_cell(
      "local nn = mls.nn\n"
      "return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))");
  REQUIRE(out.tables.size() == 1);
  const Table& t = out.tables[0];
  CHECK(t.title == "model summary: Sequential");
  CHECK(t.columns == std::vector<std::string>{"layer", "type", "parameter shapes", "parameters"});
  REQUIRE(t.rows.size() == 4);
  // Linear(784, 128): 784 * 128 weights + 128 biases = 100480; Linear(128, 10): 1290.
  CHECK(t.rows[0][1] == "Linear");
  CHECK(t.rows[0][3] == "100480");
  CHECK(has(t.rows[0][2], "[784, 128]"));
  CHECK(t.rows[1][1] == "ReLU");
  CHECK(t.rows[1][3] == "0");
  CHECK(t.rows[2][3] == "1290");
  CHECK(t.rows[3] == std::vector<std::string>{"total", "", "", "101770"});
  CHECK(out.figures.empty());
}

TEST_CASE("A custom module's nested layers are named by their path", "[rich]") {
  const CellOutput out = run_cell(
      "local nn = mls.nn\n"
      "local Net = nn.Module:extend('Net')\n"
      "function Net:init()\n"
      "  self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh())\n"
      "  self.head = nn.Linear(8, 3, {bias = false})\n"
      "end\n"
      "return Net()");
  REQUIRE(out.tables.size() == 1);
  const Table& t = out.tables[0];
  CHECK(t.title == "model summary: Net");
  REQUIRE(t.rows.size() == 4);
  CHECK(t.rows[0][0] == "body.1");
  CHECK(t.rows[0][3] == "40");  // 4 * 8 + 8
  CHECK(t.rows[1][0] == "body.2");
  CHECK(t.rows[2][0] == "head");
  CHECK(t.rows[2][3] == "24");  // 8 * 3, no bias
  CHECK(t.rows[3][3] == "64");
}

TEST_CASE("A returned project is summarised from the editor's analysis of its graph", "[rich]") {
  const fs::path mlp = repo_file("resources/examples/fashion-mnist-mlp.mls");
  if (!fs::exists("/usr/share/datasets/fashion-mnist")) {
    WARN("Fashion-MNIST is not installed: the project's shapes cannot be checked");
    return;
  }
  NotebookSession s(cpu::backend(), {.sandbox = false, .root = ".", .db_path = ":memory:"});
  s.set_cells({lua_cell("p", "return mls.project.open('" + mlp.string() + "')")});
  s.run_all();
  REQUIRE(s.output("p") != nullptr);
  INFO(s.output("p")->error);
  REQUIRE(s.output("p")->ok);
  REQUIRE(s.output("p")->tables.size() == 1);
  // Its text names it (not an address), so `notebook check` reads the same on every run.
  CHECK(has(s.output("p")->text, "project 'Fashion-MNIST MLP' ("));
  const Table& t = s.output("p")->tables[0];
  INFO(t.note);
  CHECK(t.note.empty());
  CHECK(t.columns == std::vector<std::string>{"layer", "type", "output shape", "parameters"});
  std::map<std::string, std::vector<std::string>> by_node;
  for (const auto& r : t.rows) by_node[r[0]] = r;
  // fc1: Linear(784, 256) on the flattened 28x28 images: 784 * 256 + 256 = 200960.
  REQUIRE(by_node.count("fc1"));
  CHECK(by_node["fc1"][1] == "mls.linear");
  CHECK(by_node["fc1"][2] == "[N, 256]");
  CHECK(by_node["fc1"][3] == "200960");
  CHECK(t.rows.back()[0] == "total");
  int64_t sum = 0;
  for (size_t i = 0; i + 1 < t.rows.size(); ++i) sum += std::stoll(t.rows[i][3]);
  CHECK(t.rows.back()[3] == std::to_string(sum));

  // And its graph drawn: a box a node (id, type, output shape), a curve a link, top down.
  REQUIRE(s.output("p")->figures.size() == 1);
  const Figure& g = s.output("p")->figures[0];
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = g.svg.find(what); at != std::string::npos; at = g.svg.find(what, at + 1)) ++n;
    return n;
  };
  auto doc = mls::nodes::load_document(mlp.string());
  REQUIRE(doc);
  CHECK(count("<g class=\"node\">") == doc->nodes.size());
  CHECK(count("<path ") == doc->links.size());
  CHECK(has(g.svg, ">fc1</text>"));
  CHECK(has(g.svg, ">[N,256]</text>"));
  // The input is above fc1, fc1 above the loss (the y of their boxes).
  auto box_y = [&](const std::string& id) {
    const size_t label = g.svg.find(">" + id + "</text>");
    const size_t rect = g.svg.rfind("<rect x=", label);
    const size_t y = g.svg.find("y=\"", rect) + 3;
    return std::stod(g.svg.substr(y, g.svg.find('"', y) - y));
  };
  CHECK(box_y(doc->nodes.front().id) < box_y("fc1"));
  CHECK(box_y("fc1") < box_y("loss"));
}

TEST_CASE("Tables round-trip through P.outputs.json, a file without them still reads",
          "[rich][outputs]") {
  CellOutput o = run_cell("return mls.tensor{{1, 2}, {3, 4}}, mls.nn.Linear(3, 2)");
  REQUIRE(o.tables.size() == 2);
  o.cell_id = "c";
  const fs::path dir = fs::temp_directory_path() / ("mls-rich-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string project = (dir / "p.mls").string();
  REQUIRE(save_outputs(project, {{"c", o}}));
  auto back = load_outputs(project);
  REQUIRE(back);
  REQUIRE(back->has_value());
  CHECK((**back).at("c") == o);
  CHECK((**back).at("c").tables[1].rows.back()[3] == "8");  // 3 * 2 + 2

  // Written before tables existed: no "tables" key.
  {
    std::ofstream f(dir / "p.outputs.json");
    f << R"({"format": 1, "cells": {"c": {"text": "hi\n", "ok": true, "hash": "h"}}})";
  }
  back = load_outputs(project);
  REQUIRE(back);
  CHECK((**back).at("c").tables.empty());
  CHECK((**back).at("c").text == "hi\n");

  // A row of the wrong width is refused, naming it.
  auto j = cell_output_to_json(o);
  j["tables"][0]["rows"][1].push_back("5");
  auto bad = cell_output_from_json(j, "p.outputs.json: /cells/c");
  REQUIRE_FALSE(bad);
  CHECK(has(bad.error().message, "/cells/c/tables/0/rows/1"));
  fs::remove_all(dir);
}

TEST_CASE("A cell ending in a bare expression shows it, as if it returned it", "[rich]") {
  NotebookSession s(cpu::backend(), options());
  s.set_cells({lua_cell("def", "m = mls.tensor{{1, 2}, {3, 4}}"),
               lua_cell("show", "-- the matrix\nm\n\n-- done\n"),
               lua_cell("calc", "local k = 3\n  k * 2  -- six"), lua_cell("bad", "x = = 1\ny"),
               lua_cell("call", "print('a')")});
  // Read through the analysis like any cell: "show" reads m, so it runs after "def".
  CHECK(s.reads("show") == std::set<std::string>{"m"});
  s.run_all();
  const CellOutput* show = s.output("show");
  REQUIRE(show != nullptr);
  INFO(show->error);
  REQUIRE(show->ok);
  CHECK(show->text == "tensor [2, 2] f32\n");
  REQUIRE(show->tables.size() == 1);
  CHECK(show->tables[0].rows[1] == std::vector<std::string>{"3.0000", "4.0000"});
  REQUIRE(s.output("calc") != nullptr);
  CHECK(s.output("calc")->text == "6\n");
  // A real syntax error keeps its own message and line.
  const CellOutput* bad = s.output("bad");
  REQUIRE(bad != nullptr);
  CHECK_FALSE(bad->ok);
  CHECK(bad->error_line == 1);
  CHECK(has(bad->error, "unexpected symbol near '='"));
  CHECK(s.output("call")->text == "a\n");
}
