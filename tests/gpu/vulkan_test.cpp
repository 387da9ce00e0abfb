// The Vulkan backend on whatever device the loader finds first (Mesa's lavapipe on the CI
// machines): copies, bindings at any offset, the buffer cache, kernels on shapes larger than
// the conformance samples (tile edges, workgroup reductions), plans that replay a recorded
// step, and nodes the device lacks running on the host with explicit transfers.
#include <cmath>

#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/fused.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"
#include "tests/engine/test_util.h"
#include "tests/gpu/gpu_test_util.h"

#ifdef MLSTUDIO_HAVE_VULKAN

using namespace mls;
using namespace mls::test;

namespace {

vulkan::VulkanBackend* open_vulkan() {
  Backend* b = open_or_skip("vulkan");
  return b ? static_cast<vulkan::VulkanBackend*>(b) : nullptr;
}

std::vector<float> randoms(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

Tensor on(Backend& b, const Shape& s, const std::vector<float>& v) { return Tensor::from_f32(b, s, v); }

// max |a - b| / (1 + |b|)
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  return m;
}

}  // namespace

TEST_CASE("vulkan: the device opens and lists itself", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  auto devices = vulkan::list_devices();
  REQUIRE(devices.ok());
  REQUIRE(!devices->empty());
  CHECK(vk->name() == "vulkan");
  CHECK(vk->device_name() == (*devices)[0].name);
  CHECK(vk->kind() == DeviceKind::Vulkan);
  CHECK(!vk->default_buffer_type().host_accessible());
  // A second device that is not there is a clear error, not a crash.
  auto missing = backend_registry().open("vulkan:" + std::to_string(devices->size()));
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("Vulkan device") != std::string::npos);
}

TEST_CASE("vulkan: copies to and from the device and between buffers keep every byte", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  std::vector<uint8_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  auto a = vk->allocate(1000, AllocTag::Other);
  auto b = vk->allocate(1500, AllocTag::Other);
  vk->copy_to_device(*a, 0, src.data(), src.size());
  vk->copy_device(*a, 100, *b, 333, 600);  // odd offsets
  std::vector<uint8_t> out(600);
  vk->copy_to_host(*b, 333, out.data(), out.size());
  for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == src[100 + i]);
  Tensor t = Tensor::from_i64(*vk, {3}, {-5, int64_t{1} << 40, 7});
  CHECK(t.to_f64() == std::vector<double>{-5, static_cast<double>(int64_t{1} << 40), 7});
}

TEST_CASE("vulkan: freed buffers are reused from the cache and the tracker counts live ones", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  vk->release_cached();
  const auto before = vk->memory().stats();
  {
    auto a = vk->allocate(5000, AllocTag::Activation);
    CHECK(vk->memory().stats().current[tag_index(AllocTag::Activation)] -
              before.current[tag_index(AllocTag::Activation)] ==
          5000);
  }
  const size_t cached = vk->cached_bytes();
  CHECK(cached >= 5000);
  CHECK(vk->memory().stats().current[tag_index(AllocTag::Activation)] == before.current[tag_index(AllocTag::Activation)]);
  auto b = vk->allocate(4900, AllocTag::Activation);  // the same size class: from the cache
  CHECK(vk->cached_bytes() < cached);
}

TEST_CASE("vulkan: kernels read views at any offset and write into slices", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  std::vector<float> v = randoms(7 * 9, 1);
  Tensor x = on(*vk, {7, 9}, v);
  Tensor xc = on(host(), {7, 9}, v);
  // Rows 1..5, columns 1..8: a view starting 10 floats in, not at an aligned offset.
  EagerSession s(*vk), c(host());
  Tensor view = x.slice(0, 1, 6).slice(1, 1, 9);
  Tensor cview = xc.slice(0, 1, 6).slice(1, 1, 9);
  Ref y = exp(s, s.leaf(view));
  Ref yc = exp(c, c.leaf(cview));
  CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-6);
  Ref t = s.emit1("transpose", {s.leaf(x)}, {{"perm", std::vector<int64_t>{1, 0}}});
  Ref tc = c.emit1("transpose", {c.leaf(xc)}, {{"perm", std::vector<int64_t>{1, 0}}});
  CHECK(s.value(t).to_f64() == c.value(tc).to_f64());
}

