#include <algorithm>
#include "nodes/catalogue.h"

#include <catch2/catch.hpp>

using namespace mls;
using namespace mls::nodes;
using nlohmann::json;

namespace {

const NodeTypeDef& type(const char* id) {
  const NodeTypeDef* def = builtin_catalogue().find(id);
  REQUIRE(def != nullptr);
  return *def;
}

std::vector<Shape> infer_ok(const char* id, std::vector<Shape> inputs, json params = {},
                            InferContext ctx = {}) {
  const NodeTypeDef& def = type(id);
  Result<json> full = complete_params(def, params);
  REQUIRE(full);
  Result<std::vector<Shape>> out = def.infer(inputs, *full, ctx);
  if (!out) FAIL(out.error().message);
  return *out;
}

std::string infer_error(const char* id, std::vector<Shape> inputs, json params = {},
                        InferContext ctx = {}) {
  const NodeTypeDef& def = type(id);
  Result<json> full = complete_params(def, params);
  REQUIRE(full);
  Result<std::vector<Shape>> out = def.infer(inputs, *full, ctx);
  REQUIRE_FALSE(out);
  return out.error().message;
}

}  // namespace

TEST_CASE("the builtin catalogue holds the version-1 types with their ports", "[nodes]") {
  const NodeCatalogue& cat = builtin_catalogue();
  std::vector<std::string> ids;
  for (const NodeTypeDef& t : cat.all()) ids.push_back(t.id);
  // Types are only ever added: the first ones keep their ids.
  for (const char* id : {"mls.input", "mls.labels", "mls.flatten", "mls.linear", "mls.relu", "mls.tanh",
                         "mls.sigmoid", "mls.conv2d", "mls.max_pool2d", "mls.avg_pool2d",
                         "mls.global_avg_pool", "mls.batch_norm", "mls.dropout", "mls.cross_entropy",
                         "mls.layer_norm", "mls.embedding", "mls.reshape", "mls.conv_transpose2d",
                         "mls.leaky_relu", "mls.gelu", "mls.silu", "mls.softplus", "mls.elu",
                         "mls.softmax", "mls.log_softmax", "mls.add", "mls.concat", "mls.lstm",
                         "mls.gru", "mls.multi_head_attention", "mls.nll_loss",
                         "mls.bce_with_logits", "mls.mse_loss", "mls.l1_loss", "mls.huber_loss"})
    CHECK(std::find(ids.begin(), ids.end(), id) != ids.end());
  for (const NodeTypeDef& t : cat.all()) {
    INFO(t.id);
    CHECK(t.version == 1);
    CHECK(t.lower);  // every built-in type can be trained
    CHECK_FALSE(t.display_name.empty());
    CHECK_FALSE(t.doc.empty());
  }
  CHECK(cat.find("mls.nope") == nullptr);

  const NodeTypeDef& ce = type("mls.cross_entropy");
  CHECK(ce.role == NodeRole::Loss);
  CHECK(ce.input_index("logits") == 0);
  CHECK(ce.input_index("labels") == 1);
  CHECK(ce.find_input("labels")->kind == PortKind::Labels);
  CHECK(ce.output_index("loss") == 0);
  CHECK(ce.find_input("nope") == nullptr);
  CHECK(type("mls.labels").find_output("out")->kind == PortKind::Labels);
  CHECK(type("mls.input").role == NodeRole::DataInput);
  CHECK(type("mls.input").inputs.empty());
}

TEST_CASE("linear params: defaults are filled and values are checked", "[nodes]") {
  const NodeTypeDef& linear = type("mls.linear");
  CHECK(linear.find_param("out_features")->required);
  CHECK(linear.default_params() == json{{"bias", true}, {"init", "kaiming_uniform"}, {"frozen", false}});

  Result<json> full = complete_params(linear, {{"out_features", 256}});
  REQUIRE(full);
  CHECK(*full == json{{"out_features", 256}, {"bias", true}, {"init", "kaiming_uniform"}, {"frozen", false}});

  std::string bad;
  Result<json> zero = complete_params(linear, {{"out_features", 0}}, &bad);
  REQUIRE_FALSE(zero);
  CHECK(bad == "out_features");
  CHECK(zero.error().message == "must be an integer in [1, 16777216]");

  Result<json> fractional = complete_params(linear, {{"out_features", 2.5}}, &bad);
  REQUIRE_FALSE(fractional);
  CHECK(fractional.error().message == "must be an integer in [1, 16777216]");

  Result<json> init = complete_params(linear, {{"out_features", 3}, {"init", "he"}}, &bad);
  REQUIRE_FALSE(init);
  CHECK(bad == "init");
  CHECK(init.error().message == "must be one of 'kaiming_uniform', 'xavier_uniform', 'uniform_fan_in', 'normal', 'zeros'");

  Result<json> bias = complete_params(linear, {{"out_features", 3}, {"bias", 1}}, &bad);
  REQUIRE_FALSE(bias);
  CHECK(bias.error().message == "must be true or false");

  Result<json> missing = complete_params(linear, json::object(), &bad);
  REQUIRE_FALSE(missing);
  CHECK(bad.empty());
  CHECK(missing.error().message == "missing required parameter 'out_features'");

  Result<json> unknown = complete_params(linear, {{"out_features", 3}, {"units", 3}}, &bad);
  REQUIRE_FALSE(unknown);
  CHECK(bad == "units");
  CHECK(unknown.error().message ==
        "unknown parameter 'units' (mls.linear takes 'out_features', 'bias', 'init', 'frozen')");

  Result<json> relu = complete_params(type("mls.relu"), {{"inplace", true}}, &bad);
  REQUIRE_FALSE(relu);
  CHECK(relu.error().message == "unknown parameter 'inplace' (mls.relu takes no parameters)");
}

