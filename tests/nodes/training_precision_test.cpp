// The .mls training section's "precision" switch: parsed, checked with a message naming
// the field, handed to the trainer, and saved only when it is not the default.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "nodes/document.h"
#include "nodes/training_spec.h"

using namespace mls;
using namespace mls::nodes;
using ordered = nlohmann::ordered_json;

namespace {

ordered example_json() {
  std::ifstream in(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return ordered::parse(s.str());
}

}  // namespace

TEST_CASE("training.precision selects mixed precision and round-trips", "[nodes][mixed-precision]") {
  ordered j = example_json();
  REQUIRE(!j["training"].contains("precision"));
  auto plain = parse_document(j.dump(2), "P.mls");
  REQUIRE(plain);
  CHECK(plain->training.precision == Precision::F32);
  // The default is not saved: a file without the key comes back without it.
  CHECK(!ordered::parse(serialize_document(*plain))["training"].contains("precision"));

  for (auto [name, want] : {std::pair{"bf16", Precision::BF16}, std::pair{"f16", Precision::F16}}) {
    INFO(name);
    j["training"]["precision"] = name;
    auto doc = parse_document(j.dump(2), "P.mls");
    REQUIRE(doc);
    CHECK(doc->training.precision == want);
    CHECK(train_config(doc->training).precision == want);
    CHECK_FALSE(doc->training == plain->training);
    ordered saved = ordered::parse(serialize_document(*doc));
    CHECK(saved["training"]["precision"] == name);
    auto again = parse_document(saved.dump(2), "P.mls");
    REQUIRE(again);
    CHECK(again->training == doc->training);
  }

  j["training"]["precision"] = "fp16";
  auto bad = parse_document(j.dump(2), "P.mls");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "P.mls: /training/precision: unknown precision 'fp16' (expected 'f32', 'bf16' or 'f16')");
  j["training"]["precision"] = 16;
  auto number = parse_document(j.dump(2), "P.mls");
  REQUIRE_FALSE(number);
  CHECK(number.error().message ==
        "P.mls: /training/precision: unknown precision '16' (expected 'f32', 'bf16' or 'f16')");
}

TEST_CASE("training.activation_checkpointing: off, auto or a byte budget, saved when set", "[nodes][checkpointing]") {
  ordered j = example_json();
  auto plain = parse_document(j.dump(2), "P.mls");
  REQUIRE(plain);
  CHECK(plain->training.activation_checkpointing == -1);
  CHECK(train_config(plain->training).checkpoint_budget_bytes == -1);
  CHECK(!ordered::parse(serialize_document(*plain))["training"].contains("activation_checkpointing"));

  for (auto [value, want] : {std::pair{ordered("auto"), int64_t{0}}, std::pair{ordered(1000000), int64_t{1000000}},
                             std::pair{ordered("250000"), int64_t{250000}}, std::pair{ordered("off"), int64_t{-1}}}) {
    INFO(value.dump());
    j["training"]["activation_checkpointing"] = value;
    auto doc = parse_document(j.dump(2), "P.mls");
    REQUIRE(doc);
    CHECK(doc->training.activation_checkpointing == want);
    CHECK(train_config(doc->training).checkpoint_budget_bytes == want);
    auto again = parse_document(serialize_document(*doc), "P.mls");
    REQUIRE(again);
    CHECK(again->training == doc->training);
  }
  for (const ordered& bad : {ordered("lots"), ordered(-5), ordered(0), ordered(true), ordered("12kb")}) {
    INFO(bad.dump());
    j["training"]["activation_checkpointing"] = bad;
    auto doc = parse_document(j.dump(2), "P.mls");
    REQUIRE_FALSE(doc);
    CHECK(doc.error().message.rfind("P.mls: /training/activation_checkpointing: ", 0) == 0);
  }
  CHECK(parse_activation_checkpointing("auto").value() == 0);
  CHECK_FALSE(parse_activation_checkpointing(""));
}
