// `mlstudio compare-devices`: the table and the JSON on the MLP example, a device this build or
// machine lacks reported by name, and the bad inputs (a missing project, an unknown device, a
// run without a checkpoint) refused with a message and a non-zero exit.
#include <catch2/catch.hpp>

#include "cli_util.h"

using namespace mls::e2e;

TEST_CASE("compare-devices prints a row per node and phase, and names a device it could not use",
          "[e2e][compare_devices]") {
  Output o = run("compare-devices " + example() + " --devices cpu,vulkan:9 --batch 8 --limit 64");
  INFO(o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("float64 reference loss") != std::string::npos);
  CHECK(o.out.find("== cpu: cpu, loss") != std::string::npos);
  CHECK(o.out.find("forward   fc1          matmul,add") != std::string::npos);
  CHECK(o.out.find("backward  relu1        relu_backward") != std::string::npos);
  CHECK(o.out.find("== vulkan:9: not compared: ") != std::string::npos);
  CHECK(o.out.find("largest alone (kernel) (rel):") != std::string::npos);
  Output j = run("compare-devices " + example() + " --devices cpu --batch 8 --limit 64 --json");
  REQUIRE(j.code == 0);
  const std::string line = last_line(j.out);
  CHECK(line.find("\"batch_size\":8") != std::string::npos);
  CHECK(line.find("\"node\":\"fc3\"") != std::string::npos);
  CHECK(json_number(line, "reference_loss") > 1.0);
}

TEST_CASE("compare-devices refuses bad input with a message", "[e2e][compare_devices]") {
  Output missing = run("compare-devices " + (temp_dir() / "nope.mls").string());
  CHECK(missing.code != 0);
  CHECK(missing.err.find("nope.mls") != std::string::npos);
  Output unknown = run("compare-devices " + example() + " --devices cpu,tpu --limit 64");
  CHECK(unknown.code == 1);
  CHECK(unknown.err.find("unknown device 'tpu'") != std::string::npos);
  Output empty = run("compare-devices " + example() + " --devices cpu,,vulkan --limit 64");
  CHECK(empty.code == 1);
  CHECK(empty.err.find("an empty name") != std::string::npos);
  // A run: its checkpoint is the start; a run that does not exist is refused.
  const std::string db = (temp_dir() / "compare.db").string();
  Output train =
      run("--run " + example() + " --epochs 1 --limit 256 --test-limit 64 -q --db " + db);
  REQUIRE(train.code == 0);
  Output from =
      run("compare-devices " + example() + " --devices cpu --run 1 --limit 256 --db " + db);
  INFO(from.err);
  REQUIRE(from.code == 0);
  CHECK(from.out.find("from checkpoint run 1") != std::string::npos);
  CHECK(from.out.find("(step 2)") != std::string::npos);
  Output none =
      run("compare-devices " + example() + " --devices cpu --run 7 --limit 256 --db " + db);
  CHECK(none.code == 1);
  CHECK(none.err.find("7") != std::string::npos);
}
