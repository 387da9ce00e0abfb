// The first node at fault (engine/train/fault_finder.h): a NaN written by a test-only op in
// forward or in backward, a parameter holding inf, a NaN in the data and an overflow from
// finite values are each named where they start; an all-finite step names nothing.
#include <cmath>
#include <cstdlib>
#include <limits>

#include "engine/core/backend_registry.h"
#include "engine/train/fault_finder.h"
#include "fault_test_ops.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

// The value's leading number in "act1 (relu): max |x| 4.5e+20".
double max_abs_of(const std::string& operand) {
  const size_t at = operand.find("max |x| ");
  REQUIRE(at != std::string::npos);
  return std::strtod(operand.c_str() + at + 8, nullptr);
}

}  // namespace

TEST_CASE("a NaN written in forward is named at its node, with its index and operand", "[fault]") {
  check_forward_probe(host());
}

TEST_CASE("the fault finder replays the autocast step: bf16 finds the same forward node",
          "[fault]") {
  register_fault_probes();
  const ModelBuilder build = probed_mlp(6, {8, 8}, 3, Probe{"test_nan_at", "fc1", 9});
  auto m = build(4, true);
  REQUIRE(m.ok());
  const std::vector<Tensor> params = small_params(host(), *m);
  const HostBatch batch = probe_batch(4, 6, 3);
  auto f = find_first_fault({.backend = &host(),
                             .build = &build,
                             .params = params,
                             .batch = &batch,
                             .precision = Precision::BF16});
  REQUIRE(f.ok());
  REQUIRE(f->has_value());
  CHECK((*f)->phase == FaultSite::Phase::Forward);
  CHECK((*f)->label == "probe");
  CHECK((*f)->stats.first_non_finite == 9);
  REQUIRE((*f)->inputs.size() == 1);
  CHECK((*f)->inputs[0].rfind("act1 (relu) [4,8]", 0) == 0);
}

