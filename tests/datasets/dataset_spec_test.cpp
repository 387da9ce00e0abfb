#include "datasets/dataset_spec.h"

#include <catch2/catch.hpp>

#include "tests/datasets/fixtures.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace mls::data;
using namespace mls::data::test;

namespace {

const std::string kWhere = "P.mls: /dataset";

mls::Result<DatasetSpec> parse(const std::string& text) {
  return parse_dataset_spec(json::parse(text), kWhere);
}

std::string parse_error(const std::string& text) {
  auto r = parse(text);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("an empty dataset section is Fashion-MNIST at its packaged path", "[spec]") {
  auto s = parse("{}");
  REQUIRE(s.ok());
  CHECK(s->source == "fashion-mnist");
  CHECK(s->path == "/usr/share/datasets/fashion-mnist");
  CHECK(*s == DatasetSpec{});
  CHECK(dataset_spec_to_json(*s).dump() ==
        R"({"source":"fashion-mnist","path":"/usr/share/datasets/fashion-mnist"})");
}

TEST_CASE("dataset specs of every source round-trip through JSON", "[spec]") {
  const char* texts[] = {
      R"({"source": "mnist", "path": "/data/mnist", "limit": 1000, "test_limit": 500,
          "validation": 0.1, "split_seed": 3})",
      R"({"source": "csv", "path": "iris.csv",
          "csv": {"target": "species", "features": ["a", "b"], "categorical": ["b"],
                  "missing": "mean", "standardize": false, "delimiter": ";"},
          "test_fraction": 0.3, "transforms": [{"type": "one_hot"}]})",
      R"({"source": "csv", "path": "house.csv",
          "csv": {"target": ["price", "tax"], "task": "regression"}})",
      R"({"source": "npy", "path": "x.npy", "npy": {"labels": "y.npy", "num_classes": 10}})",
      R"({"source": "npz", "path": "d.npz", "npz": {"x": "x_train", "y": "y_train", "task": "regression"}})",
      R"({"source": "npz", "path": "d.npz"})",
      R"({"source": "image-folder", "path": "pets", "image": {"size": [32, 48], "channels": 1},
          "transforms": [{"type": "normalize", "mean": [0.5], "std": [0.25]},
                         {"type": "random_crop", "padding": 2},
                         {"type": "horizontal_flip", "p": 0.25},
                         {"type": "rotation", "degrees": 15}]})",
      R"({"source": "image-folder", "path": "pets",
          "transforms": [{"type": "normalize", "mean": [0.4, 0.5, 0.6], "std": [0.2, 0.2, 0.3]}]})",
      R"({"source": "synthetic", "synthetic": {"kind": "blobs", "samples": 300, "noise": 0.25,
          "classes": 4, "seed": 9}})",
      R"({"source": "synthetic", "synthetic": {"kind": "sine"}})",
      R"({"source": "synthetic", "transforms": [{"type": "normalize"}]})",
  };
  for (const char* text : texts) {
    INFO(text);
    auto s = parse(text);
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s.ok());
    const nlohmann::ordered_json j = dataset_spec_to_json(*s);
    INFO(j.dump());
    auto back = parse_dataset_spec(json(j), kWhere);
    REQUIRE(back.ok());
    CHECK(*back == *s);
    CHECK(j.begin().key() == "source");
  }
  auto csv = parse(texts[1]);
  CHECK(csv->csv.target == std::vector<std::string>{"species"});
  CHECK(csv->csv.delimiter == ";");
  CHECK(csv->test_fraction == 0.3);
  auto syn = parse(texts[8]);
  CHECK(syn->path.empty());
  CHECK(syn->synthetic.classes == 4);
  CHECK(dataset_spec_to_json(*parse(texts[9])).dump() ==
        R"({"source":"synthetic","synthetic":{"kind":"sine"}})");
}

