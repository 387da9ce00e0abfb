// compare-devices (runner/device_compare.h): the CPU against the float64 reference on the MLP
// example, a deliberately wrong relu kernel named as the one kernel at fault, Vulkan (lavapipe)
// where this build and machine have it, and the devices a build lacks reported, not skipped.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <string>

#include "engine/core/backend_registry.h"
#include "engine/core/op.h"
#include "engine/core/tensor.h"
#include "runner/backends.h"
#include "runner/device_compare.h"

using namespace mls;
using namespace mls::runner;

namespace {

const std::string kMlp = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls";
const std::string kCnn = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-cnn.mls";

Project open(const std::string& path) {
  runner::init_backends();
  ProjectOptions o;
  o.path = path;
  o.limit = 64;
  o.test_limit = 16;
  auto p = open_project(o);
  REQUIRE(p.ok());
  return std::move(*p);
}

CompareReport compare(const std::string& path, std::vector<std::string> devices,
                      int64_t batch_size = 16) {
  Project p = open(path);
  CompareOptions o;
  o.devices = std::move(devices);
  o.batch_size = batch_size;
  auto r = compare_devices(p, o);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(*r);
}

// The relu kernel of the CPU, and a wrong one: 1e-3 too high everywhere.
KernelFn g_relu = nullptr;
void wrong_relu(const KernelCall& call) {
  g_relu(call);
  Tensor& out = *call.outputs[0];
  std::vector<float> v = out.to_f32();
  for (float& x : v) x += 1e-3f;
  out.fill_from_host(v);
}

}  // namespace

TEST_CASE("compare-devices: the CPU against the float64 reference on the MLP", "[device_compare]") {
  CompareReport r = compare(kMlp, {"cpu"});
  REQUIRE(r.devices.size() == 1);
  const DeviceCompare& d = r.devices[0];
  REQUIRE(d.ran);
  CHECK(r.batch_size == 16);
  CHECK(r.step == 0);
  // The reference loss of an untrained 10-class model: a few nats (ln 10 = 2.3 for a uniform
  // guess).
  CHECK(r.reference_loss > 1.0);
  CHECK(r.reference_loss < 6.0);
  CHECK(std::abs(d.loss - r.reference_loss) < 1e-5);
  // Rows: every document node that ran, forward then backward, in execution order.
  std::set<std::string> fw;
  for (const NodeDiff& n : d.nodes)
    if (n.phase == StepPhase::Forward) fw.insert(n.label);
  CHECK(fw == std::set<std::string>{"flat", "fc1", "relu1", "fc2", "relu2", "fc3", "loss"});
  for (size_t i = 0; i < d.nodes.size(); ++i) CHECK(d.nodes[i].order == static_cast<int>(i));
  REQUIRE(find_node(d, "fc1", StepPhase::Forward) != nullptr);
  REQUIRE(find_node(d, "fc1", StepPhase::Backward) != nullptr);
  CHECK(find_node(d, "fc1", StepPhase::Forward)->ops == std::vector<std::string>{"matmul", "add"});
  // f32 against f64: small, but not zero (fc1's 784-term sums round).
  double worst_chained = 0, worst_alone = 0;
  for (const NodeDiff& n : d.nodes) {
    INFO(n.label << " " << step_phase_name(n.phase) << " " << n.chained.worst);
    CHECK(n.chained.finite);
    CHECK(n.chained.max_rel < 1e-5);
    CHECK(n.alone.max_rel < 1e-5);
    CHECK(n.host_ops.empty());
    worst_chained = std::max(worst_chained, n.chained.max_rel);
    worst_alone = std::max(worst_alone, n.alone.max_rel);
  }
  CHECK(worst_chained > 0);
  CHECK(worst_alone > 0);
  CHECK(find_node(d, "fc1", StepPhase::Forward)->alone.max_abs > 0);
  // flat is a reshape: exact.
  CHECK(find_node(d, "flat", StepPhase::Forward)->chained.max_abs == 0);
  // Parameter gradients: six, each close.
  REQUIRE(d.params.size() == 6);
  CHECK(d.params[0].param == "fc1.weight");
  CHECK(d.params[0].node == "fc1");
  for (const ParamGradDiff& p : d.params) {
    INFO(p.param);
    CHECK(p.chained.max_rel < 1e-5);
    CHECK(p.chained.elements > 0);
  }
  // The table and the JSON name the nodes.
  const std::string t = format_compare_table(r, {.threshold = 1e-12});
  CHECK(t.find("fc1") != std::string::npos);
  CHECK(t.find("largest alone") != std::string::npos);
  CHECK(t.find("rows over the threshold") != std::string::npos);
  CHECK(compare_json(r).find("\"node\":\"relu2\"") != std::string::npos);
}

