// What the CLI said that was not so (issue 24, item 14): numbers past their range clamped
// instead of refused, a NaN input given a confident class, an empty input answered with
// nothing, a project limit looser than the flag's, a split that leaves one sample trained on
// in silence, escape sequences from a file passed to the terminal, and a wrong subcommand
// called a missing one.
#include "cli_util.h"
#include "datasets/npy.h"

using namespace mls::e2e;

namespace {

std::string houses() {
  return std::string(MLS_SOURCE_DIR) + "/resources/examples/house-prices-csv.mls";
}

// A run of the MLP example on 100 samples, once per test process.
std::string trained_mlp_db() {
  static std::string db = [] {
    const std::string d = (temp_dir() / "lies-mlp.db").string();
    Output o = run("--run " + example() + " --epochs 1 --limit 100 --test-limit 100 -q --db " + d);
    REQUIRE(o.code == 0);
    return d;
  }();
  return db;
}

}  // namespace

TEST_CASE("a number past its flag's range is refused, naming the flag and the range",
          "[cli][lies]") {
  const std::string db = (temp_dir() / "lies-seed.db").string();
  Output o = run("--run " + example() +
                 " --epochs 1 --limit 10 -q --seed 99999999999999999999999 --db " + db);
  INFO(o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("--seed") != std::string::npos);
  CHECK(o.err.find("0..18446744073709551615") != std::string::npos);
  CHECK(!fs::exists(db));  // refused before anything ran

  // The largest seed is a seed.
  Output max = run("--run " + example() +
                   " --epochs 1 --limit 10 -q --seed 18446744073709551615 --db " + db);
  CHECK(max.code == 0);

  // Every whole-number flag is read the same way.
  Output epochs = run("--run " + example() + " --epochs 99999999999999999999 --db " + db);
  CHECK(epochs.code == 1);
  CHECK(epochs.err.find("--epochs") != std::string::npos);
  CHECK(epochs.err.find("1..10000000") != std::string::npos);
  Output batch = run("--run " + example() + " --batch-size 1e3 --db " + db);
  CHECK(batch.code == 1);
  CHECK(batch.err.find("--batch-size") != std::string::npos);
}

TEST_CASE("runs show reads the run id strictly", "[cli][lies]") {
  const std::string db = trained_mlp_db();
  for (const char* id : {"9223372036854775808", "18446744073709551617", "1x", "+1"}) {
    INFO(id);
    Output o = run(std::string("runs show ") + id + " --db " + db);
    INFO(o.err);
    CHECK(o.code == 1);
    CHECK(o.err.find("1..9223372036854775807") != std::string::npos);
    CHECK(o.out.empty());
  }
  CHECK(run("runs show 1 --db " + db).code == 0);
}

TEST_CASE("predict refuses non-finite inputs and an input without rows", "[cli][lies]") {
  const std::string db = trained_mlp_db();
  {  // all NaN: no confident class
    const fs::path npy = temp_dir() / "all-nan.npy";
    std::vector<float> v(2 * 28 * 28, std::numeric_limits<float>::quiet_NaN());
    REQUIRE(mls::data::write_npy_f32(npy.string(), {2, 28, 28}, v));
    Output o = run("predict " + example() + " --run 1 --db " + db + " --input " + npy.string());
    INFO(o.err);
    CHECK(o.code == 1);
    CHECK(o.out.empty());
    CHECK(o.err.find(npy.string()) != std::string::npos);
    CHECK(o.err.find("sample 0, value 0 is nan") != std::string::npos);
  }
  {  // one infinity among finite values: named where it is
    const fs::path npy = temp_dir() / "one-inf.npy";
    std::vector<float> v(2 * 28 * 28, 0.5f);
    v[28 * 28 + 30] = std::numeric_limits<float>::infinity();
    REQUIRE(mls::data::write_npy_f32(npy.string(), {2, 28, 28}, v));
    Output o = run("predict " + example() + " --run 1 --db " + db + " --input " + npy.string());
    CHECK(o.code == 1);
    CHECK(o.err.find("sample 1, value 30 is inf") != std::string::npos);
  }
  {  // a CSV with its header and no rows
    const std::string hdb = (temp_dir() / "lies-houses.db").string();
    REQUIRE(run("--run " + houses() + " --epochs 1 -q --db " + hdb).code == 0);
    const fs::path csv = temp_dir() / "header-only.csv";
    std::ofstream(csv) << "area_m2,rooms,age_years,district,price_k\n";
    Output o = run("predict " + houses() + " --run 1 --db " + hdb + " --input " + csv.string());
    INFO(o.err);
    CHECK(o.code == 1);
    CHECK(o.err.find(csv.string() + ": no rows to predict for") != std::string::npos);
  }
}