TEST_CASE("dataset spec errors name the JSON path", "[spec][errors]") {
  CHECK(parse_error(R"({"source": "csv", "path": "d.csv"})") ==
        "P.mls: /dataset/csv/target: required for source 'csv'");
  CHECK(parse_error(R"({"source": "csv", "path": "d.csv", "csv": {}})") ==
        "P.mls: /dataset/csv/target: required for source 'csv'");
  CHECK(parse_error(R"({"source": "mnist"})") ==
        "P.mls: /dataset/path: required for dataset source 'mnist'");
  CHECK(parse_error(R"({"source": "parquet"})") ==
        "P.mls: /dataset/source: unknown dataset source 'parquet' (expected 'fashion-mnist', "
        "'mnist', "
        "'csv', 'npy', 'npz', 'image-folder', 'synthetic' or 'words')");
  CHECK_THAT(
      parse_error(R"({"limt": 5})"),
      Contains("P.mls: /dataset/limt: unknown key 'limt' (expected 'source', 'path', 'limit'"));
  CHECK(parse_error(R"({"limit": -1})") == "P.mls: /dataset/limit: must be an integer >= 0");
  CHECK(parse_error(R"({"validation": 1.0})") ==
        "P.mls: /dataset/validation: must be a number in [0, 1)");
  CHECK(parse_error(R"({"test_fraction": 0.1})") ==
        "P.mls: /dataset/test_fraction: not used by source 'fashion-mnist' (it has its own test "
        "split)");
  CHECK(parse_error(R"({"csv": {"target": "y"}})") ==
        "P.mls: /dataset/csv: only used with source 'csv' (this dataset's source is "
        "'fashion-mnist')");
  CHECK(parse_error(R"({"source": "csv", "path": "d.csv", "csv": {"target": "y", "sep": ";"}})") ==
        "P.mls: /dataset/csv/sep: unknown key 'sep' (expected 'target', 'features', 'categorical', "
        "'task', 'missing', 'standardize' or 'delimiter')");
  CHECK(parse_error(R"({"source": "csv", "path": "d.csv", "csv": {"target": ["a", "b"]}})") ==
        "P.mls: /dataset/csv/target: classification takes one target column");
  CHECK(parse_error(
            R"({"source": "csv", "path": "d.csv", "csv": {"target": "y", "missing": "skip"}})") ==
        "P.mls: /dataset/csv/missing: unknown missing-value policy 'skip' (expected 'error', "
        "'drop' or 'mean')");
  CHECK(parse_error(R"({"source": "npy", "path": "x.npy"})") ==
        "P.mls: /dataset/npy/labels: required for source 'npy'");
  CHECK(parse_error(R"({"source": "image-folder", "path": "p", "image": {"size": [32]}})") ==
        "P.mls: /dataset/image/size: must be [height, width], integers in [1, 65536]");
  CHECK(parse_error(R"({"source": "image-folder", "path": "p", "image": {"channels": 4}})") ==
        "P.mls: /dataset/image/channels: must be 1 (grey) or 3 (RGB)");
  CHECK(parse_error(R"({"source": "synthetic", "path": "x"})") ==
        "P.mls: /dataset/path: not used by source 'synthetic'");
  CHECK(parse_error(R"({"source": "synthetic", "synthetic": {"kind": "xor", "classes": 3}})") ==
        "P.mls: /dataset/synthetic/classes: only used by kind 'blobs' (the others have 2 classes "
        "or none)");
  CHECK(parse_error(R"({"transforms": {}})") == "P.mls: /dataset/transforms: must be an array");
  CHECK(parse_error(R"({"transforms": [{"type": "blur"}]})") ==
        "P.mls: /dataset/transforms/0/type: unknown transform 'blur' (expected 'normalize', "
        "'one_hot', "
        "'random_crop', 'horizontal_flip' or 'rotation')");
  CHECK(parse_error(R"({"transforms": [{"type": "rotation", "degree": 5}]})") ==
        "P.mls: /dataset/transforms/0/degree: unknown key 'degree' for transform 'rotation' "
        "(expected "
        "'type' or 'degrees')");
  CHECK(parse_error(R"({"transforms": [{"type": "one_hot"}, {"type": "one_hot"}]})") ==
        "P.mls: /dataset/transforms/1: transform 'one_hot' given twice");
  CHECK(parse_error(R"({"transforms": [{"type": "normalize", "mean": 0.5}]})") ==
        "P.mls: /dataset/transforms/0: give both 'mean' and 'std', or neither (to fit them on the "
        "training split)");
  CHECK(parse_error(R"({"transforms": [{"type": "normalize", "mean": 0.5, "std": 0}]})") ==
        "P.mls: /dataset/transforms/0/std: must be a number > 0 or an array of them");
  CHECK(
      parse_error(
          R"({"source": "synthetic", "synthetic": {"kind": "sine"}, "transforms": [{"type": "one_hot"}]})") ==
      "P.mls: /dataset/transforms/0: one_hot needs class targets, and this dataset's are values");
  CHECK(parse_error("[]") == "P.mls: /dataset: must be an object");
}
