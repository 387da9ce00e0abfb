// Labs in the document (nodes/lab.h): the "lab" section, cell roles, locked and solution
// nodes; the student's copy; locks enforced by the edit commands; what the grader compares
// and runs.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/lab.h"
#include "nodes/lab_edit.h"
#include "nodes/notebook_edit.h"

using namespace mls::nodes;
using nlohmann::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The MLP example as a lab: fc1 and the loss locked, fc2 a solution node, four cells.
json lab_json() {
  json root = json::parse(read_text(std::string(MLS_SOURCE_DIR) +
                                    "/resources/examples/fashion-mnist-mlp.mls"));
  for (auto& n : root["model"]["nodes"]) {
    if (n["id"] == "fc1" || n["id"] == "loss") n["locked"] = true;
    if (n["id"] == "fc2") n["solution"] = true;
  }
  root["lab"] = {{"title", "MLP lab"},
                 {"goals",
                  {{{"id", "acc"}, {"text", "test accuracy >= 0.8"}},
                   {{"id", "secret"}, {"text", "hidden"}, {"hidden", true}}}},
                 {"time_limit_s", 30}};
  root["notebook"] = {
      {"cells",
       {{{"id", "intro"}, {"kind", "markdown"}, {"role", "locked"}, {"source", {"# Lab"}}},
        {{"id", "setup"}, {"kind", "lua"}, {"role", "locked"}, {"source", {"x0 = 2"}}},
        {{"id", "q1"},
         {"kind", "lua"},
         {"role", "answer"},
         {"source", {"y = x0 * 2"}},
         {"starter", {"y = 0 -- your code"}}},
        {{"id", "free"}, {"kind", "lua"}, {"source", {"z = 1"}}},
        {{"id", "c1"}, {"kind", "lua"}, {"role", "check"}, {"source", {"lab.near('acc', y, 4, 0)"}}},
        {{"id", "h1"}, {"kind", "lua"}, {"role", "hidden-check"}, {"source", {"lab.check('secret', true)"}}}}}};
  return root;
}

Document lab() {
  auto d = parse_document(lab_json().dump(), "lab.mls");
  REQUIRE(d);
  return std::move(*d);
}

}  // namespace

TEST_CASE("lab: the section, roles and node marks load and save unchanged", "[lab]") {
  Document d = lab();
  REQUIRE(d.lab.present);
  CHECK(d.lab.title == "MLP lab");
  REQUIRE(d.lab.goals.size() == 2);
  CHECK(d.lab.goals[1].hidden);
  CHECK(d.lab.time_limit_s == 30);
  CHECK(d.lab.memory_mb == 2048);
  CHECK(d.notebook.cells[2].role == CellRole::Answer);
  CHECK(d.notebook.cells[2].starter == "y = 0 -- your code");
  CHECK(d.notebook.cells[5].role == CellRole::HiddenCheck);
  CHECK(d.nodes[*find_node(d, "fc1")].locked);
  CHECK(d.nodes[*find_node(d, "fc2")].solution);
  auto again = parse_document(serialize_document(d), "again.mls");
  REQUIRE(again);
  CHECK(*again == d);
  CHECK(serialize_document(*again) == serialize_document(d));
  // The marks are not the model: a run of the lab and of the plain example train the same.
  auto plain = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(plain);
  CHECK(model_text(d) == model_text(*plain));
}

TEST_CASE("lab: bad sections are refused naming the place", "[lab]") {
  auto refused = [](json root, const std::string& where) {
    auto d = parse_document(root.dump(), "l.mls");
    REQUIRE_FALSE(d);
    INFO(d.error().message);
    CHECK(d.error().message.find(where) != std::string::npos);
  };
  json r = lab_json();
  r["lab"]["goals"][1]["id"] = "acc";
  refused(r, "/lab/goals/1/id: duplicate goal id 'acc'");
  r = lab_json();
  r["lab"]["goals"][0].erase("text");
  refused(r, "/lab/goals/0/text");
  r = lab_json();
  r["lab"]["time_limit_s"] = -1;
  refused(r, "/lab/time_limit_s");
  r = lab_json();
  r["lab"]["grade"] = 1;
  refused(r, "/lab/grade: unknown key 'grade'");
  r = lab_json();
  r["notebook"]["cells"][1]["role"] = "teacher";
  refused(r, "/notebook/cells/1/role: unknown role \"teacher\"");
  r = lab_json();
  r["notebook"]["cells"][0]["role"] = "answer";
  refused(r, "a markdown cell can only be 'locked'");
  r = lab_json();
  r["notebook"]["cells"][1]["starter"] = {"x"};
  refused(r, "/notebook/cells/1/starter: only an answer cell has a starter");
  r = lab_json();
  r["model"]["nodes"][0]["locked"] = "yes";
  refused(r, "/model/nodes/0/locked: must be true or false");
}

