// Convolution and pooling node types: shapes, errors that name the node, and lowering.
#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"
#include "engine/cpu/cpu_backend.h"

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
  cpu::init();
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

TEST_CASE("window layers' shapes come from the ops' own inference, as PyTorch computes them", "[nodes][cnn]") {
  // One rule per op: the node's shape (what the canvas draws) and the lowered graph's (what
  // trains) are the op's. Expected sizes from PyTorch's formulas, worked by hand.
  struct Case {
    const char* type;
    nlohmann::json params;
    Shape in, out;
  };
  const Case cases[] = {
      // floor((28 + 2*1 - 2*(5-1) - 1) / 2) + 1 = 11
      {"mls.conv2d", {{"out_channels", 4}, {"kernel_size", 5}, {"stride", 2}, {"padding", 1}, {"dilation", 2}},
       {-1, 3, 28, 28}, {-1, 4, 11, 11}},
      // (7-1)*2 - 2*1 + (3-1) + 1 + 1 = 14
      {"mls.conv_transpose2d",
       {{"out_channels", 2}, {"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"output_padding", 1}},
       {-1, 8, 7, 7}, {-1, 2, 14, 14}},
      // floor((9 + 2*1 - 3) / 2) + 1 = 5
      {"mls.max_pool2d", {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}}, {-1, 5, 9, 9}, {-1, 5, 5, 5}},
      {"mls.avg_pool2d", {{"kernel_size", 2}}, {-1, 5, 9, 9}, {-1, 5, 4, 4}},
  };
  const InferContext data{{3, 28, 28}, 10, {}};
  for (const Case& c : cases) {
    INFO(c.type);
    const NodeTypeDef* def = builtin_catalogue().find(c.type);
    REQUIRE(def != nullptr);
    auto params = complete_params(*def, c.params);
    REQUIRE(params.ok());
    auto shapes = def->infer({c.in}, *params, data);
    REQUIRE(shapes.ok());
    CHECK(shapes->at(0) == c.out);
    auto lowered = lower_alone(*def, "n", *params, {c.in}, data);
    REQUIRE(lowered.ok());
    CHECK(lowered->outputs.at(0) == c.out);
  }
  // A window that does not fit: the message names the sizes and carries the op's reason.
  const NodeTypeDef* conv = builtin_catalogue().find("mls.conv2d");
  auto params = complete_params(*conv, {{"out_channels", 4}, {"kernel_size", 7}});
  REQUIRE(params.ok());
  auto bad = conv->infer({Shape{-1, 1, 5, 5}}, *params, data);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("7x7 kernel") != std::string::npos);
  CHECK(bad.error().message.find("5x5 input") != std::string::npos);
}
