// The instruments' engine side: the memory timeline of a static step against the allocator,
// the pre-flight estimate against the measured peak, FLOPs per op, and the Chrome trace.
#include <catch2/catch.hpp>
#include <cstdio>
#include <set>
#include <nlohmann/json.hpp>

#include "blobs_source.h"
#include "engine/core/host_memory.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/memory_timeline.h"
#include "engine/exec/trace.h"
#include "engine/ops/conv.h"
#include "engine/train/preflight.h"
#include "graph_fixtures.h"
#include "tests/common/temp_dir.h"

using namespace mls;
using namespace mls::test;

namespace {

// A LeNet-like classifier of [1, 8, 8] images: conv 3x3 (4) -> relu -> max pool 2 -> linear.
ModelBuilder cnn_builder() {
  return [](int64_t batch, bool) -> Result<ModelGraph> {
    ModelGraph m{Graph("cnn"), {}, {}, {}, {}, {}};
    Graph& g = m.graph;
    m.input = g.add_input("x", {DType::F32, {batch, 64}});
    m.labels = g.add_input("y", {DType::I64, {batch}});
    Ref w = g.add_param("conv.weight", {DType::F32, {4, 1, 3, 3}}, {"kaiming_uniform", 9, 36});
    Ref fw = g.add_param("fc.weight", {DType::F32, {4 * 3 * 3, 3}}, {"kaiming_uniform", 36, 3});
    Ref fb = g.add_param("fc.bias", {DType::F32, {3}}, {"uniform_fan_in", 36, 3});
    g.set_label("conv");
    Ref h = conv2d(g, reshape(g, m.input, {batch, 1, 8, 8}), w);
    g.set_label("act");
    h = relu(g, h);
    g.set_label("pool");
    h = max_pool2d(g, h, {});
    g.set_label("fc");
    m.logits = linear(g, reshape(g, h, {batch, 36}), fw, fb);
    g.set_label("loss");
    m.loss = cross_entropy(g, m.logits, m.labels);
    return m;
  };
}

struct Model {
  const char* name;
  ModelBuilder build;
  int64_t features, classes;
};

std::vector<Model> models() {
  return {{"mlp", mlp_builder(20, {64, 32}, 4), 20, 4}, {"cnn", cnn_builder(), 64, 3}};
}

TrainConfig config(int64_t batch, const char* opt) {
  TrainConfig c;
  c.epochs = 1;
  c.batch_size = batch;
  c.opt = {.type = opt, .lr = 0.01, .momentum = 0.9};
  return c;
}

}  // namespace

