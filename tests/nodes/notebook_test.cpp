// The notebook section of a .mls (nodes/notebook.h) and its edit commands
// (nodes/notebook_edit.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/notebook.h"
#include "nodes/notebook_edit.h"

using namespace mls::nodes;
using nlohmann::json;

namespace {

const std::string kExamples = std::string(MLS_SOURCE_DIR) + "/resources/examples/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The MLP example with `notebook` as its notebook section.
std::string mlp_with(const json& notebook) {
  json root = json::parse(read_text(kExamples + "fashion-mnist-mlp.mls"));
  root["notebook"] = notebook;
  return root.dump();
}

Document mlp() {
  auto doc = load_document(kExamples + "fashion-mnist-mlp.mls");
  REQUIRE(doc);
  return std::move(*doc);
}

std::string error_of(const mls::Result<Document>& r) {
  REQUIRE_FALSE(r);
  return r.error().message;
}

}  // namespace

TEST_CASE("notebook: sources saved as lines round-trip, a string source is accepted",
          "[notebook]") {
  json nb = {
      {"lazy", true},
      {"cells",
       {{{"id", "intro"}, {"kind", "markdown"}, {"source", {"# A tour", "", "Text"}}},
        {{"id", "data"}, {"kind", "lua"}, {"source", "x = 1\ny = x + 1"}, {"on_demand", true}},
        {{"id", "v1"}, {"kind", "view"}, {"view", "graph"}}}}};
  auto doc = parse_document(mlp_with(nb), "P.mls");
  REQUIRE(doc);
  REQUIRE(doc->notebook.cells.size() == 3);
  CHECK(doc->notebook.lazy);
  CHECK(doc->notebook.present);
  CHECK(doc->notebook.cells[0].source == "# A tour\n\nText");
  CHECK(doc->notebook.cells[0].kind == CellKind::Markdown);
  CHECK(doc->notebook.cells[1].source == "x = 1\ny = x + 1");
  CHECK(doc->notebook.cells[1].on_demand);
  CHECK(doc->notebook.cells[2].view == "graph");
  CHECK(*doc->notebook.index_of("v1") == 2);
  CHECK(doc->notebook.find("nope") == nullptr);

  const std::string saved = serialize_document(*doc);
  json j = json::parse(saved).at("notebook");
  CHECK(j.at("cells").at(1).at("source") == json{"x = 1", "y = x + 1"});
  CHECK_FALSE(j.at("cells").at(0).contains("on_demand"));
  CHECK_FALSE(j.at("cells").at(2).contains("source"));
  CHECK(saved.find("\"lazy\": true,\n    \"cells\"") != std::string::npos);
  auto again = parse_document(saved, "P.mls");
  REQUIRE(again);
  CHECK(again->notebook == doc->notebook);
  CHECK(serialize_document(*again) == saved);
}

TEST_CASE("notebook: every bundled example keeps its notebook section as written", "[notebook]") {
  int n = 0, with_cells = 0;
  for (const auto& e : std::filesystem::directory_iterator(kExamples)) {
    if (e.path().extension() != ".mls") continue;
    INFO(e.path().string());
    const json file = json::parse(read_text(e.path().string()));
    auto doc = parse_document(file.dump(), e.path().string(), GraphCheck::Draft);
    REQUIRE(doc);
    const std::string saved = serialize_document(*doc);
    const json out = json::parse(saved);
    CHECK(out.contains("notebook") == file.contains("notebook"));
    if (file.contains("notebook")) CHECK(out.at("notebook") == file.at("notebook"));
    with_cells += !doc->notebook.cells.empty();
    auto again = parse_document(saved, e.path().string(), GraphCheck::Draft);
    REQUIRE(again);
    CHECK(serialize_document(*again) == saved);
    ++n;
  }
  CHECK(n >= 9);
  CHECK(with_cells >= 3);
}

