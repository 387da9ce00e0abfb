// nodes/setting_path: `--set KEY=VALUE` as --run, sweeps and forks use it.
#include <catch2/catch.hpp>

#include "nodes/document.h"
#include "nodes/setting_path.h"

using namespace mls;
using namespace mls::nodes;

namespace {

Document mlp() {
  auto doc = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  return *doc;
}

}  // namespace

TEST_CASE("set: training shortcuts, paths, node parameters and the dataset", "[setting]") {
  Document d = mlp();
  REQUIRE(apply_setting(d, "lr=0.0125").ok());
  CHECK(d.training.optimizer.lr == 0.0125);
  REQUIRE(apply_setting(d, "batch_size=64").ok());
  CHECK(d.training.batch_size == 64);
  REQUIRE(apply_setting(d, "optimizer.momentum=0.75").ok());
  CHECK(d.training.optimizer.momentum == 0.75);
  REQUIRE(apply_setting(d, "training.epochs=7").ok());
  CHECK(d.training.epochs == 7);
  REQUIRE(apply_setting(d, "fc1.out_features=48").ok());
  for (const NodeDoc& n : d.nodes)
    if (n.id == "fc1") CHECK(n.params["out_features"] == 48);
  REQUIRE(apply_setting(d, "dataset.limit=300").ok());
  CHECK(d.dataset.limit == 300);
  auto lr = read_setting(d, "lr");
  REQUIRE(lr.ok());
  CHECK(lr->get<double>() == 0.0125);
  auto units = read_setting(d, "fc1.out_features");
  REQUIRE(units.ok());
  CHECK(*units == 48);
}

TEST_CASE("set: another optimizer drops the old one's own fields and keeps lr", "[setting]") {
  Document d = mlp();
  REQUIRE(apply_setting(d, "momentum=0.9").ok());
  REQUIRE(apply_setting(d, "lr=0.003").ok());
  REQUIRE(apply_setting(d, "optimizer=adam").ok());
  CHECK(d.training.optimizer.type == OptimizerType::Adam);
  CHECK(d.training.optimizer.lr == 0.003);
  // And back: sgd takes no beta1.
  REQUIRE(apply_setting(d, "optimizer.beta1=0.8").ok());
  REQUIRE(apply_setting(d, "optimizer=sgd").ok());
  CHECK(d.training.optimizer.type == OptimizerType::Sgd);
}

TEST_CASE("set: a bad key or value names it and leaves the document as it was", "[setting]") {
  Document d = mlp();
  const Document before = d;
  auto missing = apply_setting(d, "fc9.out_features=3");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("no node 'fc9'"));
  auto bad = apply_setting(d, "fc1.out_features=-3");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("fc1.out_features=-3"));
  CHECK_THAT(bad.error().message, Catch::Contains("out_features"));
  auto word = apply_setting(d, "batch_size=many");
  REQUIRE_FALSE(word.ok());
  CHECK_THAT(word.error().message, Catch::Contains("batch_size"));
  auto unknown = apply_setting(d, "learning_rate=0.1");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error().message, Catch::Contains("not a training setting"));
  CHECK_FALSE(apply_setting(d, "lr").ok());
  CHECK(d == before);
}
