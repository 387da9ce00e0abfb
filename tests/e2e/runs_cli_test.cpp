// `mlstudio runs ...` as a user types it, on two tiny training runs and a child run recorded
// under the first: list, show (with its lineage), compare, export, query, tag, note and delete,
// each checked against the values the store holds.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "store/run_store.h"

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

namespace {

// Two runs of the MLP example on 512 samples: run 1 two epochs at batch 128 (8 steps), run 2
// one epoch at batch 64 (8 steps), then run 3 recorded by hand as run 1's fork at step 4.
std::string make_db() {
  fs::path db = temp_dir() / "runs_cli.db";
  fs::remove(db);
  fs::remove_all(temp_dir() / "runs_cli.checkpoints");
  const std::string common = " --limit 512 --test-limit 256 --quiet --db " + db.string();
  Output a = run("--run " + example() + " --epochs 2" + common);
  INFO(a.err);
  REQUIRE(a.code == 0);
  Output b =
      run("--run " + example() + " --epochs 1 --set training.batch_size=64 --seed 3" + common);
  INFO(b.err);
  REQUIRE(b.code == 0);
  auto st = mls::store::RunStore::open(db.string());
  REQUIRE(st.ok());
  auto child = (*st)->begin_run(
      {.name = "child", .device = "cpu", .seed = 1, .parent_run_id = 1, .fork_step = 4});
  REQUIRE(child.ok());
  REQUIRE(*child == 3);
  REQUIRE((*st)->log_param(3, "batch_size", "128").ok());
  (*st)->log_metric("train/loss", 5, 0.5);
  REQUIRE((*st)->end_run(3, "failed").ok());
  return db.string();
}

nlohmann::json json_of(const Output& o) {
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  return nlohmann::json::parse(o.out);
}

}  // namespace