TEST_CASE(
    "a static step's memory timeline adds up to the allocator's total, and its peak is the "
    "measured one",
    "[profile][memory]") {
  for (const Model& m : models()) {
    for (const char* opt : {"sgd", "adam"}) {
      INFO(m.name << " with " << opt);
      cpu::CpuBackend be(2);  // its own tracker: nothing else counts
      Trainer t(be, m.build, config(32, opt));
      Blobs data(320, m.features, m.classes, 5);  // 10 full batches: one plan
      auto r = t.fit(data, nullptr, nullptr);
      REQUIRE(r.ok());
      auto tl = t.memory_timeline(32);
      REQUIRE(tl.ok());
      const MemoryStats measured = be.memory().stats();
      CHECK(measured.total_peak == tl->total_bytes);     // measured peak == planned peak
      CHECK(measured.total_current == tl->total_bytes);  // and that is what it holds now
      // Per category, the allocator's own tags agree with the timeline's split of them.
      const MemoryTimeline::Sample& s0 = tl->samples.front();
      CHECK(measured.current[tag_index(AllocTag::Parameter)] ==
            s0.bytes[mem_cat_index(MemCat::Parameter)]);
      CHECK(measured.current[tag_index(AllocTag::OptimizerState)] ==
            s0.bytes[mem_cat_index(MemCat::OptimizerState)]);
      CHECK(measured.current[tag_index(AllocTag::Input)] == s0.bytes[mem_cat_index(MemCat::Input)]);
      CHECK(measured.current[tag_index(AllocTag::Activation)] == tl->arena_bytes);
      CHECK(s0.bytes[mem_cat_index(MemCat::Other)] == 0);
      int64_t param_bytes = 0;
      for (const Tensor& p : t.params()) param_bytes += static_cast<int64_t>(p.nbytes());
      CHECK(s0.bytes[mem_cat_index(MemCat::OptimizerState)] ==
            (std::string(opt) == "adam" ? 2 : 1) * param_bytes);
      bool forward = false, backward = false;
      for (const MemoryTimeline::Sample& s : tl->samples) {
        CHECK(s.total() == tl->total_bytes);  // at every sample
        CHECK(s.bytes[mem_cat_index(MemCat::ArenaFree)] >= 0);
        CHECK(s.live() <= tl->samples[tl->peak].live());
        forward = forward ||
                  (s.phase == StepPhase::Forward && s.bytes[mem_cat_index(MemCat::Activation)] > 0);
        backward = backward ||
                   (s.phase == StepPhase::Backward && s.bytes[mem_cat_index(MemCat::Backward)] > 0);
        // The live holders are exactly what the sample counts in the arena.
        int64_t held = 0;
        for (size_t h : tl->live_at(static_cast<size_t>(&s - tl->samples.data())))
          held += tl->holders[h].bytes;
        CHECK(held == s.live() - (tl->total_bytes - tl->arena_bytes));
      }
      CHECK(forward);
      CHECK(backward);
      // The optimizer reads one gradient per parameter, each as large as its parameter.
      CHECK(tl->samples.back().phase == StepPhase::Optimizer);
      CHECK(tl->samples.back().bytes[mem_cat_index(MemCat::Gradient)] == param_bytes);
    }
  }
}

TEST_CASE(
    "the pre-flight estimate of peak memory matches the measured peak, and finds the largest batch "
    "that fits",
    "[profile][preflight]") {
  const DeviceRates rates = measure_device_rates(host());
  CHECK(rates.flops_per_s > 1e8);  // any CPU of this decade does 0.1 GFLOP/s
  CHECK(rates.bytes_per_s > 1e8);
  CHECK(rates.launch_s > 0);
  for (const Model& m : models()) {
    INFO(m.name);
    cpu::CpuBackend be(2);
    const TrainConfig cfg = config(64, "adam");
    auto est = preflight(m.build, cfg, be, rates,
                         {.free_bytes = int64_t{1} << 40, .search_max_batch = false});
    REQUIRE(est.ok());
    CHECK(be.memory().stats().total_peak <
          est->total_bytes);  // planning allocated less than a step holds
    Trainer t(be, m.build, cfg);
    Blobs data(640, m.features, m.classes, 7);
    REQUIRE(t.fit(data, nullptr, nullptr).ok());
    const int64_t measured = be.memory().stats().total_peak;
    CHECK(std::abs(static_cast<double>(est->total_bytes - measured)) <=
          0.10 * static_cast<double>(measured));
    CHECK(est->total_bytes == measured);  // the same plan: exact on the CPU
    CHECK(est->fits);
    CHECK(est->step_seconds > 0);
    CHECK(est->flops > 0);
    CHECK_FALSE(est->nodes.empty());

    // With room for exactly the step of batch 100, 100 is the largest batch that fits.
    auto at100 = planned_step_bytes(m.build, cfg, be, 100);
    auto at101 = planned_step_bytes(m.build, cfg, be, 101);
    REQUIRE(at100.ok());
    REQUIRE(at101.ok());
    REQUIRE(*at101 > *at100);
    auto tight = preflight(m.build, cfg, be, rates, {.free_bytes = *at100});
    REQUIRE(tight.ok());
    CHECK(tight->max_batch == 100);
    CHECK_FALSE(tight->fits == false);  // batch 64 fits below 100's room
    auto small = preflight(m.build, cfg, be, rates, {.free_bytes = *at100 / 4});
    REQUIRE(small.ok());
    CHECK_FALSE(small->fits);
    CHECK(small->max_batch < 64);
  }
}

