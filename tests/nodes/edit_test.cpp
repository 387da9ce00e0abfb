// Edit commands and the undo stack (nodes/edit.h): building the example graph from
// nothing, refusals that name the node and port and change nothing, and undo that gives
// back the document byte for byte.
#include "nodes/edit.h"

#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;
using namespace mls::nodes;
using nlohmann::json;

namespace {

Document example() {
  Result<Document> doc =
      load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc);
  return *doc;
}

void push(UndoStack& stack, Document& doc, EditResult cmd) {
  if (!cmd) FAIL(cmd.error().message);
  Result<void> ok = stack.push(std::move(*cmd), doc);
  if (!ok) FAIL(ok.error().message);
}

// Builds the Fashion-MNIST MLP of the example file with edit commands, one per step.
void build_mlp(UndoStack& stack, Document& doc) {
  struct Node {
    const char* id;
    const char* type;
    json params;
    LayoutPos pos;
  };
  const std::vector<Node> nodes = {
      {"image", "mls.input", json::object(), {40, 80}},
      {"flat", "mls.flatten", json::object(), {220, 80}},
      {"fc1", "mls.linear", {{"out_features", 256}}, {400, 80}},
      {"relu1", "mls.relu", json::object(), {580, 80}},
      {"fc2", "mls.linear", {{"out_features", 128}}, {760, 80}},
      {"relu2", "mls.relu", json::object(), {940, 80}},
      {"fc3", "mls.linear", {{"out_features", 10}}, {1120, 80}},
      {"label", "mls.labels", json::object(), {1120, 240}},
      {"loss", "mls.cross_entropy", json::object(), {1300, 160}},
  };
  for (const Node& n : nodes) push(stack, doc, make_add_node(doc, n.id, n.type, n.params, n.pos));
  const std::vector<std::pair<const char*, const char*>> links = {
      {"image:out", "flat:in"},   {"flat:out", "fc1:in"},      {"fc1:out", "relu1:in"},
      {"relu1:out", "fc2:in"},    {"fc2:out", "relu2:in"},     {"relu2:out", "fc3:in"},
      {"fc3:out", "loss:logits"}, {"label:out", "loss:labels"}};
  for (const auto& [from, to] : links) push(stack, doc, make_connect(doc, from, to));
  push(stack, doc,
       make_set_training(doc, {{"epochs", 10},
                               {"seed", 42},
                               {"optimizer", {{"lr", 0.05}, {"momentum", 0.9}}},
                               {"schedule", {{"type", "cosine"}}}}));
}

// Expects the edit to be refused with a message holding every one of `parts`, and the
// document and stack to be as they were.
void expect_refused(UndoStack& stack, Document& doc, EditResult cmd,
                    const std::vector<std::string>& parts) {
  const std::string before = serialize_document(doc);
  const size_t size = stack.size();
  const uint64_t revision = stack.revision();
  Result<void> r = stack.push(std::move(cmd), doc);
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  for (const std::string& part : parts) CHECK(r.error().message.find(part) != std::string::npos);
  CHECK(serialize_document(doc) == before);
  CHECK(stack.size() == size);
  CHECK(stack.revision() == revision);
}

}  // namespace

