// `mlstudio runs fork|reproduce|diff` end to end, as a user runs them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cli_util.h"
#include "store/run_store.h"

using namespace mls;
using namespace mls::e2e;

namespace {

// The MLP on 512 training images, 256 test images: milliseconds per epoch.
const std::string kSmall = " --limit 512 --test-limit 256 -q";

std::vector<store::MetricPoint> points(const fs::path& db, int64_t run, const std::string& key) {
  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto m = (*st)->metrics(run, key);
  REQUIRE(m.ok());
  return *m;
}

}  // namespace

TEST_CASE("runs fork: an unchanged fork at epoch 2 trains epoch 3 exactly as its parent did",
          "[e2e][lineage]") {
  const fs::path dir = temp_dir() / "fork-same";
  fs::create_directories(dir);
  const fs::path db = dir / "runs.db";
  REQUIRE(run("--run " + example() + " --epochs 3 --db " + db.string() + kSmall).code == 0);
  // 512 samples at batch 128: 4 steps per epoch; step 9 falls in epoch 3, so the fork takes
  // epoch 2's checkpoint (step 8) and says so.
  Output f = run("runs fork 1 --step 9 --db " + db.string());
  INFO(f.err);
  REQUIRE(f.code == 0);
  CHECK_THAT(f.err, Catch::Contains("forking at step 8"));
  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto child = (*st)->get_run(2);
  REQUIRE(child.ok());
  CHECK(child->parent_run_id == std::optional<int64_t>(1));
  CHECK(child->fork_step == std::optional<int64_t>(8));
  // The parent's curve up to the fork is the child's, and what it trained after is the
  // parent's epoch 3 bit for bit (the fork restored everything: weights, momentum, schedule).
  auto parent = points(db, 1, "train/loss"), forked = points(db, 2, "train/loss");
  REQUIRE(parent.size() == 12);
  REQUIRE(forked.size() == 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(forked[i].step == parent[i].step);
    CHECK(forked[i].value == parent[i].value);
  }
  auto pe = points(db, 1, "epoch/train_loss"), fe = points(db, 2, "epoch/train_loss");
  REQUIRE(fe.size() == 3);
  CHECK(fe[2].value == pe[2].value);
  // `runs show` draws the lineage.
  Output show = run("runs show 2 --db " + db.string());
  CHECK_THAT(show.out, Catch::Contains("forked at step 8"));
}

TEST_CASE("runs fork: other settings and another graph, and a step before any checkpoint is refused",
          "[e2e][lineage]") {
  const fs::path dir = temp_dir() / "fork-edit";
  fs::create_directories(dir);
  const fs::path db = dir / "runs.db";
  REQUIRE(run("--run " + example() + " --epochs 2 --db " + db.string() + kSmall).code == 0);
  Output early = run("runs fork 1 --step 3 --db " + db.string());
  CHECK(early.code == 1);
  CHECK_THAT(early.err, Catch::Contains("no checkpoint at or before step 3"));
  CHECK_THAT(early.err, Catch::Contains("steps 4, 8"));
  // A smaller lr from epoch 1's checkpoint: its first four steps are the parent's, and so is
  // step 5's loss (the weights after step 4); from step 6 on the smaller update shows.
  Output lr = run("runs fork 1 --step 4 --set lr=0.005 --epochs 2 --db " + db.string() + " --quiet");
  INFO(lr.err);
  REQUIRE(lr.code == 0);
  auto parent = points(db, 1, "train/loss"), child = points(db, 2, "train/loss");
  REQUIRE(child.size() == 8);
  CHECK(child[3].value == parent[3].value);
  CHECK(child[4].value == parent[4].value);
  CHECK(child[5].value != parent[5].value);
  // Another graph: fc1 narrower. Its weights start afresh and the warning names them.
  const std::string narrow = variant("narrow.mls", "\"out_features\": 256", "\"out_features\": 64");
  Output g = run("runs fork 1 --project " + narrow + " --epochs 3 --db " + db.string());
  INFO(g.err);
  REQUIRE(g.code == 0);
  CHECK_THAT(g.err, Catch::Contains("fc1.weight, fc1.bias, fc2.weight start from a fresh initialisation"));
  Output d = run("runs diff 1 3 --db " + db.string());
  REQUIRE(d.code == 0);
  CHECK_THAT(d.out, Catch::Contains("~ fc1.out_features: 256 -> 64"));
  CHECK_THAT(d.out, Catch::Contains("~ training.epochs: 2 -> 3"));
  Output d2 = run("runs diff 1 2 --db " + db.string());
  CHECK_THAT(d2.out, Catch::Contains("~ training.optimizer.lr: 0.05 -> 0.005"));
  // Deleting the parent leaves the forks' own checkpoints: the lr fork forks again.
  REQUIRE(run("runs delete 1 --db " + db.string()).code == 0);
  Output again = run("runs fork 2 --epochs 3 --db " + db.string() + " --quiet");
  INFO(again.err);
  CHECK(again.code == 0);
}