TEST_CASE("a CPU buffer that RAM and swap could never back is refused, and the plan names its size",
          "[profile][memory]") {
  const HostMemory m = read_host_memory();
  REQUIRE(m.total.has_value());  // Linux: /proc/meminfo
  CHECK(*m.total > (int64_t{64} << 20));
  REQUIRE(m.available.has_value());
  CHECK(*m.available > 0);
  CHECK(*m.available <= *m.total);
  const int64_t limit = host_allocation_limit();
  CHECK(limit <= *m.total + m.swap.value_or(0));
  if (m.cgroup_limit) CHECK(limit <= *m.cgroup_limit);

  Backend& be = cpu::backend();
  const uint64_t before = be.memory().stats().alloc_count;
  CHECK_THROWS_AS(Tensor::empty(be, DType::F32, {limit / 4 + 1}, AllocTag::Workspace), std::bad_alloc);
  CHECK(be.memory().stats().alloc_count == before);  // nothing was counted, nothing leaked
  // A buffer below the limit is still granted.
  CHECK(Tensor::empty(be, DType::F32, {1 << 20}, AllocTag::Workspace).nbytes() == 4 << 20);

  // A step whose activation alone is larger than the machine: a clear error, not an OOM kill
  // when its pages are touched (Linux overcommits; see host_memory.h).
  const int64_t row = int64_t{1} << 20;  // 4 MiB a sample
  const int64_t batch = limit / (4 * row) + 1;
  Graph g("too big");
  Ref x = g.add_input("x", {DType::F32, {batch, row}});
  g.set_outputs({relu(g, g.emit1("tanh", {x}))});
  auto plan = CompiledPlan::compile(g, be);
  REQUIRE_FALSE(plan.ok());
  INFO(plan.error().message);
  CHECK(plan.error().message.find("not enough memory for the compiled step: its planned arena is") !=
        std::string::npos);
  const std::string& msg = plan.error().message;
  const auto open = msg.find(" (");
  REQUIRE(open != std::string::npos);
  CHECK(std::stoll(msg.substr(open + 2)) >= batch * row * 4);  // "... (N bytes); use a ..."
}

TEST_CASE("the convolutions' declared workspace lives in the plan's arena and the memory timeline",
          "[profile][memory]") {
  cpu::CpuBackend be(2);
  Trainer t(be, cnn_builder(), config(32, "sgd"));
  Blobs data(320, 64, 3, 5);
  REQUIRE(t.fit(data, nullptr, nullptr).ok());
  auto plan = t.training_plan(32);
  REQUIRE(plan.ok());
  const CompiledPlan& p = **plan;
  REQUIRE(!p.workspaces().empty());  // the forward conv and its weight gradient at least
  size_t declared = 0;
  std::set<std::string> ops;
  for (const CompiledPlan::WorkspacePlacement& w : p.workspaces()) {
    const Node& n = p.graph().nodes()[static_cast<size_t>(w.node)];
    ops.insert(n.op->name);
    std::vector<ValueType> in, out;
    for (Ref r : n.inputs) in.push_back(p.graph().type_of(r));
    for (Ref r : n.outputs) out.push_back(p.graph().type_of(r));
    WorkspaceFn fn = n.op->workspace(DeviceKind::CPU, DType::F32);
    REQUIRE(fn);
    CHECK(w.bytes == fn(in, out, n.attrs, be));
    CHECK(w.offset + w.bytes <= p.stats().arena_bytes);
    declared += w.bytes;
  }
  CHECK(declared == p.stats().workspace_bytes);
  // The weight gradient, taken with its pool's gradient (the model pools the conv's relu 2x2).
  CHECK(ops.count("conv2d_backward_weight") + ops.count("conv2d_pool_backward_weight") == 1);
  CHECK((ops.count("conv2d") + ops.count("conv2d_act")) == 1);
  // The timeline shows it at its wave, inside the arena's total.
  auto tl = t.memory_timeline(32);
  REQUIRE(tl.ok());
  int64_t seen = 0;
  for (const MemoryTimeline::Sample& s : tl->samples) seen = std::max(seen, s.bytes[mem_cat_index(MemCat::Workspace)]);
  CHECK(seen > 0);
  // A kernel given its workspace computes what it computes with scratch of its own.
  Rng rng(3);
  std::vector<float> vx(32 * 64), vw(4 * 9);
  for (float& v : vx) v = static_cast<float>(rng.uniform(-1, 1));
  for (float& v : vw) v = static_cast<float>(rng.uniform(-1, 1));
  Tensor x = Tensor::from_f32(be, {32, 1, 8, 8}, vx), w = Tensor::from_f32(be, {4, 1, 3, 3}, vw);
  Tensor y1 = Tensor::empty(be, DType::F32, {32, 4, 6, 6}, AllocTag::Other), y2 = y1.contiguous();
  const OpDef* conv = op_registry().find("conv2d");
  const Attrs a = conv2d_attrs({});
  const std::vector<ValueType> in{{DType::F32, {32, 1, 8, 8}}, {DType::F32, {4, 1, 3, 3}}}, out{{DType::F32, {32, 4, 6, 6}}};
  const size_t bytes = conv->workspace(DeviceKind::CPU, DType::F32)(in, out, a, be);
  auto ws = be.allocate(bytes, AllocTag::Workspace);
  const Tensor* ins[] = {&x, &w};
  Tensor* outs1[] = {&y1};
  Tensor* outs2[] = {&y2};
  be.launch(conv->kernel(DeviceKind::CPU, DType::F32), KernelCall{a, ins, outs1, be, ws.get(), 0, bytes});
  be.launch(conv->kernel(DeviceKind::CPU, DType::F32), KernelCall{a, ins, outs2, be});
  CHECK(y1.to_f64() == y2.to_f64());
}

