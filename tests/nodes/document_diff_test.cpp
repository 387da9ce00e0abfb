// nodes/document_diff: what `runs diff` prints and the run browser paints.
#include <catch2/catch.hpp>

#include <algorithm>

#include "nodes/document_diff.h"
#include "nodes/edit.h"
#include "nodes/setting_path.h"

using namespace mls;
using namespace mls::nodes;

namespace {

Document mlp() {
  auto doc = load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  return *doc;
}

std::vector<std::string> lines(const DocumentDiff& d) {
  std::vector<std::string> out;
  for (const DiffEntry& e : d.entries) out.push_back(diff_line(e));
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("diff: the same document has no differences", "[diff]") {
  CHECK(diff_documents(mlp(), mlp()).empty());
}

TEST_CASE("diff: parameters, settings, an added node and a relinked port, line by line", "[diff]") {
  Document a = mlp(), b = mlp();
  REQUIRE(apply_setting(b, "fc1.out_features=64").ok());
  REQUIRE(apply_setting(b, "lr=0.01").ok());
  REQUIRE(apply_setting(b, "dataset.limit=500").ok());
  // relu1 -> drop1 -> fc2 instead of relu1 -> fc2
  REQUIRE((*make_add_node(b, "drop1", "mls.dropout", {{"p", 0.2}}))->apply(b).ok());
  REQUIRE((*make_disconnect(b, "relu1:out", "fc2:in"))->apply(b).ok());
  REQUIRE((*make_connect(b, "relu1:out", "drop1:in"))->apply(b).ok());
  REQUIRE((*make_connect(b, "drop1:out", "fc2:in"))->apply(b).ok());
  DocumentDiff d = diff_documents(a, b);
  auto ls = lines(d);
  INFO(ls.size());
  CHECK(has(ls, "~ fc1.out_features: 256 -> 64"));
  CHECK(has(ls, "+ node drop1 (mls.dropout)"));
  CHECK(has(ls, "~ fc2.in <- drop1:out (was relu1:out)"));
  CHECK(has(ls, "~ training.optimizer.lr: 0.05 -> 0.01"));
  CHECK(has(ls, "+ dataset.limit: 500"));
  CHECK(d.added_nodes() == std::vector<std::string>{"drop1"});
  CHECK(d.changed_nodes() == std::vector<std::string>{"fc1", "fc2"});
  CHECK(d.removed_nodes().empty());
  // The other way round, the node is removed.
  DocumentDiff back = diff_documents(b, a);
  CHECK(back.removed_nodes() == std::vector<std::string>{"drop1"});
  CHECK(has(lines(back), "- node drop1 (mls.dropout)"));
}