TEST_CASE("edit commands build the Fashion-MNIST MLP, which lowers, undo and redo are exact",
          "[nodes][edit]") {
  cpu::init();
  Document doc;
  const Document empty = doc;
  const std::string empty_text = serialize_document(empty);
  UndoStack stack;
  int notified = 0;
  stack.set_on_change([&] { ++notified; });

  build_mlp(stack, doc);
  CHECK(stack.size() == 18);
  CHECK(stack.index() == 18);
  CHECK(stack.revision() == 18);
  CHECK(notified == 18);

  // The same graph, params (defaults filled in), layout and training as the example file.
  const Document ex = example();
  CHECK(doc.nodes == ex.nodes);
  CHECK(doc.links == ex.links);
  CHECK(doc.layout == ex.layout);
  CHECK(doc.training == ex.training);
  CHECK(
      doc.nodes[2].params ==
      json{{"out_features", 256}, {"bias", true}, {"init", "kaiming_uniform"}, {"frozen", false}});
  CHECK(check_graph(doc, "built"));

  Result<NodeShapes> shapes = infer_shapes(doc, {1, 28, 28}, 10);
  if (!shapes) FAIL(shapes.error().message);
  CHECK(shapes->at("flat") == std::vector<Shape>{{-1, 784}});
  CHECK(shapes->at("fc3") == std::vector<Shape>{{-1, 10}});
  auto m = lower(doc, InferContext{{1, 28, 28}, 10, {}}, 32, true, "built");
  if (!m) FAIL(m.error().message);
  CHECK(m->graph.verify().ok());
  int64_t weights = 0;
  for (Ref p : m->graph.params()) weights += numel(m->graph.type_of(p).shape);
  CHECK(weights == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

  CHECK(stack.undo_text() == "Set training");
  CHECK(stack.command(0).text() == "Add node image (mls.input)");
  CHECK(stack.command(9).text() == "Connect image:out to flat:in");
  const Document built = doc;
  const std::string built_text = serialize_document(built);

  while (stack.undo(doc)) {
  }
  CHECK(stack.index() == 0);
  CHECK_FALSE(stack.can_undo());
  CHECK(stack.undo_text().empty());
  CHECK(stack.redo_text() == "Add node image (mls.input)");
  CHECK(doc == empty);
  CHECK(serialize_document(doc) == empty_text);
  CHECK(notified == 36);

  while (stack.redo(doc)) {
  }
  CHECK(stack.index() == 18);
  CHECK_FALSE(stack.can_redo());
  CHECK(doc == built);
  CHECK(serialize_document(doc) == built_text);
  CHECK(stack.revision() == 54);
}

TEST_CASE("refused edits name the node and port and leave the document unchanged",
          "[nodes][edit]") {
  Document doc;
  UndoStack stack;
  build_mlp(stack, doc);

  SECTION("links") {
    expect_refused(stack, doc, make_connect(doc, "image:out", "fc1:in"),
                   {"cannot link 'image:out' to 'fc1:in'",
                    "input 'fc1:in' is already linked (from 'flat:out')"});
    expect_refused(stack, doc, make_connect(doc, "fc1:out", "fc2:nope"),
                   {"node 'fc2' (mls.linear) has no input 'nope' (it has 'in')"});
    expect_refused(stack, doc, make_connect(doc, "fc1:nope", "fc2:in"),
                   {"node 'fc1' (mls.linear) has no output 'nope' (it has 'out')"});
    expect_refused(stack, doc, make_connect(doc, "fc1:out", "fc2:out"),
                   {"'fc2:out' is an output; a link ends at an input (fc2 has 'in')"});
    expect_refused(stack, doc, make_connect(doc, "fc1:in", "fc2:in"),
                   {"'fc1:in' is an input; a link starts at an output"});
    expect_refused(stack, doc, make_connect(doc, "ghost:out", "fc2:in"),
                   {"cannot link 'ghost:out' to 'fc2:in': there is no node 'ghost'"});
    expect_refused(stack, doc, make_connect(doc, "fc1", "fc2:in"),
                   {"cannot link 'fc1' to 'fc2:in': expected \"node:port\", got \"fc1\""});
    expect_refused(stack, doc, make_disconnect(doc, "fc1:out", "fc2:in"),
                   {"cannot unlink 'fc1:out' from 'fc2:in': there is no link"});

    // With fc1's input free: a link back into it closes a loop, and labels are not tensors.
    push(stack, doc, make_disconnect(doc, "flat:out", "fc1:in"));
    CHECK(find_input_link(doc, "fc1", "in") == nullptr);
    expect_refused(stack, doc, make_connect(doc, "relu2:out", "fc1:in"),
                   {"cannot link 'relu2:out' to 'fc1:in': it would make a cycle "
                    "fc1 -> relu1 -> fc2 -> relu2 -> fc1"});
    expect_refused(stack, doc, make_connect(doc, "fc1:out", "fc1:in"),
                   {"it would make a cycle fc1 -> fc1"});
    expect_refused(stack, doc, make_connect(doc, "label:out", "fc1:in"),
                   {"'label:out' gives labels but 'fc1:in' takes a tensor"});
    push(stack, doc, make_connect(doc, "flat:out", "fc1:in"));
    CHECK(doc.links.back() == LinkDoc{"flat", "out", "fc1", "in"});
  }

  SECTION("nodes and params") {
    expect_refused(stack, doc, make_add_node(doc, "fc1", "mls.linear", {{"out_features", 4}}),
                   {"cannot add node 'fc1': a node 'fc1' already exists"});
    expect_refused(stack, doc, make_add_node(doc, "1fc", "mls.linear", {{"out_features", 4}}),
                   {"cannot add node '1fc': a node id must start with a letter"});
    expect_refused(stack, doc, make_add_node(doc, "x", "mls.nope"),
                   {"cannot add node 'x': unknown node type 'mls.nope'"});
    expect_refused(stack, doc, make_add_node(doc, "fc4", "mls.linear"),
                   {"cannot add node 'fc4' (mls.linear): missing required parameter "
                    "'out_features'"});
    expect_refused(stack, doc, make_add_node(doc, "fc4", "mls.linear", {{"out_features", 0}}),
                   {"cannot add node 'fc4' (mls.linear): /params/out_features: must be an "
                    "integer in [1, 16777216]"});
    expect_refused(stack, doc, make_set_params(doc, "fc2", {{"out_features", -3}}),
                   {"cannot set params of node 'fc2' (mls.linear): /params/out_features: must be "
                    "an integer in [1, 16777216]"});
    expect_refused(stack, doc, make_set_params(doc, "fc2", {{"widht", 3}}),
                   {"node 'fc2'", "/params/widht: unknown parameter 'widht'"});
    expect_refused(stack, doc, make_set_params(doc, "fc2", {{"out_features", nullptr}}),
                   {"node 'fc2'", "missing required parameter 'out_features'"});
    expect_refused(stack, doc, make_set_params(doc, "ghost", {{"bias", false}}),
                   {"cannot set params of node 'ghost': there is no node 'ghost'"});
    expect_refused(stack, doc, make_remove_node(doc, "ghost"),
                   {"cannot remove node 'ghost': no such node"});
    expect_refused(stack, doc, make_rename_node(doc, "fc1", "fc2"),
                   {"cannot rename node 'fc1' to 'fc2': a node 'fc2' already exists"});
    expect_refused(stack, doc, make_rename_node(doc, "fc1", "fc 1"),
                   {"cannot rename node 'fc1' to 'fc 1': a node id must start"});
    expect_refused(stack, doc, make_move_node(doc, "ghost", {1, 2}),
                   {"cannot move node 'ghost': no such node"});
    expect_refused(stack, doc, make_set_training(doc, {{"epochs", 0}}),
                   {"cannot set training: /training/epochs: must be an integer in [1, 10000000]"});
    expect_refused(stack, doc, make_set_training(doc, {{"optimizer", {{"type", "adam"}}}}),
                   {"/training/optimizer/momentum: unknown key 'momentum' for optimizer 'adam'"});
    expect_refused(stack, doc, make_set_dataset(doc, {{"limit", -1}}),
                   {"cannot set dataset: /dataset/limit: must be an integer >= 0"});
  }

  SECTION("a command made for another document state is refused when applied") {
    EditResult add = make_add_node(doc, "fc4", "mls.linear", {{"out_features", 4}});
    REQUIRE(add);
    push(stack, doc, make_add_node(doc, "fc4", "mls.relu"));
    const std::string before = serialize_document(doc);
    Result<void> r = (*add)->apply(doc);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "cannot add node 'fc4': a node 'fc4' already exists");
    CHECK(serialize_document(doc) == before);
  }
}