TEST_CASE("op_flops counts the multiply-adds of matmul and the convolutions by hand",
          "[profile][flops]") {
  const OpDef* mm = op_registry().find("matmul");
  const Attrs no_t{{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}};
  std::vector<ValueType> in{{DType::F32, {8, 5}}, {DType::F32, {5, 3}}}, out{{DType::F32, {8, 3}}};
  CHECK(op_flops(*mm, in, out, no_t) == 2.0 * 8 * 3 * 5);
  const Attrs ta{{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{0}}};
  std::vector<ValueType> in_t{{DType::F32, {5, 8}}, {DType::F32, {5, 3}}};
  CHECK(op_flops(*mm, in_t, out, ta) == 2.0 * 8 * 3 * 5);
  // conv2d: every output element sums C/groups x kh x kw products.
  const OpDef* conv = op_registry().find("conv2d");
  std::vector<ValueType> cin{{DType::F32, {2, 3, 10, 10}}, {DType::F32, {6, 3, 3, 3}}},
      cout{{DType::F32, {2, 6, 8, 8}}};
  CHECK(op_flops(*conv, cin, cout, {}) == 2.0 * (2 * 6 * 8 * 8) * (3 * 3 * 3));
  // Its gradients do the same number of products.
  const OpDef* bi = op_registry().find("conv2d_backward_input");
  std::vector<ValueType> bin{{DType::F32, {2, 6, 8, 8}}, {DType::F32, {6, 3, 3, 3}}},
      bout{{DType::F32, {2, 3, 10, 10}}};
  CHECK(op_flops(*bi, bin, bout, {}) == op_flops(*conv, cin, cout, {}));
  const OpDef* bw = op_registry().find("conv2d_backward_weight");
  std::vector<ValueType> win{{DType::F32, {2, 3, 10, 10}}, {DType::F32, {2, 6, 8, 8}}},
      wout{{DType::F32, {6, 3, 3, 3}}};
  CHECK(op_flops(*bw, win, wout, {}) == op_flops(*conv, cin, cout, {}));
  // Elementwise: one per output element; a view (reshape) costs nothing.
  std::vector<ValueType> e{{DType::F32, {4, 5}}};
  CHECK(op_flops(*op_registry().find("relu"), e, e, {}) == 20);
  CHECK(op_flops(*op_registry().find("reshape"), e, e, {}) == 0);
}