TEST_CASE("vulkan: GEMMs across tile edges, transposes, batches, bias and activation match the CPU", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{{130, 70}, {70, 97}, false, false}, {{70, 130}, {97, 70}, true, true},
                        {{3, 65, 33}, {33, 64}, false, false}, {{2, 33, 65}, {2, 129, 33}, true, true},
                        {{1, 1}, {1, 200}, false, false}};
  uint64_t seed = 10;
  for (const Case& k : cases) {
    INFO(shape_str(k.a) << (k.ta ? "^T" : "") << " x " << shape_str(k.b) << (k.tb ? "^T" : ""));
    auto va = randoms(static_cast<size_t>(numel(k.a)), seed++), vb = randoms(static_cast<size_t>(numel(k.b)), seed++);
    EagerSession s(*vk), c(host());
    Ref y = matmul(s, s.leaf(on(*vk, k.a, va)), s.leaf(on(*vk, k.b, vb)), k.ta, k.tb);
    Ref yc = matmul(c, c.leaf(on(host(), k.a, va)), c.leaf(on(host(), k.b, vb)), k.ta, k.tb);
    CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
  }
  // linear_act: x [150, 90] w [90, 70] + bias, each activation of the epilogue.
  auto vx = randoms(150 * 90, 1), vw = randoms(90 * 70, 2), vb = randoms(70, 3);
  for (const auto& [act, name] : kEpilogueActs) {
    INFO(name);
    EagerSession s(*vk), c(host());
    Ref y = linear_act(s, s.leaf(on(*vk, {150, 90}, vx)), s.leaf(on(*vk, {90, 70}, vw)), s.leaf(on(*vk, {70}, vb)), name);
    Ref yc = linear_act(c, c.leaf(on(host(), {150, 90}, vx)), c.leaf(on(host(), {90, 70}, vw)),
                        c.leaf(on(host(), {70}, vb)), name);
    CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
  }
}

TEST_CASE("vulkan: reductions large enough for a workgroup each, and softmax rows, match the CPU", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  auto v = randoms(300 * 70, 5);
  const std::vector<std::vector<int64_t>> axes{{0}, {1}, {}, {0, 1}};
  for (const auto& ax : axes) {
    for (const char* op : {"sum", "mean", "max", "min"}) {
      INFO(op << " over " << ax.size() << " axes");
      EagerSession s(*vk), c(host());
      Attrs a{{"axes", ax}, {"keepdims", int64_t{0}}};
      Ref y = s.emit1(op, {s.leaf(on(*vk, {300, 70}, v))}, a);
      Ref yc = c.emit1(op, {c.leaf(on(host(), {300, 70}, v))}, a);
      CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
    }
  }
  EagerSession s(*vk), c(host());
  Ref y = s.emit1("log_softmax", {s.leaf(on(*vk, {300, 70}, v))}, {{"axis", int64_t{1}}});
  Ref yc = c.emit1("log_softmax", {c.leaf(on(host(), {300, 70}, v))}, {{"axis", int64_t{1}}});
  CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
}

// Lavapipe ends an invocation's loops after ~65535 iterations: kernels must spread long
// sums over a workgroup (this once summed 65533 of 70000 rows, and a LeNet weight gradient
// 65535 of its 100352 terms).
TEST_CASE("vulkan: sums longer than 65535 terms are whole", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  for (int64_t rows : {int64_t{70000}, int64_t{140000}}) {
    EagerSession s(*vk);
    Ref y = sum(s, s.leaf(on(*vk, {rows, 16}, std::vector<float>(static_cast<size_t>(rows * 16), 1.0f))), {0}, false);
    CHECK(s.value(y).to_f64() == std::vector<double>(16, static_cast<double>(rows)));
  }
  // conv1's weight gradient in the Fashion-MNIST CNN: 128 x 28 x 28 products per weight.
  const auto vx = randoms(128 * 28 * 28, 3), vg = randoms(128 * 6 * 28 * 28, 4);
  const Attrs a{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{2, 2}},
                {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t{1}},
                {"weight_shape", std::vector<int64_t>{6, 1, 5, 5}}};
  EagerSession s(*vk), c(host());
  Ref y = s.emit1("conv2d_backward_weight", {s.leaf(on(*vk, {128, 1, 28, 28}, vx)), s.leaf(on(*vk, {128, 6, 28, 28}, vg))}, a);
  Ref yc = c.emit1("conv2d_backward_weight",
                   {c.leaf(on(host(), {128, 1, 28, 28}, vx)), c.leaf(on(host(), {128, 6, 28, 28}, vg))}, a);
  // Sums of 100352 products in f32, in two orders: about 1e-4 apart; a lost part is ~1.
  CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-3);
}