TEST_CASE("runs list, show, compare, export, query, tag, note and delete", "[e2e][runs_cli]") {
  // Trained once; each section but delete reads or changes a copy (Catch runs the test case
  // once per section).
  static const std::string trained = make_db();
  static int section = 0;
  const std::string db = (temp_dir() / ("runs_cli_" + std::to_string(++section) + ".db")).string();
  fs::copy_file(trained, db, fs::copy_options::overwrite_existing);
  const std::string at = " --db " + db;
  auto st = mls::store::RunStore::open_read_only(db);
  REQUIRE(st.ok());
  auto sums1 = (*st)->metric_summaries(1);
  auto sums2 = (*st)->metric_summaries(2);
  REQUIRE((sums1.ok() && sums2.ok()));
  auto summary = [](const std::vector<mls::store::MetricSummary>& v, const std::string& key) {
    for (const auto& s : v)
      if (s.key == key) return s;
    FAIL("no " << key);
    return mls::store::MetricSummary{};
  };
  const auto loss1 = summary(*sums1, "train/loss");
  const auto loss2 = summary(*sums2, "train/loss");
  const double acc1 = summary(*sums1, "test/accuracy").latest;
  st->reset();

  SECTION("list: filter, sort, columns and limit") {
    auto j =
        json_of(run("runs list --json --columns id,params.batch_size,metrics.train/loss.min "
                    "--sort=-params.batch_size" +
                    at));
    REQUIRE(j.size() == 3);
    CHECK(j[0]["id"] == 1);  // 128, then 3 (128, by id), then 2 (64)
    CHECK(j[1]["id"] == 3);
    CHECK(j[2]["id"] == 2);
    CHECK(j[2]["params.batch_size"] == "64");
    CHECK(j[0]["metrics.train/loss.min"].get<double>() == Approx(*loss1.min));
    j = json_of(
        run("runs list --json --where \"params.batch_size < 100 OR status = 'failed'\"" + at));
    REQUIRE(j.size() == 2);
    CHECK(j[0]["id"] == 2);
    CHECK(j[1]["id"] == 3);
    CHECK(j[1]["status"] == "failed");
    j = json_of(run("runs list --json --limit 1 --sort metrics.train/loss:desc" + at));
    REQUIRE(j.size() == 1);
    CHECK(j[0]["id"] == (loss1.latest > loss2.latest ? 1 : 2));
    Output text = run("runs list" + at);
    CHECK(text.code == 0);
    CHECK(text.out.find("metrics.test/accuracy") != std::string::npos);
    CHECK(text.out.find("Fashion-MNIST MLP") != std::string::npos);
    Output bad = run("runs list --where \"params.lr <\"" + at);
    CHECK(bad.code == 1);
    CHECK(bad.err.find("--where: column 12: expected a value after '<'\n  params.lr <\n" +
                       std::string(13, ' ') + "^") != std::string::npos);
    bad = run("runs list --sort stauts" + at);
    CHECK(bad.code == 1);
    CHECK(bad.err.find("unknown field 'stauts' (did you mean status?)") != std::string::npos);
    bad = run("runs list --limit -1" + at);
    CHECK(bad.code != 0);
  }

  SECTION("show: attributes, params, metric summaries and the lineage tree") {
    Output o = run("runs show 3" + at);
    INFO(o.out << o.err);
    REQUIRE(o.code == 0);
    CHECK(o.out.find("run 3  child  (failed)") != std::string::npos);
    CHECK(o.out.find("parent      1  from its step 4") != std::string::npos);
    CHECK(o.out.find("  lineage\n    1 Fashion-MNIST MLP (finished)\n    `- 3 child (failed, "
                     "forked at step 4)   <- this run\n") != std::string::npos);
    auto j = json_of(run("runs show 1 --json" + at));
    CHECK(j["params"]["batch_size"] == "128");
    CHECK(j["metrics"]["train/loss"]["latest"].get<double>() == Approx(loss1.latest));
    CHECK(j["metrics"]["train/loss"]["count"] == 8);
    CHECK(j["metrics"]["train/loss"]["min"].get<double>() == Approx(*loss1.min));
    CHECK(j["metrics"]["test/accuracy"]["latest"].get<double>() == Approx(acc1));
    CHECK(j["lineage"]["children"][0]["id"] == 3);
    CHECK(j["lineage"]["children"][0]["fork_step"] == 4);
    CHECK(run("runs show 99" + at).err.find("no run 99") != std::string::npos);
  }

  SECTION("compare: params side by side, metrics, at-step, diff-only and the chart") {
    Output o = run("runs compare 1 2 --at-step 4" + at);
    INFO(o.out << o.err);
    REQUIRE(o.code == 0);
    CHECK(o.out.find("  batch_size") != std::string::npos);
    CHECK(o.out.find("  optimizer") != std::string::npos);
    CHECK(o.out.find("    at step 4") != std::string::npos);
    // The chart: train/loss, one symbol per run, a legend and the axes' ends.
    CHECK(o.out.find("\ntrain/loss\n") != std::string::npos);
    CHECK(o.out.find("  *  run 1 Fashion-MNIST MLP") != std::string::npos);
    CHECK(o.out.find("  o  run 2 Fashion-MNIST MLP") != std::string::npos);
    CHECK(o.out.find(" +----") != std::string::npos);
    char top[32];
    std::snprintf(top, sizeof top, "%.6g |", std::max(*loss1.max, *loss2.max));
    CHECK(o.out.find(top) != std::string::npos);
    Output d = run("runs compare 1 2 --diff-only" + at);
    CHECK(d.code == 0);
    CHECK(d.out.find("  batch_size") != std::string::npos);
    CHECK(d.out.find("  optimizer") == std::string::npos);  // the same in both
    auto j = json_of(run("runs compare 1 2 --json --at-step 4 --metric test/accuracy" + at));
    CHECK(j["params"]["batch_size"] == nlohmann::json({"128", "64"}));
    CHECK(j["metrics"]["train/loss"][0]["last"].get<double>() == Approx(loss1.latest));
    CHECK(j["metrics"]["train/loss"][1]["best"].get<double>() == Approx(*loss2.best));
    CHECK(j["metrics"]["test/accuracy"][0]["at_step"].is_null());  // logged at step 8 only
    CHECK(j["chart"] == nlohmann::json({"test/accuracy"}));
    Output bad = run("runs compare 1 2 --metric trian/loss" + at);
    CHECK(bad.code == 1);
    CHECK(bad.err.find("no metric 'trian/loss' in these runs (did you mean train/loss?)") !=
          std::string::npos);
    CHECK(run("runs compare 1" + at).code == 1);
    CHECK(run("runs compare 1 77" + at).err.find("no run 77") != std::string::npos);
  }

  SECTION("tag, note, then export as CSV, JSON and LaTeX") {
    CHECK(run("runs tag 1 keep group=a_b" + at).out == "run 1: tag keep\nrun 1: tag group = a_b\n");
    CHECK(run("runs tag 2 'group=x&y'" + at).code == 0);
    CHECK(run("runs note 2 '50% better'" + at).out == "run 2: note set\n");
    CHECK(run("runs tag 1 =v" + at).err.find("has no key") != std::string::npos);
    CHECK(run("runs tag 9 k" + at).err.find("no run 9") != std::string::npos);
    const std::string cols = " --columns id,tags.group,note,params.batch_size --where tags.group";
    Output csv = run("runs export --csv" + cols + at);
    CHECK(csv.out == "id,tags.group,note,params.batch_size\n1,a_b,,128\n2,x&y,50% better,64\n");
    auto j = json_of(run("runs export --json" + cols + at));
    CHECK(j[1]["note"] == "50% better");
    Output tex = run("runs export --latex" + cols + at);
    CHECK(tex.out.find("\\begin{tabular}{rlll}\n\\toprule\nid & tags.group & note & "
                       "params.batch\\_size \\\\\n\\midrule\n1 & a\\_b &  & 128 \\\\\n2 & x\\&y & "
                       "50\\% better & 64 \\\\\n\\bottomrule\n\\end{tabular}\n") !=
          std::string::npos);
    CHECK(run("runs export" + at).err.find("--csv, --json or --latex") != std::string::npos);
    CHECK(run("runs list --json --where tags.keep" + at).out.find("\"id\":1") != std::string::npos);
    Output rm = run("runs tag 1 keep --remove" + at);
    CHECK(rm.out == "run 1: removed tag keep\n");
    CHECK(json_of(run("runs list --json --where tags.keep" + at)).empty());
  }

  SECTION("query reads and refuses writes") {
    auto j = json_of(run("runs query --json \"SELECT id, status FROM runs ORDER BY id\"" + at));
    REQUIRE(j.size() == 3);
    CHECK(j[2]["status"] == "failed");
    Output w = run("runs query \"UPDATE runs SET status = 'finished'\"" + at);
    CHECK(w.code == 1);
    CHECK(w.err.find("read-only here: UPDATE on runs refused") != std::string::npos);
    CHECK(run("runs query --csv \"SELECT count(*) AS n FROM runs\"" + at).out == "n\n3\n");
  }

  SECTION("an unknown action is named with the valid ones") {
    Output o = run("runs lst" + at);
    CHECK(o.code == 1);
    CHECK(o.err.find("'lst'") != std::string::npos);
    CHECK(o.err.find("'compare'") != std::string::npos);
  }

  SECTION("delete removes the run and its checkpoint folder, and says so") {
    const std::string at = " --db " + trained;  // the checkpoints belong to the original
    fs::path ckpt = temp_dir() / "runs_cli.checkpoints" / "run-2";
    REQUIRE(fs::exists(ckpt / "last.ckpt"));
    Output d = run("runs delete 2" + at);
    INFO(d.out << d.err);
    CHECK(d.code == 0);
    CHECK(d.out.find("deleted run 2:") == 0);
    CHECK(d.out.find("removed " + (ckpt / "last.ckpt").string()) != std::string::npos);
    CHECK_FALSE(fs::exists(ckpt));
    CHECK(fs::exists(temp_dir() / "runs_cli.checkpoints" / "run-1" / "last.ckpt"));
    auto j = json_of(run("runs list --json" + at));
    REQUIRE(j.size() == 2);
    CHECK(j[1]["id"] == 3);
    Output again = run("runs delete 2" + at);
    CHECK(again.code == 1);
    CHECK(again.err.find("no run 2") != std::string::npos);
  }
}
