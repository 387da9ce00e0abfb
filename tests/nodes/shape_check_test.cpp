#include "nodes/shape_check.h"

#include <catch2/catch.hpp>

using namespace mls;
using namespace mls::nodes;

namespace {

Document example() {
  Result<Document> doc =
      load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc);
  return *doc;
}

const Shape kSample{1, 28, 28};

}  // namespace

TEST_CASE("shapes flow through the Fashion-MNIST example", "[nodes]") {
  Document doc = example();
  Result<NodeShapes> shapes = infer_shapes(doc, kSample, 10);
  if (!shapes) FAIL(shapes.error().message);
  CHECK(shapes->size() == 9);
  CHECK(shapes->at("image") == std::vector<Shape>{{-1, 1, 28, 28}});
  CHECK(shapes->at("label") == std::vector<Shape>{{-1}});
  CHECK(shapes->at("flat") == std::vector<Shape>{{-1, 784}});
  CHECK(shapes->at("fc1") == std::vector<Shape>{{-1, 256}});
  CHECK(shapes->at("relu1") == std::vector<Shape>{{-1, 256}});
  CHECK(shapes->at("fc2") == std::vector<Shape>{{-1, 128}});
  CHECK(shapes->at("fc3") == std::vector<Shape>{{-1, 10}});
  CHECK(shapes->at("loss") == std::vector<Shape>{Shape{}});
  CHECK(link_shape(doc, *shapes, *find_input_link(doc, "loss", "logits")) == Shape{-1, 10});
}

TEST_CASE("a missing Flatten is reported at the Linear node", "[nodes]") {
  Document doc = example();
  // image -> fc1 directly.
  for (LinkDoc& l : doc.links)
    if (l.to_node == "fc1") l.from_node = "image";
  Result<NodeShapes> shapes = infer_shapes(doc, kSample, 10);
  REQUIRE_FALSE(shapes);
  CHECK(shapes.error().message ==
        "node 'fc1' (mls.linear): input 'in' has shape [N,1,28,28]; Linear expects "
        "[N,features] — add a Flatten node before it");
}

TEST_CASE("a class count that does not match the dataset is reported at the loss", "[nodes]") {
  Document doc = example();
  doc.nodes[*find_node(doc, "fc3")].params["out_features"] = 5;
  Result<NodeShapes> shapes = infer_shapes(doc, kSample, 10);
  REQUIRE_FALSE(shapes);
  CHECK(shapes.error().message ==
        "node 'loss' (mls.cross_entropy): logits have 5 classes but the dataset has 10");
  // Without a known class count the same graph is fine.
  CHECK(infer_shapes(doc, kSample, 0));
}

TEST_CASE("the sample shape drives the input and flatten sizes", "[nodes]") {
  Document doc = example();
  Result<NodeShapes> shapes = infer_shapes(doc, {3, 32, 32}, 10);
  REQUIRE(shapes);
  CHECK(shapes->at("image") == std::vector<Shape>{{-1, 3, 32, 32}});
  CHECK(shapes->at("flat") == std::vector<Shape>{{-1, 3072}});
}

TEST_CASE("documents built in code get their params checked before shape rules", "[nodes]") {
  Document doc = example();
  doc.nodes[*find_node(doc, "fc2")].params = nlohmann::json::object();
  Result<NodeShapes> shapes = infer_shapes(doc, kSample, 10);
  REQUIRE_FALSE(shapes);
  CHECK(shapes.error().message ==
        "node 'fc2' (mls.linear): missing required parameter 'out_features'");

  doc = example();
  doc.links.erase(doc.links.begin() + 3);  // relu1 -> fc2
  shapes = infer_shapes(doc, kSample, 10);
  REQUIRE_FALSE(shapes);
  CHECK(shapes.error().message == "node 'fc2' (mls.linear): input 'in' is not linked");
}