TEST_CASE("runs reproduce: identical on the same data, and a changed data file names the first step",
          "[e2e][lineage]") {
  const fs::path dir = temp_dir() / "reproduce";
  fs::create_directories(dir / "data");
  const fs::path db = dir / "runs.db";
  const std::string src = std::string(MLS_SOURCE_DIR) + "/resources/examples/";
  fs::copy_file(src + "house-prices-csv.mls", dir / "houses.mls");
  fs::copy_file(src + "data/houses.csv", dir / "data/houses.csv");
  const std::string project = (dir / "houses.mls").string();
  REQUIRE(run("--run " + project + " --epochs 4 --db " + db.string() + " -q").code == 0);
  Output same = run("runs reproduce 1 --db " + db.string() + " --quiet");
  INFO(same.err);
  CHECK(same.code == 0);
  CHECK_THAT(same.out, Catch::StartsWith("identical: run 2 reproduces run 1 exactly"));
  // One price changed in the CSV: the data differ from the first batch on.
  std::string csv = read_file((dir / "data/houses.csv").string());
  const size_t row = csv.find('\n', csv.find('\n') + 1);  // the end of the first data row
  const size_t comma = csv.rfind(',', row);
  csv.replace(comma + 1, row - comma - 1, "999");
  std::ofstream(dir / "data/houses.csv") << csv;
  Output changed = run("runs reproduce 1 --db " + db.string() + " --quiet");
  INFO(changed.out << changed.err);
  CHECK(changed.code == 1);
  // The changed row is in some batch of the first epoch (560 training rows: 18 steps of 32).
  CHECK_THAT(changed.out, Catch::StartsWith("differs: first at step "));
  CHECK_THAT(changed.out, Catch::Contains(", train/loss: "));
  const int64_t step = std::stoll(changed.out.substr(std::string("differs: first at step ").size()));
  CHECK(step >= 1);
  CHECK(step <= 18);
  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto tags = (*st)->tags(3);
  REQUIRE(tags.ok());
  REQUIRE(tags->size() == 1);
  CHECK(tags->front().first == "reproduces");
  CHECK(tags->front().second == "1");
}

TEST_CASE("a run's ONNX export and trace are listed as its artifacts, with size and hash",
          "[e2e][lineage]") {
  const fs::path dir = temp_dir() / "artifacts";
  fs::create_directories(dir);
  const fs::path db = dir / "runs.db";
  const fs::path trace = dir / "trace.json", onnx = dir / "model.onnx";
  REQUIRE(run("--run " + example() + " --epochs 1 --profile " + trace.string() + " --db " +
              db.string() + kSmall)
              .code == 0);
  REQUIRE(run("export " + example() + " --onnx " + onnx.string() + " --run 1 --test-limit 64 --db " +
              db.string())
              .code == 0);
  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto arts = (*st)->artifacts(1);
  REQUIRE(arts.ok());
  std::map<std::string, store::ArtifactInfo> by_kind;
  for (const auto& a : *arts) by_kind[a.kind] = a;
  REQUIRE(by_kind.count("trace") == 1);
  REQUIRE(by_kind.count("onnx") == 1);
  CHECK(by_kind["onnx"].path == onnx.string());
  CHECK(by_kind["onnx"].bytes == static_cast<int64_t>(fs::file_size(onnx)));
  CHECK(by_kind["trace"].bytes == static_cast<int64_t>(fs::file_size(trace)));
  CHECK(by_kind["onnx"].hash.size() == 16);
  // And the epoch checkpoint, with the step it holds (512 samples at batch 128: step 4).
  bool epoch1 = false;
  for (const auto& a : *arts)
    epoch1 = epoch1 || (a.kind == "checkpoint" && a.path.ends_with("epoch-1.ckpt") && a.step == 4);
  CHECK(epoch1);
}