TEST_CASE("removing a node takes its links and layout, undo puts them back in place",
          "[nodes][edit]") {
  Document doc = example();
  const std::string original = serialize_document(doc);
  UndoStack stack;

  push(stack, doc, make_remove_node(doc, "fc2"));
  CHECK(doc.nodes.size() == 8);
  CHECK_FALSE(find_node(doc, "fc2"));
  REQUIRE(doc.links.size() == 6);
  CHECK(doc.links[3] == LinkDoc{"relu2", "out", "fc3", "in"});  // the 4th and 5th are gone
  CHECK_FALSE(doc.layout.contains("fc2"));
  CHECK(stack.undo_text() == "Remove node fc2");
  const std::string removed = serialize_document(doc);
  CHECK(graph_problems(doc, "P") ==
        std::vector<std::string>{"P: node 'relu2' (/model/nodes/4): input 'in' is not linked"});

  REQUIRE(stack.undo(doc));
  CHECK(serialize_document(doc) == original);
  CHECK(doc == example());
  REQUIRE(stack.redo(doc));
  CHECK(serialize_document(doc) == removed);
  REQUIRE(stack.undo(doc));

  // The first node, with the first link, and the loss, with the last two.
  push(stack, doc, make_remove_node(doc, "image"));
  push(stack, doc, make_remove_node(doc, "loss"));
  CHECK(doc.nodes.size() == 7);
  CHECK(doc.links.size() == 5);
  CHECK(doc.links.front() == LinkDoc{"flat", "out", "fc1", "in"});
  REQUIRE(stack.undo(doc));
  REQUIRE(stack.undo(doc));
  CHECK(serialize_document(doc) == original);
  CHECK(doc == example());
}