TEST_CASE("notebook: errors name the JSON pointer", "[notebook]") {
  auto lua = [](const std::string& id) {
    return json{{"id", id}, {"kind", "lua"}, {"source", "x = 1"}};
  };
  CHECK(error_of(parse_document(mlp_with({{"cells", {lua("a"), lua("b"), lua("a")}}}), "P.mls")) ==
        "P.mls: /notebook/cells/2/id: duplicate cell id 'a'");
  CHECK(error_of(parse_document(
            mlp_with({{"cells", {lua("a"), {{"id", "b"}, {"kind", "python"}}}}}), "P.mls")) ==
        "P.mls: /notebook/cells/1/kind: unknown cell kind \"python\" (expected 'lua', "
        "'markdown', 'view')");
  json extra = lua("a");
  extra["colour"] = "red";
  CHECK(error_of(parse_document(mlp_with({{"cells", {extra}}}), "P.mls")) ==
        "P.mls: /notebook/cells/0/colour: unknown key 'colour' (expected 'id', 'kind', "
        "'source', 'view', 'on_demand', 'role', 'starter')");
  CHECK(
      error_of(parse_document(mlp_with({{"cells", {{{"id", "v"}, {"kind", "view"}}}}}), "P.mls")) ==
      "P.mls: /notebook/cells/0: a view cell needs a \"view\" ('graph', 'step', 'dashboard', "
      "'memory')");
  CHECK(error_of(parse_document(mlp_with({{"cells", 3}}), "P.mls")) ==
        "P.mls: /notebook/cells: must be an array");
  CHECK(error_of(parse_document(mlp_with({{"cells", {lua("1x")}}}), "P.mls")) ==
        "P.mls: /notebook/cells/0/id: must be a string matching [A-Za-z_][A-Za-z0-9_.-]*");
}

TEST_CASE("notebook: Salvage leaves a bad cell out and keeps the rest", "[notebook]") {
  json nb = {{"cells",
              {{{"id", "a"}, {"kind", "lua"}, {"source", "x = 1"}},
               {{"id", "b"}, {"kind", "python"}},
               {{"id", "c"}, {"kind", "markdown"}, {"source", "# c"}}}}};
  auto doc = parse_document(mlp_with(nb), "P.mls", GraphCheck::Salvage);
  REQUIRE(doc);
  REQUIRE(doc->notebook.cells.size() == 2);
  CHECK(doc->notebook.cells[0].id == "a");
  CHECK(doc->notebook.cells[1].id == "c");
  bool warned = false;
  for (const auto& w : doc->warnings)
    warned = warned || w.rfind("P.mls: /notebook/cells/1/kind: unknown cell kind", 0) == 0;
  CHECK(warned);
}

TEST_CASE("notebook: every command undoes and redoes byte for byte", "[notebook]") {
  Document doc = mlp();
  const std::string original = serialize_document(doc);
  UndoStack stack;
  std::vector<std::string> states = {original};
  auto push = [&](EditResult cmd) {
    REQUIRE(cmd);
    REQUIRE(stack.push(std::move(cmd), doc));
    states.push_back(serialize_document(doc));
  };
  push(make_add_cell(doc, 0, {.kind = CellKind::Markdown, .source = "# Tour\n\nText"}));
  CHECK(stack.undo_text() == "Add cell cell1");
  push(make_add_cell(doc, 99, {.id = "data", .source = "x = 1"}));
  push(make_add_cell(doc, 1, {.id = "v", .kind = CellKind::View, .view = "graph"}));
  CHECK(doc.notebook.cells[1].id == "v");
  CHECK(doc.notebook.cells[2].id == "data");
  push(make_set_cell_source(doc, "data", "x = 2"));
  CHECK(stack.undo_text() == "Edit cell data");
  push(make_set_cell_on_demand(doc, "data", true));
  push(make_set_cell_view(doc, "v", "memory"));
  push(make_set_notebook_lazy(doc, true));
  push(make_move_cell(doc, "data", 0));
  CHECK(doc.notebook.cells[0].id == "data");
  push(make_remove_cell(doc, "v"));
  CHECK(doc.notebook.cells.size() == 2);
  CHECK(doc.notebook.lazy);
  CHECK(doc.notebook.cells[0].on_demand);
  CHECK(doc.notebook.cells[0].source == "x = 2");

  for (size_t i = states.size() - 1; i > 0; --i) {
    REQUIRE(stack.undo(doc));
    CHECK(serialize_document(doc) == states[i - 1]);
  }
  CHECK(serialize_document(doc) == original);
  for (size_t i = 1; i < states.size(); ++i) {
    REQUIRE(stack.redo(doc));
    CHECK(serialize_document(doc) == states[i]);
  }
}