TEST_CASE("vulkan: a compiled step is recorded once and replayed, reading new inputs", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {64, 32}});
  Ref w = g.add_param("w", {DType::F32, {32, 16}});
  Ref h = relu(g, matmul(g, x, w));
  Ref loss = mean(g, mul(g, h, h), {}, false);
  g.set_outputs({loss, h});
  auto plan = CompiledPlan::compile(g, *vk);
  REQUIRE(plan.ok());
  Tensor xt = on(*vk, {64, 32}, randoms(64 * 32, 1));
  Tensor wt = on(*vk, {32, 16}, randoms(32 * 16, 2));
  REQUIRE(plan->bind(x, xt).ok());
  REQUIRE(plan->bind(w, wt).ok());
  plan->run();
  CHECK(plan->replaying());
  const double first = plan->tensor(loss).to_f64()[0];
  const uint64_t dispatches = vk->dispatch_count();
  const uint64_t submits = vk->submit_count();
  // New input values, same buffer: the replay reads them.
  auto vx2 = randoms(64 * 32, 3);
  xt.fill_from_host(vx2);
  plan->run();
  CHECK(vk->dispatch_count() == dispatches);  // nothing recorded again
  CHECK(vk->submit_count() > submits);
  const double second = plan->tensor(loss).to_f64()[0];
  CHECK(second != first);
  // The same step on the CPU gives the same loss.
  auto cplan = CompiledPlan::compile(g, host());
  REQUIRE(cplan.ok());
  REQUIRE(cplan->bind(x, on(host(), {64, 32}, vx2)).ok());
  REQUIRE(cplan->bind(w, on(host(), {32, 16}, randoms(32 * 16, 2))).ok());
  cplan->run();
  CHECK(std::abs(second - cplan->tensor(loss).to_f64()[0]) <= 1e-5 * std::abs(second));
}

TEST_CASE("vulkan: a node the device has no kernel for runs on the host with explicit transfers", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  const OpDef* emb = op_registry().find("embedding");
  REQUIRE(emb);
  REQUIRE(!vk->supports(*emb, DType::F32));
  Graph g("lookup");
  Ref table = g.add_param("table", {DType::F32, {10, 4}});
  Ref ids = g.add_input("ids", {DType::I64, {6}});
  Ref e = embedding(g, table, ids);
  Ref y = relu(g, scale(g, e, 2.0));
  g.set_outputs({y});
  auto plan = CompiledPlan::compile(g, *vk);
  REQUIRE(plan.ok());
  REQUIRE(plan->fallbacks().size() == 1);
  CHECK(plan->fallbacks()[0].find("embedding") != std::string::npos);
  CHECK(plan->stats().transfers == 3);  // table and ids to the host, the rows back
  CHECK(plan->to_text().find("to_host") != std::string::npos);
  auto vt = randoms(40, 7);
  const std::vector<int64_t> vi{3, 0, 9, 3, 5, 1};
  REQUIRE(plan->bind(table, on(*vk, {10, 4}, vt)).ok());
  REQUIRE(plan->bind(ids, Tensor::from_i64(*vk, {6}, vi)).ok());
  plan->set_profiling(true);
  plan->run();
  std::vector<double> want;
  for (int64_t i : vi)
    for (int k = 0; k < 4; ++k) want.push_back(std::max(0.0, 2.0 * vt[static_cast<size_t>(i * 4 + k)]));
  CHECK(rel_diff(plan->tensor(y).to_f64(), want) < 1e-6);
  // The profiler shows the copies as steps of their own.
  int to_host = 0, to_device = 0;
  for (const auto& st : plan->step_times()) {
    to_host += st.op == "to_host";
    to_device += st.op == "to_device";
  }
  CHECK(to_host == 2);
  CHECK(to_device == 1);
  // Eagerly too: the session copies to the host and back.
  EagerSession s(*vk);
  Ref r = s.emit1("embedding", {s.leaf(on(*vk, {10, 4}, vt)), s.leaf(Tensor::from_i64(*vk, {6}, vi))});
  CHECK(&s.value(r).backend() == vk);
  std::vector<double> rows;
  for (int64_t i : vi)
    for (int k = 0; k < 4; ++k) rows.push_back(vt[static_cast<size_t>(i * 4 + k)]);
  CHECK(s.value(r).to_f64() == rows);
}