TEST_CASE("a NaN written in backward is named at the backward node, after a finite forward",
          "[fault]") {
  register_fault_probes();
  const ModelBuilder build = probed_mlp(6, {8, 8}, 3, Probe{"test_grad_nan", "fc1", 2});
  auto m = build(4, true);
  REQUIRE(m.ok());
  const size_t forward_nodes = m->graph.nodes().size();
  const std::vector<Tensor> params = small_params(host(), *m);
  const HostBatch batch = probe_batch(4, 6, 3);
  auto f =
      find_first_fault({.backend = &host(), .build = &build, .params = params, .batch = &batch});
  REQUIRE(f.ok());
  REQUIRE(f->has_value());
  const FaultSite& s = **f;
  CHECK(s.phase == FaultSite::Phase::Backward);
  CHECK(s.label == "probe");  // the forward node whose gradient rule wrote it
  CHECK(s.op == "test_nan_at");
  CHECK(static_cast<size_t>(s.node) >= forward_nodes);
  CHECK(s.stats.first_non_finite == 2);
  CHECK(s.stats.nan == 1);
  CHECK(s.stats.shape == Shape{4, 8});
  REQUIRE(s.inputs.size() == 1);
  // Its operand is the gradient arriving from fc2 (finite).
  CHECK(s.inputs[0].find("backward") != std::string::npos);
  CHECK(s.inputs[0].find("nan") == std::string::npos);
  const std::string text = describe_fault(s, 7);
  CHECK(text.find("step 7") != std::string::npos);
  CHECK(text.find("'probe' (test_nan_at, backward)") != std::string::npos);

  // Without the probe the same step is finite throughout: the forward the finder checked
  // first had nothing to find.
  const ModelBuilder clean = probed_mlp(6, {8, 8}, 3);
  auto none =
      find_first_fault({.backend = &host(), .build = &clean, .params = params, .batch = &batch});
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("a parameter holding inf and a sample holding NaN are named before any node", "[fault]") {
  const ModelBuilder build = probed_mlp(6, {8}, 3);
  auto m = build(4, true);
  REQUIRE(m.ok());
  std::vector<Tensor> params = small_params(host(), *m);
  HostBatch batch = probe_batch(4, 6, 3);

  SECTION("a parameter") {
    REQUIRE(m->graph.value(m->graph.params()[2]).name == "fc2.weight");
    std::vector<float> w = params[2].to_f32();
    w[3] = std::numeric_limits<float>::infinity();
    w[10] = -std::numeric_limits<float>::infinity();
    params[2].fill_from_host(w);
    auto f =
        find_first_fault({.backend = &host(), .build = &build, .params = params, .batch = &batch});
    REQUIRE(f.ok());
    REQUIRE(f->has_value());
    CHECK((*f)->phase == FaultSite::Phase::Parameter);
    CHECK((*f)->label == "fc2.weight");
    CHECK((*f)->op.empty());
    CHECK((*f)->node == -1);
    CHECK((*f)->stats.first_non_finite == 3);
    CHECK((*f)->stats.pos_inf == 1);
    CHECK((*f)->stats.neg_inf == 1);
    CHECK(describe_fault(**f, 0).find("parameter 'fc2.weight'") != std::string::npos);
  }
  SECTION("an input sample, even with a bad parameter too") {
    batch.x[13] = std::nanf("");  // sample 2, feature 1
    std::vector<float> w = params[0].to_f32();
    w[0] = std::numeric_limits<float>::infinity();
    params[0].fill_from_host(w);
    auto f =
        find_first_fault({.backend = &host(), .build = &build, .params = params, .batch = &batch});
    REQUIRE(f.ok());
    REQUIRE(f->has_value());
    CHECK((*f)->phase == FaultSite::Phase::Input);
    CHECK((*f)->label == "x");
    CHECK((*f)->stats.first_non_finite == 13);
    CHECK((*f)->stats.nan == 1);
    CHECK((*f)->stats.shape == Shape{4, 6});
  }
}

TEST_CASE("an overflow from finite weights is named at the matmul, with its operands' ranges",
          "[fault]") {
  // 6 -> 8 -> 3, every weight 1e20, biases 0, inputs in [0.5, 1): fc1's product is about
  // 4.5e20 (finite), fc2's about 3.6e41: past f32's 3.4e38.
  const ModelBuilder build = probed_mlp(6, {8}, 3);
  auto m = build(4, true);
  REQUIRE(m.ok());
  std::vector<Tensor> params;
  for (Ref r : m->graph.params()) {
    const ValueType t = m->graph.type_of(r);
    const bool weight = m->graph.value(r).name.ends_with(".weight");
    params.push_back(Tensor::from_f32(
        host(), t.shape,
        std::vector<float>(static_cast<size_t>(numel(t.shape)), weight ? 1e20f : 0.f),
        AllocTag::Parameter));
  }
  const HostBatch batch = probe_batch(4, 6, 3);
  auto f =
      find_first_fault({.backend = &host(), .build = &build, .params = params, .batch = &batch});
  REQUIRE(f.ok());
  REQUIRE(f->has_value());
  const FaultSite& s = **f;
  CHECK(s.phase == FaultSite::Phase::Forward);
  CHECK(s.label == "fc2");
  CHECK(s.op == "matmul");
  CHECK(s.stats.pos_inf == 12);  // [4, 3], every one
  CHECK(s.stats.first_non_finite == 0);
  REQUIRE(s.inputs.size() == 2);
  INFO(s.inputs[0] << " | " << s.inputs[1]);
  CHECK(s.inputs[0].rfind("act1 (relu) [4,8]: max |x| ", 0) == 0);
  const double h = max_abs_of(s.inputs[0]);
  CHECK(h > 6 * 0.5e20);  // six inputs >= 0.5, each times 1e20
  CHECK(h < 6 * 1e20);
  CHECK(s.inputs[1] == "fc2.weight [8,3]: max |x| 1e+20");
  const std::string text = describe_fault(s, 12);
  INFO(text);
  CHECK(text.find("'fc2' (matmul, forward)") != std::string::npos);
  CHECK(text.find("12 +inf of 12 values [4,3]") != std::string::npos);
  CHECK(text.find("flat index 0") != std::string::npos);
  CHECK(text.find("fc2.weight [8,3]: max |x| 1e+20") != std::string::npos);
}

TEST_CASE("an all-finite step has no fault, and a query that does not fit is an error", "[fault]") {
  const ModelBuilder build = probed_mlp(6, {8, 8}, 3);
  auto m = build(5, true);
  REQUIRE(m.ok());
  const std::vector<Tensor> params = small_params(host(), *m);
  const HostBatch batch = probe_batch(5, 6, 3);
  auto f =
      find_first_fault({.backend = &host(), .build = &build, .params = params, .batch = &batch});
  REQUIRE(f.ok());
  CHECK_FALSE(f->has_value());

  auto missing = find_first_fault({.backend = &host(),
                                   .build = &build,
                                   .params = std::span<const Tensor>(params).first(3),
                                   .batch = &batch});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("6 parameters, the query 3") != std::string::npos);
}

TEST_CASE("a NaN written in forward is named on Vulkan too", "[fault][vulkan]") {
  // engine_tests registers the CPU alone; gpu_tests (tests/gpu/fault_finder_gpu_test.cpp)
  // runs this case on lavapipe.
  auto vk = backend_registry().open("vulkan");
  if (!vk) {
    WARN("SKIPPED on this binary: " << vk.error().message);
    return;
  }
  check_forward_probe(**vk);
}

TEST_CASE("describe_fault names a scalar's fault without an index, and every operand", "[fault]") {
  FaultSite f;
  f.phase = FaultSite::Phase::Forward;
  f.label = "loss";
  f.op = "mean";
  f.node = 9;
  f.stats = tensor_stats(std::vector<double>{-std::numeric_limits<double>::infinity()}, Shape{});
  f.inputs = {"loss (sum) [64]: max |x| 3.02e+37"};
  const std::string text = describe_fault(f, 3);
  CHECK(text ==
        "The first non-finite value of step 3 is in the output of 'loss' (mean, forward): 1 -inf "
        "(a scalar). Its inputs: loss (sum) [64]: max |x| 3.02e+37.");
}