TEST_CASE("rename, move and set params change what they name and undo exactly", "[nodes][edit]") {
  Document doc = example();
  const std::string original = serialize_document(doc);
  UndoStack stack;

  push(stack, doc, make_rename_node(doc, "fc1", "dense1"));
  CHECK(doc.nodes[2].id == "dense1");
  CHECK(doc.links[1] == LinkDoc{"flat", "out", "dense1", "in"});
  CHECK(doc.links[2] == LinkDoc{"dense1", "out", "relu1", "in"});
  CHECK(doc.layout.at("dense1") == json{{"x", 400}, {"y", 80}});
  CHECK_FALSE(doc.layout.contains("fc1"));
  CHECK(check_graph(doc, "P"));
  CHECK(stack.undo_text() == "Rename node fc1 to dense1");

  push(stack, doc, make_move_node(doc, "dense1", {410.5, 90}));
  CHECK(doc.layout.at("dense1") == json{{"x", 410.5}, {"y", 90}});
  CHECK(serialize_document(doc).find("\"x\": 410.5,\n      \"y\": 90\n") != std::string::npos);

  push(stack, doc, make_set_params(doc, "fc2", {{"out_features", 64}, {"bias", false}}));
  CHECK(
      doc.nodes[4].params ==
      json{{"out_features", 64}, {"bias", false}, {"init", "kaiming_uniform"}, {"frozen", false}});
  Result<NodeShapes> shapes = infer_shapes(doc, {1, 28, 28}, 10);
  if (!shapes) FAIL(shapes.error().message);
  CHECK(shapes->at("relu2") == std::vector<Shape>{{-1, 64}});
  // A null resets a parameter to its default.
  push(stack, doc, make_set_params(doc, "fc2", {{"bias", nullptr}}));
  CHECK(doc.nodes[4].params.at("bias") == true);
  CHECK(doc.nodes[4].params.at("out_features") == 64);

  push(stack, doc, make_set_training(doc, {{"optimizer", {{"lr", 0.1}}}, {"schedule", nullptr}}));
  CHECK(doc.training.optimizer.lr == 0.1);
  CHECK(doc.training.optimizer.momentum == 0.9);
  CHECK(doc.training.schedule.type == "constant");
  push(stack, doc, make_set_dataset(doc, {{"limit", 1000}, {"validation", 0.1}}));
  CHECK(doc.dataset.limit == 1000);
  CHECK(doc.dataset.validation == 0.1);
  CHECK(doc.dataset.source == "fashion-mnist");

  CHECK(stack.size() == 6);
  while (stack.undo(doc)) {
  }
  CHECK(serialize_document(doc) == original);
  CHECK(doc == example());
}