TEST_CASE("vulkan: nodes a plan is told to place on the host run there, with the same results", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  Graph g("placed");
  Ref x = g.add_input("x", {DType::F32, {16, 8}});
  Ref w = g.add_param("w", {DType::F32, {8, 4}});
  g.set_label("fc");
  Ref h = matmul(g, x, w);
  g.set_label("act");
  Ref y = relu(g, h);
  g.set_outputs({y});
  PlanOptions po;
  po.host_labels = {"fc"};
  auto plan = CompiledPlan::compile(g, *vk, po);
  REQUIRE(plan.ok());
  CHECK(plan->fallbacks().empty());  // Vulkan has matmul: nothing falls back
  REQUIRE(plan->placed().size() == 1);
  CHECK(plan->placed()[0] == "matmul at f32 (fc)");
  CHECK(plan->stats().transfers == 3);
  const auto vx = randoms(16 * 8, 1), vw = randoms(8 * 4, 2);
  REQUIRE(plan->bind(x, on(*vk, {16, 8}, vx)).ok());
  REQUIRE(plan->bind(w, on(*vk, {8, 4}, vw)).ok());
  plan->run();
  CHECK_FALSE(plan->replaying());  // host steps between the device's: launched each run
  auto cplan = CompiledPlan::compile(g, host());
  REQUIRE(cplan.ok());
  REQUIRE(cplan->bind(x, on(host(), {16, 8}, vx)).ok());
  REQUIRE(cplan->bind(w, on(host(), {8, 4}, vw)).ok());
  cplan->run();
  CHECK(plan->tensor(y).to_f64() == cplan->tensor(y).to_f64());  // the same CPU kernels ran
}

TEST_CASE("vulkan: the fusion passes fuse only into kernels the device has, within its input limit", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  FusionSupport s = FusionSupport::of(*vk);
  CHECK(s.linear_act);
  CHECK(s.elementwise);
  CHECK(s.max_inputs == vk->max_kernel_inputs());
  // Ten inputs summed in a chain: one fused node on the CPU, none over 8 inputs on Vulkan.
  Graph g("sum10");
  Refs xs;
  for (int i = 0; i < 10; ++i) xs.push_back(g.add_input("x" + std::to_string(i), {DType::F32, {8}}));
  Ref acc = xs[0];
  for (int i = 1; i < 10; ++i) acc = add(g, acc, exp(g, xs[static_cast<size_t>(i)]));
  g.set_outputs({acc});
  auto widest = [](const Graph& f) {
    size_t n = 0;
    for (const Node& node : f.nodes())
      if (node.op->name == "fused_elementwise") n = std::max(n, node.inputs.size());
    return n;
  };
  CHECK(widest(fuse_elementwise(g, FusionSupport::of(host()))) == 10);
  CHECK(widest(fuse_elementwise(g, s)) <= 8);
}

TEST_CASE("vulkan: no validation-layer messages", "[vulkan]") {
  auto* vk = open_vulkan();
  if (!vk) return;
  if (!std::getenv("MLS_VULKAN_VALIDATION")) {
    WARN("MLS_VULKAN_VALIDATION is not set: the validation layer is off in this run");
    return;
  }
  EagerSession s(*vk);
  Ref y = softmax(s, s.leaf(on(*vk, {4, 5}, randoms(20, 1))), 1);
  (void)s.value(y).to_f64();
  CHECK(vulkan::validation_message_count() == 0);
}

#endif  // MLSTUDIO_HAVE_VULKAN