TEST_CASE("float params are stored as doubles and range-checked", "[nodes]") {
  const NodeTypeDef& ce = type("mls.cross_entropy");
  Result<json> zero = complete_params(ce, {{"label_smoothing", 0}});
  REQUIRE(zero);
  CHECK(zero->at("label_smoothing").is_number_float());
  CHECK(zero->at("label_smoothing").get<double>() == 0.0);
  Result<json> one = complete_params(ce, {{"label_smoothing", 1.0}});
  REQUIRE_FALSE(one);
  CHECK(one.error().message == "must be a number in [0, 1)");
  CHECK(complete_params(ce, {{"label_smoothing", 0.1}}));
}

TEST_CASE("shape rules of the builtin types", "[nodes]") {
  InferContext mnist{{1, 28, 28}, 10};
  CHECK(infer_ok("mls.input", {}, {}, mnist) == std::vector<Shape>{{-1, 1, 28, 28}});
  CHECK(infer_ok("mls.labels", {}) == std::vector<Shape>{{-1}});
  CHECK(infer_ok("mls.flatten", {{-1, 1, 28, 28}}) == std::vector<Shape>{{-1, 784}});
  CHECK(infer_ok("mls.flatten", {{-1, 3, 4}}) == std::vector<Shape>{{-1, 12}});
  CHECK(infer_ok("mls.linear", {{-1, 784}}, {{"out_features", 256}}) ==
        std::vector<Shape>{{-1, 256}});
  for (const char* act : {"mls.relu", "mls.tanh", "mls.sigmoid"})
    CHECK(infer_ok(act, {{-1, 7, 3}}) == std::vector<Shape>{{-1, 7, 3}});
  CHECK(infer_ok("mls.cross_entropy", {{-1, 10}, {-1}}, {}, mnist) == std::vector<Shape>{{}});

  CHECK(infer_error("mls.linear", {{-1, 1, 28, 28}}, {{"out_features", 4}}) ==
        "input 'in' has shape [N,1,28,28]; Linear expects [N,features] — add a Flatten node "
        "before it");
  CHECK(infer_error("mls.flatten", {{-1}}) ==
        "input 'in' has shape [N]; Flatten expects at least [N,d]");
  CHECK(infer_error("mls.cross_entropy", {{-1, 5}, {-1}}, {}, mnist) ==
        "logits have 5 classes but the dataset has 10");
  CHECK(infer_error("mls.cross_entropy", {{-1, 10, 2}, {-1}}, {}, mnist) ==
        "input 'logits' has shape [N,10,2]; CrossEntropy expects [N,classes]");
  CHECK(infer_error("mls.cross_entropy", {{4, 10}, {5}}, {}, mnist) ==
        "logits have batch size 4 but labels have 5");
  // An unknown class count is not checked.
  CHECK(infer_ok("mls.cross_entropy", {{-1, 5}, {-1}}) == std::vector<Shape>{{}});
}

TEST_CASE("format_shape prints the batch dim as N", "[nodes]") {
  CHECK(format_shape({-1, 1, 28, 28}) == "[N,1,28,28]");
  CHECK(format_shape({3, 4}) == "[3,4]");
  CHECK(format_shape({}) == "[]");
}

TEST_CASE("renamed type ids resolve to their current id", "[nodes]") {
  const NodeCatalogue& cat = builtin_catalogue();
  CHECK(cat.renamed_to("mls.dense") == std::optional<std::string>("mls.linear"));
  CHECK(cat.renamed_to("mls.linear") == std::nullopt);
  CHECK(cat.find("mls.dense") == nullptr);

  // Chains follow through to the current id.
  NodeCatalogue chained;
  register_builtin_nodes(chained);
  chained.add_rename("mls.fc", "mls.dense");
  CHECK(chained.renamed_to("mls.fc") == std::optional<std::string>("mls.linear"));
}