TEST_CASE("notebook: refused commands say why and change nothing", "[notebook]") {
  Document doc = mlp();
  UndoStack stack;
  REQUIRE(stack.push(make_add_cell(doc, 0, {.id = "a", .source = "x = 1"}), doc));
  REQUIRE(
      stack.push(make_add_cell(doc, 1, {.id = "v", .kind = CellKind::View, .view = "step"}), doc));
  const std::string before = serialize_document(doc);
  auto refused = [&](EditResult r) {
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(refused(make_add_cell(doc, 0, {.id = "a"})) == "a cell 'a' already exists");
  CHECK(refused(make_add_cell(doc, 0, {.id = "9a"})) ==
        "invalid cell id '9a' (expected [A-Za-z_][A-Za-z0-9_.-]*)");
  CHECK(refused(make_add_cell(doc, 0, {.id = "w", .kind = CellKind::View, .view = "plot"})) ==
        "view cell 'w': unknown view 'plot' (expected 'graph', 'step', 'dashboard', 'memory')");
  CHECK(refused(make_add_cell(doc, 0, {.id = "m", .kind = CellKind::Markdown, .view = "graph"})) ==
        "markdown cell 'm' cannot have a view (only a view cell has one)");
  CHECK(refused(make_remove_cell(doc, "zz")) == "no cell 'zz' in the notebook");
  CHECK(refused(make_move_cell(doc, "zz", 0)) == "no cell 'zz' in the notebook");
  CHECK(refused(make_set_cell_source(doc, "v", "x")) == "view cell 'v' has no source to edit");
  CHECK(refused(make_set_cell_view(doc, "a", "graph")) ==
        "lua cell 'a' cannot show a view (only a view cell can)");
  CHECK(refused(make_set_cell_view(doc, "v", "nope")) ==
        "view cell 'v': unknown view 'nope' (expected 'graph', 'step', 'dashboard', 'memory')");

  // apply() checks again: a command made before the cell was removed is refused.
  auto stale = make_set_cell_source(doc, "a", "y = 2");
  REQUIRE(stale);
  REQUIRE(stack.push(make_remove_cell(doc, "a"), doc));
  const std::string removed = serialize_document(doc);
  auto r = (*stale)->apply(doc);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "no cell 'a' in the notebook");
  CHECK(serialize_document(doc) == removed);
  REQUIRE(stack.undo(doc));
  CHECK(serialize_document(doc) == before);
}

TEST_CASE("notebook: a cell moves to each position, fresh ids take the first free", "[notebook]") {
  Document doc = mlp();
  CHECK(fresh_cell_id(doc) == "cell1");
  UndoStack stack;
  for (int i = 0; i < 3; ++i) REQUIRE(stack.push(make_add_cell(doc, 99, {}), doc));
  CHECK(fresh_cell_id(doc) == "cell4");
  REQUIRE(stack.push(make_remove_cell(doc, "cell2"), doc));
  CHECK(fresh_cell_id(doc) == "cell2");
  REQUIRE(stack.undo(doc));
  REQUIRE(stack.push(make_add_cell(doc, 99, {.id = "d"}), doc));
  // cell1 cell2 cell3 d
  auto ids = [&] {
    std::string out;
    for (const Cell& c : doc.notebook.cells) out += c.id + " ";
    return out;
  };
  const std::vector<std::string> expected = {"cell2 cell1 cell3 d ", "cell1 cell2 cell3 d ",
                                             "cell1 cell3 cell2 d ", "cell1 cell3 d cell2 ",
                                             "cell1 cell3 d cell2 "};
  for (size_t to = 0; to < expected.size(); ++to) {
    const std::string before = serialize_document(doc);
    REQUIRE(stack.push(make_move_cell(doc, "cell2", to), doc));
    CHECK(ids() == expected[to]);
    REQUIRE(stack.undo(doc));
    CHECK(serialize_document(doc) == before);
  }
}

TEST_CASE("notebook: a project without the section gets it with a cell and loses it on undo",
          "[notebook]") {
  auto doc = load_document(kExamples + "fashion-mnist-cnn.mls");
  REQUIRE(doc);
  REQUIRE_FALSE(doc->notebook.present);
  const std::string before = serialize_document(*doc);
  CHECK(before.find("\"notebook\"") == std::string::npos);
  UndoStack stack;
  REQUIRE(stack.push(make_set_notebook_lazy(*doc, true), *doc));
  REQUIRE(stack.push(make_add_cell(*doc, 0, {.source = "x = 1"}), *doc));
  const json saved = json::parse(serialize_document(*doc)).at("notebook");
  CHECK(saved == json::parse(R"({"lazy": true, "cells": [{"id": "cell1", "kind": "lua",
                                 "source": ["x = 1"]}]})"));
  REQUIRE(stack.undo(*doc));
  REQUIRE(stack.undo(*doc));
  CHECK(serialize_document(*doc) == before);
}

TEST_CASE("model_text: the graph, dataset and training count, the layout and cells do not",
          "[notebook]") {
  auto doc = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc);
  const std::string base = model_text(*doc);
  Document moved = *doc;
  moved.layout = nlohmann::json::object();
  moved.notebook.cells.push_back({.id = "c", .source = "x = 1"});
  moved.name = "renamed";
  CHECK(model_text(moved) == base);
  Document trained = *doc;
  trained.training.epochs += 1;
  CHECK(model_text(trained) != base);
  Document edited = *doc;
  edited.links.pop_back();
  CHECK(model_text(edited) != base);
}
