// Lowering the document to the engine IR.
#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "nodes/lower.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;

TEST_CASE("the example lowers to a verified graph with the document's parameters", "[lower]") {
  cpu::init();
  auto doc = nodes::load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  auto m = nodes::lower(*doc, nodes::InferContext{{1, 28, 28}, 10, {}}, 32, true, "ex.mls");
  REQUIRE(m.ok());
  const Graph& g = m->graph;
  CHECK(g.verify().ok());
  REQUIRE(g.params().size() == 6);
  CHECK(g.value(g.params()[0]).name == "fc1.weight");
  CHECK(g.type_of(g.params()[0]).shape == Shape{784, 256});
  CHECK(g.value(g.params()[0]).init.scheme == "kaiming_uniform");
  CHECK(g.value(g.params()[1]).init.scheme == "uniform_fan_in");
  CHECK(g.type_of(m->input).shape == Shape{32, 1, 28, 28});
  CHECK(g.type_of(m->logits).shape == Shape{32, 10});
  CHECK(g.type_of(m->loss).shape.empty());
  int64_t weights = 0;
  for (Ref p : g.params()) weights += numel(g.type_of(p).shape);
  CHECK(weights == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
}

TEST_CASE("lowering reports a wrong class count against the loss node", "[lower]") {
  cpu::init();
  auto doc = nodes::load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  auto m = nodes::lower(*doc, nodes::InferContext{{1, 28, 28}, 5, {}}, 8, true, "ex.mls");
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().message.find("ex.mls: ") == 0);
  CHECK(m.error().message.find("node 'loss'") != std::string::npos);
}