TEST_CASE("lab pack: starters, no hidden checks or goals, no solution nodes", "[lab]") {
  Document d = lab();
  auto s = pack_student(d);
  REQUIRE(s);
  CHECK(s->lab.student);
  REQUIRE(s->lab.goals.size() == 1);
  CHECK(s->lab.goals[0].id == "acc");
  CHECK(s->notebook.cells.size() == 5);
  CHECK_FALSE(s->notebook.find("h1"));
  CHECK(s->notebook.find("q1")->source == "y = 0 -- your code");
  CHECK_FALSE(find_node(*s, "fc2"));
  for (const LinkDoc& l : s->links) {
    CHECK(l.from_node != "fc2");
    CHECK(l.to_node != "fc2");
  }
  CHECK_FALSE(s->layout.contains("fc2"));
  // The student's graph is a draft now (fc2 is the student's to add): it saves and loads.
  auto loaded = parse_document(serialize_document(*s), "s.mls", GraphCheck::Draft);
  REQUIRE(loaded);
  CHECK(loaded->lab.student);
  // Packing twice, or a project that is not a lab, is refused.
  CHECK_FALSE(pack_student(*s));
  Document plain = d;
  plain.lab = LabSpec{};
  CHECK_FALSE(pack_student(plain));
}

TEST_CASE("lab: a student's copy refuses edits of locked cells and nodes", "[lab]") {
  Document s = *pack_student(lab());
  auto refused = [&](EditResult r, const std::string& words) {
    REQUIRE_FALSE(r);
    INFO(r.error().message);
    CHECK(r.error().message.find(words) != std::string::npos);
  };
  refused(make_set_cell_source(s, "setup", "x0 = 3"), "cell 'setup' is locked by the lab (locked): it cannot be edited");
  refused(make_set_cell_source(s, "c1", "lab.check('acc', true)"), "locked by the lab (check)");
  refused(make_remove_cell(s, "setup"), "cannot be removed");
  refused(make_remove_cell(s, "q1"), "an answer cell of the lab: it cannot be removed");
  refused(make_move_cell(s, "intro", 3), "cannot be moved");
  refused(make_set_cell_role(s, "setup", CellRole::Free), "cannot change a cell's role");
  refused(make_add_cell(s, 0, Cell{.id = "c9", .source = "x", .role = CellRole::Check}),
          "adds ordinary cells only");
  // Answers and ordinary cells are the student's.
  CHECK(make_set_cell_source(s, "q1", "y = x0 + x0"));
  CHECK(make_set_cell_source(s, "free", "z = 2"));
  CHECK(make_remove_cell(s, "free"));
  CHECK(make_add_cell(s, 0, Cell{.id = "mine", .source = "w = 1"}));
  // Nodes.
  refused(make_set_params(s, "fc1", json{{"out_features", 10}}), "node 'fc1' is locked by the lab");
  refused(make_remove_node(s, "fc1"), "locked by the lab");
  refused(make_rename_node(s, "fc1", "first"), "locked by the lab");
  refused(make_set_node_device(s, "fc1", "cpu"), "locked by the lab");
  refused(make_disconnect(s, "flat:out", "fc1:in"), "locked by the lab");
  refused(make_remove_node(s, "flat"), "feeds a locked node");
  CHECK(make_move_node(s, "fc1", {10, 20}));  // the layout is free
  // The teacher's lab itself is editable.
  Document d = lab();
  CHECK(make_set_cell_source(d, "setup", "x0 = 3"));
  CHECK(make_set_params(d, "fc1", json{{"out_features", 64}}));
  CHECK(make_set_cell_role(d, "free", CellRole::Answer, "z = 0"));
}

TEST_CASE("lab: lock differences and the graded notebook", "[lab]") {
  const Document l = lab();
  Document s = *pack_student(l);
  CHECK(lock_differences(l, s).empty());  // a fresh copy touched nothing
  // Hand-edited JSON gets past the commands: the grader compares content.
  Document t = s;
  t.notebook.cells[1].source = "x0 = 3";                           // setup edited
  t.notebook.cells.erase(t.notebook.cells.begin());                // intro removed
  t.nodes[*find_node(t, "fc1")].params["out_features"] = 64;       // fc1 changed
  for (Cell& c : t.notebook.cells)
    if (c.id == "c1") c.role = CellRole::Free;                      // check unlocked
  const auto diff = lock_differences(l, t);
  REQUIRE(diff.size() == 4);
  CHECK(diff[0] == "locked cell 'intro' was removed");
  CHECK(diff[1] == "locked cell 'setup' was edited");
  CHECK(diff[2] == "check cell 'c1' was unlocked (its role was changed)");
  CHECK(diff[3] == "locked node 'fc1' was changed (params)");
  // The graded notebook: the lab's locked cells back in place, the lab's checks (hidden
  // too) at the end, the student's own check cells (and a cell reusing a check's id) gone.
  t.notebook.cells.push_back(Cell{.id = "fake", .source = "x", .role = CellRole::Check});
  const Notebook g = graded_notebook(l, t);
  std::vector<std::string> ids;
  for (const Cell& c : g.cells) ids.push_back(c.id);
  CHECK(ids == std::vector<std::string>{"intro", "setup", "q1", "free", "c1", "h1"});
  CHECK(g.find("setup")->source == "x0 = 2");
  CHECK(g.find("c1")->role == CellRole::Check);
  CHECK(g.find("q1")->source == "y = 0 -- your code");  // the student's answer, as it is
  // The locked parts' text changes with what it covers, not with the answers.
  Document l2 = l;
  l2.notebook.cells[2].source = "y = 4";
  CHECK(locked_parts_text(l2) == locked_parts_text(l));
  l2.notebook.cells[1].source = "x0 = 5";
  CHECK(locked_parts_text(l2) != locked_parts_text(l));
}