TEST_CASE("the Chrome trace has one span per executed kernel, inside its step, and memory counters",
          "[profile][trace]") {
  cpu::CpuBackend be(2);
  TrainConfig cfg = config(32, "sgd");
  cfg.max_steps = 3;
  Trainer t(be, mlp_builder(20, {64, 32}, 4), cfg);
  TraceRecorder trace;
  t.set_trace(&trace);
  Blobs data(320, 20, 4, 3);
  REQUIRE(t.fit(data, nullptr, nullptr).ok());
  auto plan = t.training_plan(32);
  REQUIRE(plan.ok());
  const size_t kernels = (*plan)->step_times().size();
  REQUIRE(kernels > 5);
  CHECK(trace.count("op") == 3 * kernels);
  CHECK(trace.count("step") == 3);
  CHECK(trace.count("optimizer") == 3);

  TempDir dir;
  const std::string path = dir.file("run.json");
  REQUIRE(trace.write(path).ok());
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  nlohmann::json j = nlohmann::json::parse(f);
  std::fclose(f);
  REQUIRE(j.is_object());
  REQUIRE(j["traceEvents"].is_array());
  size_t spans = 0, counters = 0;
  std::vector<std::pair<double, double>> steps;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "step")
      steps.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  REQUIRE(steps.size() == 3);
  const int64_t total = t.memory_timeline(32)->total_bytes;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("name"));
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    if (ph == "X" && e["cat"] == "op") {
      ++spans;
      CHECK(e["dur"].get<double>() >= 0);
      const double a = e["ts"], b = a + e["dur"].get<double>();
      const int step = std::stoi(e["args"]["step"].get<std::string>());
      REQUIRE(step >= 0);
      REQUIRE(step < 3);
      CHECK(a >= steps[static_cast<size_t>(step)].first - 1e-3);
      CHECK(b <= steps[static_cast<size_t>(step)].second + 1e-3);
    } else if (ph == "C") {
      ++counters;
      double sum = 0;
      for (const auto& [k, v] : e["args"].items()) sum += v.get<double>();
      CHECK(sum == static_cast<double>(total));
    }
  }
  CHECK(spans == 3 * kernels);
  CHECK(counters >= 3);

  auto bad = trace.write(dir.file("missing/dir/run.json"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("missing/dir/run.json") != std::string::npos);
}

TEST_CASE("an evaluation frees its plans when it ends, and the trace's memory counters cover it",
          "[profile][trace]") {
  cpu::CpuBackend be(2);
  TrainConfig cfg = config(32, "adam");
  cfg.epochs = 2;
  const ModelBuilder build = mlp_builder(20, {64, 32}, 4);
  Blobs train(320, 20, 4, 3), validation(200, 20, 4, 4), test(300, 20, 4, 5);
  auto est = preflight(build, cfg, be, measure_device_rates(host()),
                       {.free_bytes = int64_t{1} << 40,
                        .samples_per_epoch = 320,
                        .eval_samples = {200, 300},
                        .search_max_batch = false});
  REQUIRE(est.ok());
  Trainer t(be, build, cfg);
  TraceRecorder trace;
  t.set_trace(&trace);
  FitInputs in{.train = train, .validation = &validation, .test = &test};
  auto r = t.fit(in);
  REQUIRE(r.ok());
  REQUIRE(r->has_test);
  // Nothing but the training plan is left: the evaluation plans of batch 200 and 300 are gone.
  CHECK(t.held_bytes(32).other == 0);
  CHECK(trace.count("evaluation") == 3);  // two validations and the test
  CHECK(trace.count("eval") > 0);
  CHECK(trace.count("step") == 20);

  // The largest memory counter is the allocator's peak, which an evaluation reaches: its plan
  // lives beside the training plan's arena and gradients.
  const int64_t peak = be.memory().stats().total_peak;
  const int64_t step_total = t.memory_timeline(32)->total_bytes;
  double counter_max = 0;
  for (const TraceRecorder::Event& e : trace.events()) {
    if (e.phase != 'C') continue;
    double sum = 0;
    for (const auto& [k, v] : e.values) sum += v;
    counter_max = std::max(counter_max, sum);
  }
  CHECK(counter_max == static_cast<double>(peak));
  CHECK(peak > step_total);
  // The pre-flight counts the training plan and the larger evaluation (the test's 300), not
  // both evaluations: exact on the CPU.
  CHECK(est->total_bytes == peak);
  CHECK(est->eval_bytes > 0);
}
