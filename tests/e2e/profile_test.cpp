// The instruments from the command line: the pre-flight estimate held against the measured
// peak, and `--profile FILE.json`, a Chrome trace with a span per executed kernel.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.h"

using namespace mls::e2e;

namespace {

std::string example_path(const std::string& name) {
  return std::string(MLS_SOURCE_DIR) + "/resources/examples/" + name;
}

}  // namespace

TEST_CASE("the pre-flight estimate of peak memory is within 10% of the measured peak for the MLP and CNN examples",
          "[e2e][profile]") {
  for (const char* project : {"fashion-mnist-mlp.mls", "fashion-mnist-cnn.mls"}) {
    INFO(project);
    const std::string db = (temp_dir() / "preflight.db").string();
    Output o = run("--run " + example_path(project) + " --epochs 1 --limit 1500 --test-limit 500 --json --db " + db);
    REQUIRE(o.code == 0);
    const auto j = nlohmann::json::parse(last_line(o.out));
    const double estimate = j["estimated_peak_bytes"], measured = j["peak_bytes"];
    INFO("estimate " << estimate << " measured " << measured);
    CHECK(measured > 1e6);  // a real run: parameters, optimizer state, the plans
    CHECK(std::abs(estimate - measured) <= 0.10 * measured);
    CHECK(j["estimated_step_seconds"].get<double>() > 0);
    CHECK(j["max_batch"].get<int64_t>() > 128);  // a machine that runs these tests holds more than one batch
    CHECK(o.err.find("pre-flight: the run will hold") != std::string::npos);
    CHECK(o.err.find("estimate vs measured") != std::string::npos);
  }
}

TEST_CASE("the trace of --profile is Chrome JSON with one span per executed kernel of every step", "[e2e][profile]") {
  const std::string trace = (temp_dir() / "trace.json").string();
  const std::string db = (temp_dir() / "trace.db").string();
  // 1280 samples: ten full steps of the example's batch of 128, all on one plan.
  Output o = run("--run " + example() + " --epochs 1 --limit 1280 --test-limit 200 --json --db " + db +
                 " --profile " + trace);
  REQUIRE(o.code == 0);
  const auto result = nlohmann::json::parse(last_line(o.out));
  CHECK(result["profile"] == trace);
  const int64_t steps = result["steps"];
  REQUIRE(steps == 10);

  // The kernels of the compiled step: the plan's nodes that are not views.
  Output plan = run("graph " + example() + " --plan");
  REQUIRE(plan.code == 0);
  int64_t kernels = 0;
  std::stringstream lines(plan.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  ", 0) == 0 && line.find(" w") != std::string::npos && line.find("(view)") == std::string::npos)
      ++kernels;
  REQUIRE(kernels > 10);

  const auto j = nlohmann::json::parse(read_file(trace));  // throws, failing the test, if it is not JSON
  REQUIRE(j.is_object());
  REQUIRE(j["traceEvents"].is_array());
  std::map<std::string, int64_t> spans_per_step;
  int64_t spans = 0, counters = 0, step_spans = 0, eval_spans = 0;
  double counter_max = 0;
  for (const auto& e : j["traceEvents"]) {
    // Chrome's trace-event format: every event names its phase, process and thread.
    REQUIRE(e["name"].is_string());
    REQUIRE(e["ph"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    REQUIRE(e["ts"].is_number());
    if (ph == "X") {
      REQUIRE(e["dur"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      if (e["cat"] == "op") {
        ++spans;
        ++spans_per_step[e["args"]["step"].get<std::string>()];
      }
      if (e["cat"] == "step") ++step_spans;
      if (e["cat"] == "eval") ++eval_spans;
    } else if (ph == "C") {
      ++counters;
      double sum = 0;
      for (const auto& [k, v] : e["args"].items()) {
        CHECK(v.get<double>() >= 0);
        sum += v.get<double>();
      }
      counter_max = std::max(counter_max, sum);
    }
  }
  CHECK(step_spans == steps);
  CHECK(spans == steps * kernels);
  CHECK(spans_per_step.size() == static_cast<size_t>(steps));
  for (const auto& [step, n] : spans_per_step) CHECK(n == kernels);
  CHECK(counters >= steps);
  // The test evaluation's kernels and memory are in the trace too, so its memory counters
  // reach the run's peak (the evaluation plan lives beside the training plan).
  CHECK(eval_spans > 0);
  const double peak = result["peak_bytes"];
  INFO("trace peak " << counter_max << " run peak " << peak);
  CHECK(std::abs(counter_max - peak) <= 0.01 * peak);
}

TEST_CASE("a trace path that cannot be written is refused before training, naming it (--profile)", "[e2e][profile]") {
  Output o = run("--run " + example() + " --epochs 1 --limit 256 --db " + (temp_dir() / "bad.db").string() +
                 " --profile /nonexistent-dir/run.json");
  CHECK(o.code == 1);
  CHECK(o.err.find("/nonexistent-dir/run.json") != std::string::npos);
  CHECK(o.err.find("epoch 1") == std::string::npos);  // refused before any training
  Output alone = run("--profile " + (temp_dir() / "x.json").string());
  CHECK(alone.code == 1);
  CHECK(alone.err.find("--run") != std::string::npos);
}

TEST_CASE("a run whose step the pre-flight says will not fit in free memory is refused before it allocates",
          "[e2e][profile]") {
  // fc1 with 16 million outputs: 784 x 16e6 weights, 54 GiB of parameters alone.
  const std::string project =
      variant("huge.mls", "\"out_features\": 256", "\"out_features\": 16000000");
  const std::string db = (temp_dir() / "huge.db").string();
  std::filesystem::remove(db);
  Output o = run("--run " + project + " --epochs 1 --limit 256 --test-limit 64 --db " + db);
  INFO(o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("the run needs") != std::string::npos);
  CHECK(o.err.find("the run was not started") != std::string::npos);
  CHECK(o.err.find("--no-memory-check") != std::string::npos);
  CHECK(o.err.find("recorded as failed in " + db) != std::string::npos);
  CHECK(o.err.find("epoch 1") == std::string::npos);
  Output runs = run("runs list --db " + db);
  CHECK(runs.out.find("failed") != std::string::npos);
}