TEST_CASE("placing a node on the cpu is one edit that saves and undoes", "[nodes][edit]") {
  Document doc = example();
  const std::string original = serialize_document(doc);
  UndoStack stack;
  push(stack, doc, make_set_node_device(doc, "fc2", "cpu"));
  CHECK(doc.nodes[4].device == "cpu");
  CHECK(stack.undo_text() == "Run fc2 on the cpu");
  CHECK(serialize_document(doc).find("\"device\": \"cpu\"") != std::string::npos);
  expect_refused(stack, doc, make_set_node_device(doc, "fc2", "vulkan"), {"a node runs on the project's device or on \"cpu\""});
  expect_refused(stack, doc, make_set_node_device(doc, "ghost", "cpu"), {"no such node"});
  stack.undo(doc);
  CHECK(serialize_document(doc) == original);
}

TEST_CASE("a node added where a removed one left its layout entry gets it back on undo",
          "[nodes][edit]") {
  Document doc = example();
  doc.layout["old"] = {{"x", 1}, {"y", 2}, {"collapsed", true}};  // no node 'old'
  const std::string original = serialize_document(doc);
  UndoStack stack;
  push(stack, doc, make_add_node(doc, "old", "mls.relu", json::object(), LayoutPos{5, 6}));
  CHECK(doc.layout.at("old") == json{{"x", 5}, {"y", 6}});
  push(stack, doc, make_move_node(doc, "old", {7, 8}));
  push(stack, doc, make_rename_node(doc, "relu1", "old2"));
  push(stack, doc, make_rename_node(doc, "old", "relu9"));
  CHECK(doc.layout.at("relu9") == json{{"x", 7}, {"y", 8}});
  CHECK_FALSE(doc.layout.contains("old"));
  while (stack.undo(doc)) {
  }
  CHECK(serialize_document(doc) == original);
  CHECK(doc.layout.at("old") == json{{"x", 1}, {"y", 2}, {"collapsed", true}});
}

TEST_CASE("the undo stack keeps its clean state, drops the redo tail and counts changes",
          "[nodes][edit]") {
  Document doc;
  UndoStack stack;
  CHECK(stack.is_clean());
  CHECK_FALSE(stack.undo(doc));
  CHECK_FALSE(stack.redo(doc));
  push(stack, doc, make_add_node(doc, "a", "mls.input"));
  CHECK_FALSE(stack.is_clean());
  push(stack, doc, make_add_node(doc, "b", "mls.flatten"));
  stack.set_clean();
  CHECK(stack.is_clean());
  push(stack, doc, make_connect(doc, "a:out", "b:in"));
  CHECK_FALSE(stack.is_clean());
  REQUIRE(stack.undo(doc));
  CHECK(stack.is_clean());
  CHECK(stack.redo_text() == "Connect a:out to b:in");

  // Undo past the clean state, then push: the clean state was in the dropped tail.
  REQUIRE(stack.undo(doc));
  CHECK(stack.size() == 3);
  push(stack, doc, make_add_node(doc, "c", "mls.relu"));
  CHECK(stack.size() == 2);
  CHECK(stack.index() == 2);
  CHECK_FALSE(stack.can_redo());
  CHECK(stack.undo_text() == "Add node c (mls.relu)");
  CHECK_FALSE(stack.is_clean());
  while (stack.undo(doc)) {
  }
  CHECK_FALSE(stack.is_clean());
  CHECK(stack.revision() == 8);

  // A redo that no longer fits the document is refused, and the stack stays put.
  doc.nodes.push_back({"a", "mls.relu", 1, json::object()});
  CHECK_FALSE(stack.redo(doc));
  CHECK(stack.index() == 0);
  CHECK(doc.nodes.size() == 1);

  stack.clear();
  CHECK(stack.size() == 0);
  CHECK(stack.is_clean());
}
