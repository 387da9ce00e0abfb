// Convolution and pooling node types: shapes, errors that name the node, and lowering.
#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"

using namespace mls;
using namespace mls::nodes;

namespace {
Document lenet() {
  auto doc = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-lenet.mls");
  REQUIRE(doc.ok());
  return *doc;
}
}  // namespace

TEST_CASE("LeNet-5: every layer's shape, and its parameter count", "[nodes][cnn]") {
  Document doc = lenet();
  auto shapes = infer_shapes(doc, {1, 28, 28}, 10);
  REQUIRE(shapes.ok());
  CHECK(shapes->at("conv1")[0] == Shape{-1, 6, 28, 28});
  CHECK(shapes->at("pool1")[0] == Shape{-1, 6, 14, 14});
  CHECK(shapes->at("conv2")[0] == Shape{-1, 16, 10, 10});
  CHECK(shapes->at("pool2")[0] == Shape{-1, 16, 5, 5});
  CHECK(shapes->at("flat")[0] == Shape{-1, 400});
  engine_init();
  auto m = lower(doc, InferContext{{1, 28, 28}, 10, {}}, 8, true, "lenet.mls");
  REQUIRE(m.ok());
  int64_t n = 0;
  for (Ref p : m->graph.params()) n += numel(m->graph.type_of(p).shape);
  // conv1 6*1*5*5+6, conv2 16*6*5*5+16, fc 400*120+120, 120*84+84, 84*10+10 (LeNet-5: 61,706)
  CHECK(n == 61706);
  CHECK(m->graph.type_of(m->logits).shape == Shape{8, 10});
}

TEST_CASE("convolution and pooling errors name the node", "[nodes][cnn]") {
  Document doc = lenet();
  SECTION("a kernel larger than its input") {
    for (auto& n : doc.nodes)
      if (n.id == "conv2") n.params["kernel_size"] = 9;  // 14x14 -> 6x6 -> pool 3x3 ...
    for (auto& n : doc.nodes)
      if (n.id == "pool2") n.params["kernel_size"] = 7;
    auto s = infer_shapes(doc, {1, 28, 28}, 10);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find("node 'pool2'") != std::string::npos);
    CHECK(s.error().message.find("does not fit") != std::string::npos);
  }
  SECTION("groups must divide the channels") {
    for (auto& n : doc.nodes)
      if (n.id == "conv2") n.params["groups"] = 4;
    auto s = infer_shapes(doc, {1, 28, 28}, 10);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find("node 'conv2'") != std::string::npos);
    CHECK(s.error().message.find("groups 4") != std::string::npos);
  }
  SECTION("a convolution after a Flatten") {
    auto s = infer_shapes(doc, {784}, 10);  // flat samples: conv1 sees [N,784]
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find("node 'conv1'") != std::string::npos);
    CHECK(s.error().message.find("[N,C,H,W]") != std::string::npos);
  }
}