TEST_CASE("lab authoring commands: set the lab, mark nodes, undo, refused in a copy", "[lab]") {
  auto plain = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(plain);
  Document d = *plain;
  const std::string before = serialize_document(d);
  UndoStack stack;
  LabSpec spec;
  spec.present = true;
  spec.title = "T";
  spec.goals = {{"a", "goal a", false}};
  REQUIRE(stack.push(make_set_lab(d, spec), d));
  REQUIRE(stack.push(make_set_node_marks(d, "fc1", true, false), d));
  CHECK(d.lab.title == "T");
  CHECK(d.nodes[*find_node(d, "fc1")].locked);
  // Refusals: the loader's rules, an unknown node.
  LabSpec bad = spec;
  bad.goals.push_back({"a", "again", false});
  auto r = make_set_lab(d, bad);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("duplicate goal id 'a'") != std::string::npos);
  CHECK_FALSE(make_set_node_marks(d, "nope", true, false));
  stack.undo(d);
  stack.undo(d);
  CHECK(serialize_document(d) == before);
  // A student's copy refuses them.
  Document s = *pack_student(lab());
  CHECK_FALSE(make_set_lab(s, LabSpec{}));
  CHECK_FALSE(make_set_node_marks(s, "fc1", false, false));
}

TEST_CASE("lab: a changed dataset or initial weights is tampering, and the lab's are graded", "[lab]") {
  // Red team (helper U): a check that trains the student's graph trained it on the
  // submission's dataset: noise 0.5 -> 0.01 in a hand-edited copy of computational-graphs
  // passed "test accuracy >= 0.9" with a one-unit hidden layer, and nothing was reported.
  Document l = lab();
  l.dataset.source = "synthetic";
  l.dataset.path = "";
  l.dataset.synthetic.kind = "blobs";
  l.dataset.synthetic.noise = 0.5;
  Document t = *pack_student(l);
  REQUIRE(lock_differences(l, t).empty());
  t.dataset.synthetic.noise = 0.01;
  t.weights = "pretrained.weights";
  const auto diff = lock_differences(l, t);
  REQUIRE(diff.size() == 2);
  CHECK(diff[0] == "the dataset was changed");
  CHECK(diff[1] == "the initial weights were changed");
  const Document g = graded_project(l, t);
  CHECK(g.dataset.synthetic.noise == 0.5);
  CHECK(g.weights.empty());
  CHECK(g.nodes == t.nodes);  // the student's graph, as it is
  CHECK(g.notebook.cells == t.notebook.cells);
}

TEST_CASE("lab: a locked cell the lab does not have is reported and graded as the student's",
          "[lab]") {
  // Red team (helper U): locked cells run with the checks' libraries and the globals they
  // set are what checks read (scripting/notebook/lab_checks.h). A hand-edited cell marked
  // "locked" with an id of its own would have set them: `math = {abs = ...}` for the checks.
  const Document l = lab();
  Document t = *pack_student(l);
  t.notebook.cells.push_back(Cell{
      .id = "mine", .source = "math = {abs = function() return 0 end}", .role = CellRole::Locked});
  const auto diff = lock_differences(l, t);
  REQUIRE(diff.size() == 1);
  CHECK(diff[0] == "cell 'mine' was marked locked (the lab has no such locked cell)");
  const Notebook g = graded_notebook(l, t);
  REQUIRE(g.find("mine"));
  CHECK(g.find("mine")->role == CellRole::Free);
  CHECK(g.find("mine")->source == "math = {abs = function() return 0 end}");
  CHECK(g.find("setup")->role == CellRole::Locked);
}

TEST_CASE("lab: the graded project is a student's copy with the lab's locked nodes", "[lab]") {
  // Red team (helper U): a copy saved with "student": false (not reported) let a cell edit
  // a locked node while it was graded: mls.project.current():set_params('loss', ...) ran.
  const Document l = lab();
  Document t = *pack_student(l);
  t.lab.student = false;
  t.lab.goals.clear();
  const size_t fc1 = *find_node(t, "fc1");
  t.nodes[fc1].params["out_features"] = 64;
  t.nodes[fc1].locked = false;
  const Document g = graded_project(l, t);
  CHECK(g.lab.student);
  CHECK(g.lab.goals == l.lab.goals);
  const NodeDoc& n = g.nodes[*find_node(g, "fc1")];
  CHECK(n.locked);
  CHECK(n.params == l.nodes[*find_node(l, "fc1")].params);
  // The edit commands refuse the locked node in the graded project.
  CHECK_FALSE(make_set_params(g, "fc1", {{"out_features", 8}}));
}
