// Lowering the document to the engine IR.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/op.h"
#include "nodes/lower.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/init.h"

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

TEST_CASE("init uniform_fan_in (PyTorch's default) loads, lowers and draws within 1/sqrt(fan_in)",
          "[lower]") {
  cpu::init();
  std::ifstream in(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto& n : j["model"]["nodes"])
    if (n["id"] == "fc1") n["params"]["init"] = "uniform_fan_in";
  auto doc = nodes::parse_document(j.dump(), "fan_in.mls");
  REQUIRE(doc.ok());
  auto m = nodes::lower(*doc, nodes::InferContext{{1, 28, 28}, 10, {}}, 8, true, "fan_in.mls");
  REQUIRE(m.ok());
  const ParamInit& init = m->graph.value(m->graph.params()[0]).init;
  CHECK(init.scheme == "uniform_fan_in");
  CHECK(init.fan_in == 784);
  Tensor w = Tensor::empty(cpu::backend(), DType::F32, {784, 256}, AllocTag::Parameter);
  REQUIRE(initialise(w, init, 42).ok());
  float most = 0;
  for (float v : w.to_f32()) most = std::max(most, std::fabs(v));
  const double bound = 1.0 / std::sqrt(784.0);  // He's would be sqrt(6 / 784), 2.4x wider
  CHECK(most <= bound);
  CHECK(most > 0.99 * bound);
}
