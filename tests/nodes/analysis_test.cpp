// The editor's view of a draft graph: shapes, parameter counts and errors per node.
#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "nodes/analysis.h"
#include "nodes/edit.h"
#include "nodes/lower.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;
using namespace mls::nodes;

namespace {

Document example(const char* name) {
  cpu::init();
  auto doc = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/" + name);
  REQUIRE(doc.ok());
  return *doc;
}

const InferContext kFashion{{1, 28, 28}, 10, {}};

}  // namespace

TEST_CASE("a complete graph: every node has shapes and the parameter counts add up to the lowered model's",
          "[analysis]") {
  for (const char* name : {"fashion-mnist-mlp.mls", "fashion-mnist-cnn.mls", "fashion-mnist-resnet.mls"}) {
    INFO(name);
    Document doc = example(name);
    DocumentAnalysis a = analyze_document(doc, kFashion, name);
    CHECK(a.complete());
    auto m = lower(doc, kFashion, 4, true, name);
    REQUIRE(m.ok());
    int64_t lowered = 0;
    for (Ref p : m->graph.params()) lowered += numel(m->graph.type_of(p).shape);
    CHECK(a.total_params == lowered);
    // Each node's count is its own parameters in the lowered graph.
    for (const NodeDoc& n : doc.nodes) {
      int64_t own = 0;
      for (Ref p : m->graph.params())
        if (m->graph.value(p).name.rfind(n.id + ".", 0) == 0) own += numel(m->graph.type_of(p).shape);
      CHECK(a.nodes[n.id].params == own);
    }
  }
  Document mlp = example("fashion-mnist-mlp.mls");
  DocumentAnalysis a = analyze_document(mlp, kFashion, "mlp");
  CHECK(a.nodes["flat"].outputs[0] == Shape{-1, 784});
  CHECK(a.nodes["fc1"].outputs[0] == Shape{-1, 256});
  CHECK(a.nodes["fc1"].params == 784 * 256 + 256);
  CHECK(a.nodes["relu1"].params == 0);
}

TEST_CASE("a draft: nodes after an unlinked input wait, a shape error stays on the node at fault", "[analysis]") {
  Document doc = example("fashion-mnist-mlp.mls");
  UndoStack stack;
  REQUIRE(stack.push(make_disconnect(doc, "image:out", "flat:in"), doc).ok());
  REQUIRE(stack.push(make_disconnect(doc, "flat:out", "fc1:in"), doc).ok());
  REQUIRE(stack.push(make_connect(doc, "image:out", "fc1:in"), doc).ok());
  DocumentAnalysis a = analyze_document(doc, kFashion, "draft");
  CHECK_FALSE(a.complete());
  CHECK(a.nodes["image"].inferred);
  CHECK(a.nodes["flat"].waiting == "input 'in' is not linked");
  // fc1 now reads [N,1,28,28]: its own rule refuses it, and the nodes after it wait for it.
  CHECK_FALSE(a.nodes["fc1"].inferred);
  CHECK_THAT(a.nodes["fc1"].error, Catch::Contains("[N,1,28,28]"));
  CHECK(a.nodes["relu1"].waiting == "waits for 'fc1'");
  CHECK(a.nodes["label"].inferred);
  REQUIRE_FALSE(a.problems.empty());
  CHECK_THAT(a.problems[0], Catch::Contains("flat"));
}
