// The debugger from the command line, as a user meets it: `--break` pauses a run that goes
// wrong, names the node and the step, keeps its state (exit 3), and a fork with a lower
// learning rate trains on; `--health-every` records the health metrics.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "store/run_store.h"

using namespace mls;
using namespace mls::e2e;

namespace {

const std::string kSmall = " --limit 1024 --test-limit 256 -q";

}  // namespace

TEST_CASE("the debugger from the CLI: lr 1000 on the MLP pauses at the first bad node (--break nan), and a fork trains on",
          "[e2e][debugger]") {
  const fs::path dir = temp_dir() / "break-lr";
  fs::create_directories(dir);
  const fs::path db = dir / "runs.db";
  Output r = run("--run " + example() + " --lr 1000 --epochs 2 --break nan,spike:3 --json --db " +
                 db.string() + " --limit 1024 --test-limit 256");
  INFO(r.err);
  REQUIRE(r.code == 3);
  const auto j = nlohmann::json::parse(last_line(r.out));
  CHECK(j["status"] == "paused");
  const auto& b = j["breakpoint"];
  CHECK(b["kind"] == "nan");
  CHECK(b["epoch"] == 1);
  const int64_t step = b["step"];
  CHECK(step >= 2);
  CHECK(step == static_cast<int64_t>(j["step_losses"].size()) + 1);
  // The node is one of the model's layers, named in the message with its op.
  const std::string label = b["label"];
  CHECK((label == "fc1" || label == "fc2" || label == "fc3" || label == "loss" ||
         label.rfind("fc", 0) == 0));
  const std::string msg = b["message"];
  CHECK_THAT(msg, Catch::Contains("step " + std::to_string(step)));
  CHECK_THAT(msg, Catch::Contains(label));
  CHECK(fs::exists(std::string(b["checkpoint"])));

  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto info = (*st)->get_run(1);
  REQUIRE(info.ok());
  CHECK(info->status == "interrupted");
  auto tags = (*st)->tags(1);
  REQUIRE(tags.ok());
  REQUIRE(tags->size() == 1);
  CHECK((*tags)[0].first == "breakpoint");
  CHECK_THAT((*tags)[0].second, Catch::Contains("nan at step " + std::to_string(step)));
  st->reset();

  // The summary says how to go on: fork from the start with a lower learning rate.
  CHECK_THAT(r.err, Catch::Contains("runs fork 1 --step 0 --set lr="));
  Output f = run("runs fork 1 --step 0 --set lr=0.05 --db " + db.string() + " -q");
  INFO(f.err);
  REQUIRE(f.code == 0);
  st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto child = (*st)->get_run(2);
  REQUIRE(child.ok());
  CHECK(child->status == "finished");
  CHECK(child->parent_run_id == std::optional<int64_t>(1));
  auto acc = (*st)->metrics(2, "test/accuracy");
  REQUIRE(acc.ok());
  REQUIRE(acc->size() == 1);
  CHECK(acc->at(0).value > 0.6);
}

TEST_CASE("the debugger from the CLI: a bad --break is refused, --health-every records its metrics",
          "[e2e][debugger]") {
  const fs::path dir = temp_dir() / "break-health";
  fs::create_directories(dir);
  const fs::path db = dir / "runs.db";
  Output bad = run("--run " + example() + " --break spike:0.5 --db " + db.string() + kSmall);
  CHECK(bad.code != 0);
  CHECK_THAT(bad.err, Catch::Contains("'spike:0.5'"));
  CHECK_FALSE(fs::exists(db));  // refused before a run was recorded

  Output ok = run("--run " + example() + " --epochs 1 --health-every 4 --break nan,spike:10 --db " +
                  db.string() + kSmall);
  INFO(ok.err);
  REQUIRE(ok.code == 0);
  auto st = store::RunStore::open_read_only(db.string());
  REQUIRE(st.ok());
  auto norms = (*st)->metrics(1, "health/fc1.weight/grad_norm");
  REQUIRE(norms.ok());
  CHECK(norms->size() == 2);  // 8 steps, every 4
  for (const auto& p : *norms) CHECK(p.value > 0);
  auto dead = (*st)->metrics(1, "health/relu1/dead_share");
  REQUIRE(dead.ok());
  REQUIRE(dead->size() == 2);
  CHECK(dead->at(0).value >= 0);
  CHECK(dead->at(0).value < 0.5);
  auto snr = (*st)->metrics(1, "health/grad_snr");
  REQUIRE(snr.ok());
  CHECK(snr->size() == 2);
}
