// Undo per edit, not per keystroke: consecutive commands with one merge key (the source of
// one cell, typed) are one undo step (nodes/edit.h, kMergeIdle), on a clock the test moves.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/notebook_edit.h"

using namespace mls::nodes;
using namespace std::chrono_literals;

namespace {

// A project with two empty Lua cells, its history on a clock that moves only when told.
struct Typing {
  Document doc;
  UndoStack stack;
  std::chrono::steady_clock::time_point now{};

  Typing() {
    auto d =
        load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
    REQUIRE(d);
    doc = std::move(*d);
    REQUIRE(stack.push(make_add_cell(doc, 0, {.id = "a"}), doc));
    REQUIRE(stack.push(make_add_cell(doc, 1, {.id = "b"}), doc));
    stack.set_clock([this] { return now; });
  }
  // Types `text` into the cell a key at a time, `gap` between keys: one command per key,
  // as the editor pushes them.
  void type(const std::string& id, const std::string& text, std::chrono::milliseconds gap = 120ms) {
    std::string source = doc.notebook.find(id)->source;
    for (char ch : text) {
      now += gap;
      source += ch;
      REQUIRE(stack.push(make_set_cell_source(doc, id, source), doc));
    }
  }
  std::string source(const std::string& id) const { return doc.notebook.find(id)->source; }
};

}  // namespace

TEST_CASE("edit merge: keys typed into one cell undo in one step", "[notebook][edit]") {
  Typing t;
  const std::string before = serialize_document(t.doc);
  t.type("a", "x = 1");
  CHECK(t.source("a") == "x = 1");
  CHECK(t.stack.size() == 3);  // two added cells and one edit, not five
  CHECK(t.stack.undo_text() == "Edit cell a");
  REQUIRE(t.stack.undo(t.doc));
  CHECK(t.source("a").empty());
  CHECK(serialize_document(t.doc) == before);
  CHECK(t.stack.undo_text() == "Add cell b");
  REQUIRE(t.stack.redo(t.doc));
  CHECK(t.source("a") == "x = 1");
}

TEST_CASE("edit merge: edits of two cells are two steps", "[notebook][edit]") {
  Typing t;
  t.type("a", "x = 1");
  t.type("b", "y = x");
  CHECK(t.stack.size() == 4);
  REQUIRE(t.stack.undo(t.doc));
  CHECK(t.source("b").empty());
  CHECK(t.source("a") == "x = 1");
  REQUIRE(t.stack.undo(t.doc));
  CHECK(t.source("a").empty());
  // Back to a after b: a step of its own again.
  REQUIRE(t.stack.redo(t.doc));
  REQUIRE(t.stack.redo(t.doc));
  t.type("a", "0");
  CHECK(t.stack.size() == 5);
  REQUIRE(t.stack.undo(t.doc));
  CHECK(t.source("a") == "x = 1");
  CHECK(t.source("b") == "y = x");
}

TEST_CASE("edit merge: a pause, end_merge, an undo or a save start a new step",
          "[notebook][edit]") {
  Typing t;
  t.type("a", "x = 1");
  SECTION("a pause of kMergeIdle") {
    t.type("a", "0", kMergeIdle);
    CHECK(t.stack.size() == 4);
    REQUIRE(t.stack.undo(t.doc));
    CHECK(t.source("a") == "x = 1");
  }
  SECTION("a pause just under it still merges") {
    t.type("a", "0", kMergeIdle - 1ms);
    CHECK(t.stack.size() == 3);
  }
  SECTION("end_merge (the editor: focus left the cell)") {
    t.stack.end_merge();
    t.type("a", "0");
    CHECK(t.stack.size() == 4);
  }
  SECTION("an undo") {
    REQUIRE(t.stack.undo(t.doc));
    REQUIRE(t.stack.redo(t.doc));
    t.type("a", "0");
    CHECK(t.stack.size() == 4);
  }
  SECTION("a save: the saved state stays a step boundary") {
    t.stack.set_clean();
    t.type("a", "0");
    CHECK(t.stack.size() == 4);
    REQUIRE(t.stack.undo(t.doc));
    CHECK(t.stack.is_clean());
    CHECK(t.source("a") == "x = 1");
  }
  SECTION("another command between") {
    REQUIRE(t.stack.push(make_set_cell_on_demand(t.doc, "b", true), t.doc));
    t.type("a", "0");
    CHECK(t.stack.size() == 5);
  }
}

TEST_CASE("edit merge: typed and erased again, the step is gone and the state clean",
          "[notebook][edit]") {
  Typing t;
  t.stack.set_clean();
  t.type("a", "xy");
  CHECK_FALSE(t.stack.is_clean());
  t.now += 100ms;
  REQUIRE(t.stack.push(make_set_cell_source(t.doc, "a", "x"), t.doc));
  t.now += 100ms;
  REQUIRE(t.stack.push(make_set_cell_source(t.doc, "a", ""), t.doc));
  CHECK(t.stack.size() == 2);
  CHECK(t.stack.is_clean());
  CHECK(t.stack.undo_text() == "Add cell b");
}

TEST_CASE("edit merge: commands without a merge key never merge", "[edit]") {
  Typing t;
  REQUIRE(t.stack.push(make_move_node(t.doc, t.doc.nodes[0].id, {10, 10}), t.doc));
  REQUIRE(t.stack.push(make_move_node(t.doc, t.doc.nodes[0].id, {20, 10}), t.doc));
  CHECK(t.stack.size() == 4);
  // Through the history a script edits by: the same rule.
  OwnedHistory h(t.doc);
  h.stack().set_clock([&] { return t.now; });
  REQUIRE(h.push(make_set_cell_source(h.doc(), "a", "x")));
  REQUIRE(h.push(make_set_cell_source(h.doc(), "a", "xy")));
  h.end_merge();
  REQUIRE(h.push(make_set_cell_source(h.doc(), "a", "xyz")));
  CHECK(h.history() == std::vector<std::string>{"Edit cell a", "Edit cell a"});
}