TEST_CASE("compare-devices: a wrong relu kernel is the one kernel named, not its downstream",
          "[device_compare]") {
  OpRegistry& reg = op_registry();
  const OpDef* relu = reg.find("relu");
  REQUIRE(relu != nullptr);
  g_relu = relu->kernel(DeviceKind::CPU, DType::F32);
  REQUIRE(g_relu != nullptr);
  reg.register_kernel("relu", DeviceKind::CPU, DType::F32, wrong_relu);
  auto restore = [&] { reg.register_kernel("relu", DeviceKind::CPU, DType::F32, g_relu); };
  CompareReport r;
  try {
    r = compare(kMlp, {"cpu"});
  } catch (...) {
    restore();
    throw;
  }
  restore();
  const DeviceCompare& d = r.devices.at(0);
  // Kernel alone: exactly the two relu nodes' forward are off by 1e-3; every other kernel,
  // fed the reference's inputs, stays at f32 rounding.
  std::set<std::string> bad;
  for (const NodeDiff& n : d.nodes) {
    INFO(n.label << " " << step_phase_name(n.phase) << " alone " << n.alone.max_abs);
    if (n.alone.max_abs > 1e-4) bad.insert(n.label + " " + std::string(step_phase_name(n.phase)));
  }
  CHECK(bad == std::set<std::string>{"relu1 forward", "relu2 forward"});
  CHECK(std::abs(find_node(d, "relu1", StepPhase::Forward)->alone.max_abs - 1e-3) < 1e-6);
  // Chained, the error flows downstream: fc2 and later differ too, so only `alone` tells
  // the kernel from its consequences.
  CHECK(find_node(d, "fc2", StepPhase::Forward)->chained.max_abs > 1e-4);
  CHECK(find_node(d, "fc2", StepPhase::Forward)->alone.max_abs < 1e-4);
  // The summary of the table names a relu first among the kernels.
  const std::string t = format_compare_table(r, {.metric = DiffMetric::Abs});
  const size_t at = t.find("largest alone (kernel) (abs): ");
  REQUIRE(at != std::string::npos);
  CHECK(t.compare(at + 30, 4, "relu") == 0);
  // The kernel is back: a fresh comparison is clean.
  CompareReport again = compare(kMlp, {"cpu"});
  CHECK(find_node(again.devices.at(0), "relu1", StepPhase::Forward)->alone.max_abs < 1e-6);
}

TEST_CASE("compare-devices: devices this build lacks are reported, unknown ones refused",
          "[device_compare]") {
  {
    Project p = open(kMlp);
    CompareOptions o;
    o.devices = {"cpu", "tpu"};
    auto r = compare_devices(p, o);
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("unknown device 'tpu'") != std::string::npos);
  }
  // A device of a known kind that does not open here: a row saying why.
  CompareReport r = compare(kMlp, {"cpu", "vulkan:7"}, 8);
  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[0].ran);
  CHECK(!r.devices[1].ran);
  CHECK(!r.devices[1].status.empty());
  CHECK(r.devices[1].nodes.empty());
  const std::string t = format_compare_table(r);
  CHECK(t.find("vulkan:7: not compared: ") != std::string::npos);
}

TEST_CASE("compare-devices: from a checkpoint, the step and batch follow it", "[device_compare]") {
  Project p = open(kMlp);
  Backend& cpu = **backend_registry().open("cpu");
  TrainConfig c = p.train_config();
  c.batch_size = 16;
  Trainer t(cpu, p.builder(), c);
  REQUIRE(t.init().ok());
  p.train->start_epoch(0);
  HostBatch b;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.train->next(16, b));
    REQUIRE(t.train_step(b).ok());
  }
  auto st = t.state();
  REQUIRE(st.ok());
  CompareOptions o;
  o.devices = {"cpu"};
  o.batch_size = 16;
  o.start = &*st;
  o.start_name = "three steps";
  auto r = compare_devices(p, o);
  REQUIRE(r.ok());
  CHECK(r->step == 3);
  CHECK(r->batch == 3);
  CHECK(r->start.find("three steps (step 3)") != std::string::npos);
  CHECK(r->devices[0].ran);
  for (const NodeDiff& n : r->devices[0].nodes) CHECK(n.chained.max_rel < 1e-5);
}

TEST_CASE("compare-devices: Vulkan against the reference, where there is one", "[device_compare]") {
  for (const std::string& path : {kMlp, kCnn}) {
    CompareReport r = compare(path, {"cpu", "vulkan"}, 8);
    const DeviceCompare& v = r.devices.at(1);
    if (!v.ran) {
      WARN("SKIPPED: vulkan not compared: " << v.status);
      return;
    }
    const DeviceCompare& c = r.devices.at(0);
    REQUIRE(v.nodes.size() == c.nodes.size());
    CHECK(std::abs(v.loss - r.reference_loss) < 1e-4);
    for (const NodeDiff& n : v.nodes) {
      INFO(path << ": " << n.label << " " << step_phase_name(n.phase) << " " << n.alone.worst);
      CHECK(n.chained.finite);
      CHECK(n.alone.max_rel < 1e-4);
      CHECK(n.chained.max_rel < 1e-3);
    }
  }
}

TEST_CASE("compare-devices: --advance compares the step a run takes after N steps",
          "[device_compare]") {
  // The run's own losses: four steps of the project's compiled training step.
  Project p = open(kMlp);
  TrainConfig c = p.train_config();
  c.max_steps = 4;
  Trainer t(**backend_registry().open("cpu"), p.builder(), c);
  auto fit = t.fit({.train = *p.train});
  REQUIRE(fit.ok());
  REQUIRE(fit->step_losses.size() == 4);
  CompareOptions o;
  o.devices = {"cpu"};
  o.advance = 3;
  Project q = open(kMlp);
  auto r = compare_devices(q, o);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->step == 3);
  CHECK(r->batch == 3);
  CHECK(r->start.find("then 3 steps on the CPU") != std::string::npos);
  // The fourth step's loss, in float64 against the run's f32: the same step on the same batch.
  CHECK(std::abs(r->reference_loss - fit->step_losses[3]) < 1e-5);
  CHECK(std::abs(r->reference_loss - fit->step_losses[2]) > 1e-3);
  // From a checkpoint as well: refused (one start at a time).
  auto st = t.state();
  REQUIRE(st.ok());
  o.start = &*st;
  auto both = compare_devices(q, o);
  REQUIRE(!both.ok());
  CHECK(both.error().message.find("not a checkpoint") != std::string::npos);
}