TEST_CASE("a project's batch size has the flag's limit, named with the file and field",
          "[cli][lies]") {
  const std::string p =
      variant("lies-batch.mls", "\"batch_size\": 128", "\"batch_size\": 1099511627776");
  Output o = run("graph " + p);
  INFO(o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find(p + ": /training/batch_size: must be an integer in [1, 16777216]") !=
        std::string::npos);
  const std::string e = variant("lies-epochs.mls", "\"epochs\": 10", "\"epochs\": 10000001");
  Output oe = run("graph " + e);
  CHECK(oe.code == 1);
  CHECK(oe.err.find(e + ": /training/epochs: must be an integer in [1, 10000000]") !=
        std::string::npos);
}

TEST_CASE("a validation split that leaves less than one batch to train on is warned about",
          "[cli][lies]") {
  const std::string p = variant("lies-validation.mls", "\"source\": \"fashion-mnist\",",
                                "\"source\": \"fashion-mnist\", \"validation\": 0.9999999,");
  const std::string db = (temp_dir() / "lies-validation.db").string();
  Output o = run("--run " + p + " --epochs 1 --limit 1000 --test-limit 100 --db " + db);
  INFO(o.err);
  CHECK(o.code == 0);
  CHECK(
      o.err.find(
          "warning: " + p +
          ": /dataset/validation 0.9999999 leaves 1 training sample, fewer than one batch (128)") !=
      std::string::npos);
  // A split that leaves whole batches says nothing.
  const std::string fine = variant("lies-validation-ok.mls", "\"source\": \"fashion-mnist\",",
                                   "\"source\": \"fashion-mnist\", \"validation\": 0.1,");
  Output ok = run("--run " + fine + " --epochs 1 --limit 1000 --test-limit 100 --db " + db);
  CHECK(ok.code == 0);
  CHECK(ok.err.find("/dataset/validation") == std::string::npos);
}

TEST_CASE("text from a file reaches the terminal without its escape sequences", "[cli][lies]") {
  // A node id and a project name holding ESC sequences (clear screen, set the window title).
  const std::string p = variant("lies-escape.mls", "\"id\": \"fc1\"",
                                "\"id\": \"fc1\\u001b[2J\\u001b]0;pwned\\u0007\"");
  Output o = run("graph " + p);
  CHECK(o.code == 1);
  CHECK(o.err.find('\x1b') == std::string::npos);
  CHECK(o.err.find('\a') == std::string::npos);
  CHECK(o.err.find("fc1\\x1b[2J\\x1b]0;pwned\\x07") != std::string::npos);

  const std::string named = variant("lies-escape-name.mls", "\"name\": \"Fashion-MNIST MLP\"",
                                    "\"name\": \"x\\u001b[2Jy\"");
  const std::string db = (temp_dir() / "lies-escape.db").string();
  REQUIRE(run("--run " + named + " --epochs 1 --limit 10 -q --db " + db).code == 0);
  Output list = run("runs list --db " + db);
  CHECK(list.code == 0);
  CHECK(list.out.find('\x1b') == std::string::npos);
  CHECK(list.out.find("x\\x1b[2Jy") != std::string::npos);
  Output show = run("runs show 1 --db " + db);
  CHECK(show.out.find('\x1b') == std::string::npos);
}

TEST_CASE("an unknown runs subcommand is named, with the valid ones", "[cli][lies]") {
  for (const char* sub : {"lst", "sweep"}) {
    Output o = run(std::string("runs ") + sub + " --db " + trained_mlp_db());
    INFO(o.err);
    CHECK(o.code == 1);
    CHECK(o.err.find(std::string("unknown subcommand '") + sub + "'") != std::string::npos);
    CHECK(o.err.find("'list', 'show', 'compare'") != std::string::npos);
    CHECK(o.err.find("'reproduce' or 'diff'") != std::string::npos);
  }
  Output none = run("runs");
  CHECK(none.code == 1);
  CHECK(none.err.find("'list', 'show', 'compare'") != std::string::npos);
}
