#include "engine/train/preflight.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/core/host_memory.h"
#include "engine/core/op.h"
#include "engine/exec/eager.h"
#include "engine/train/step_graph.h"

namespace mls {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The fastest of `reps` timed calls (the others met a busy core or a cold cache).
template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

int64_t value_bytes(const ValueType& t) {
  return numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
}

// A planned (unallocated) training step: the plan and what the trainer holds beside it.
struct PlannedStep {
  std::optional<CompiledPlan> plan;
  HeldBytes held;
};

Result<PlannedStep> plan_step(const ModelBuilder& build, const TrainConfig& config,
                              Backend& backend, int64_t batch, bool training = true) {
  if (batch < 1) return make_error("batch size must be >= 1");
  auto mg = build(batch, training);
  if (!mg) return mg.error();
  PlannedStep ps;
  auto opt = Optimizer::create(backend, config.opt);
  if (!opt) return opt.error();
  for (Ref p : mg->graph.params()) {
    const Value& v = mg->graph.value(p);
    ps.held.parameter += value_bytes(v.type);
    if (v.trainable) ps.held.optimizer_state += opt->state_bytes(numel(v.type.shape));
  }
  auto step = build_step(std::move(*mg), backend, step_options(config, training));
  if (!step) return step.error();
  const Graph& g = step->graph();
  for (Ref r : g.inputs()) ps.held.input += value_bytes(g.type_of(r));
  auto plan = CompiledPlan::compile(g, backend, {.allocate = false});
  if (!plan) return plan.error();
  ps.plan.emplace(std::move(*plan));
  return ps;
}

// What a plan adds beside the parameters and optimizer state: its arena, inputs, constants.
int64_t plan_bytes(const PlannedStep& ps) {
  HeldBytes h = ps.held;
  const MemoryTimeline t = memory_timeline(*ps.plan, h);
  return t.total_bytes - h.parameter - h.optimizer_state;
}

// The plans a run at `batch` builds, and their bytes. The training plans live through the run;
// an evaluation's plans live for that evaluation only (Trainer::evaluate frees them), so the
// run holds the training plans plus the larger of the validation's and the test's.
struct RunPlans {
  std::vector<PreflightPlan> plans;
  int64_t training_bytes = 0;
  int64_t eval_bytes = 0;  // the largest evaluation's plans
};

Result<RunPlans> run_plans(const ModelBuilder& build, const TrainConfig& config, Backend& backend,
                           int64_t batch, const PreflightOptions& opt) {
  RunPlans out;
  std::map<std::pair<int64_t, bool>, int64_t> bytes;  // one plan per (batch, training)
  auto add = [&](std::string what, int64_t b, bool training) -> Result<int64_t> {
    if (auto it = bytes.find({b, training}); it != bytes.end()) return it->second;
    auto ps = plan_step(build, config, backend, b, training);
    if (!ps) return ps.error();
    const int64_t n = plan_bytes(*ps);
    out.plans.push_back({std::move(what), b, training, n});
    bytes[{b, training}] = n;
    if (training) out.training_bytes += n;
    return n;
  };
  if (auto r = add("training step", batch, true); !r) return r.error();
  if (opt.samples_per_epoch > 0 && opt.samples_per_epoch % batch != 0)
    if (auto r = add("last partial batch", opt.samples_per_epoch % batch, true); !r)
      return r.error();
  const int64_t eb = std::max<int64_t>(1, config.eval_batch_size);
  for (int split = 0; split < 2; ++split) {
    const int64_t n = opt.eval_samples[split];
    if (n <= 0) continue;
    const std::string name = split == 0 ? "validation" : "test";
    auto full = add(name, std::min(n, eb), false);
    if (!full) return full.error();
    int64_t sum = *full;
    if (n > eb && n % eb != 0) {
      auto last = add(name + ", last batch", n % eb, false);
      if (!last) return last.error();
      sum += *last;
    }
    out.eval_bytes = std::max(out.eval_bytes, sum);
  }
  return out;
}

}  // namespace

DeviceRates measure_device_rates(Backend& backend) {
  DeviceRates r;
  EagerSession s(backend);
  const int64_t n = 512;
  Tensor a = Tensor::zeros(backend, DType::F32, {n, n}, AllocTag::Workspace);
  Tensor b = Tensor::zeros(backend, DType::F32, {n, n}, AllocTag::Workspace);
  const Attrs mm{{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}};
  auto run = [&](std::string_view op, const Tensor& x, const Tensor& y, const Attrs& at) {
    Ref in[] = {s.leaf(x), s.leaf(y)};
    s.emit(op, in, at);
    backend.synchronize();
    s.reset();
  };
  run("matmul", a, b, mm);  // warm: threads up, code paged in
  r.flops_per_s =
      2.0 * static_cast<double>(n * n * n) / best_of(5, [&] { run("matmul", a, b, mm); });
  const int64_t m = int64_t{1} << 22;  // 16 MB per operand
  Tensor x = Tensor::zeros(backend, DType::F32, {m}, AllocTag::Workspace);
  Tensor y = Tensor::zeros(backend, DType::F32, {m}, AllocTag::Workspace);
  run("add", x, y, {});
  r.bytes_per_s = 3.0 * 4.0 * static_cast<double>(m) / best_of(5, [&] { run("add", x, y, {}); });
  Tensor one = Tensor::zeros(backend, DType::F32, {1}, AllocTag::Workspace);
  r.launch_s = best_of(5,
                       [&] {
                         for (int i = 0; i < 100; ++i) run("add", one, one, {});
                       }) /
               100.0;
  return r;
}

std::optional<int64_t> free_device_memory(Backend& backend) {
  if (backend.kind() != DeviceKind::CPU) return std::nullopt;
  return read_host_memory().available;
}

Result<int64_t> planned_step_bytes(const ModelBuilder& build, const TrainConfig& config,
                                   Backend& backend, int64_t batch) {
  auto ps = plan_step(build, config, backend, batch);
  if (!ps) return ps.error();
  return memory_timeline(*ps->plan, ps->held).total_bytes;
}

Result<PreflightEstimate> preflight(const ModelBuilder& build, const TrainConfig& config,
                                    Backend& backend, const DeviceRates& rates,
                                    const PreflightOptions& opt) {
  auto ps = plan_step(build, config, backend, config.batch_size);
  if (!ps) return ps.error();
  PreflightEstimate e;
  e.batch = config.batch_size;
  e.held = ps->held;
  e.timeline = memory_timeline(*ps->plan, ps->held);
  e.arena_bytes = e.timeline.arena_bytes;
  e.step_bytes = e.timeline.total_bytes;
  auto plans = run_plans(build, config, backend, config.batch_size, opt);
  if (!plans) return plans.error();
  e.plans = std::move(plans->plans);
  e.eval_bytes = plans->eval_bytes;
  const int64_t fixed = e.held.parameter + e.held.optimizer_state;
  e.total_bytes = fixed + plans->training_bytes + plans->eval_bytes;

  // Time and FLOPs per kernel, summed per document node.
  const CompiledPlan& plan = *ps->plan;
  const Graph& g = plan.graph();
  std::map<std::string, PreflightNode> by_label;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    if (plan.node_waves()[k] < 0) continue;
    const Node& n = g.nodes()[k];
    if (n.op->view) continue;
    std::vector<ValueType> in, out;
    double bytes = 0;
    for (Ref r : n.inputs) {
      in.push_back(g.type_of(r));
      bytes += static_cast<double>(value_bytes(in.back()));
    }
    for (Ref r : n.outputs) {
      out.push_back(g.type_of(r));
      bytes += static_cast<double>(value_bytes(out.back()));
    }
    const double flops = op_flops(*n.op, in, out, n.attrs);
    const double secs = std::max(flops / std::max(rates.flops_per_s, 1.0),
                                 bytes / std::max(rates.bytes_per_s, 1.0)) +
                        rates.launch_s;
    const std::string label = n.label.empty() ? n.op->name : n.label;
    PreflightNode& pn = by_label[label];
    pn.label = label;
    pn.flops += flops;
    pn.seconds += secs;
    ++pn.kernels;
    e.flops += flops;
    e.step_seconds += secs;
  }
  for (const MemoryTimeline::Holder& h : e.timeline.holders)
    if (auto it = by_label.find(h.node); it != by_label.end()) it->second.bytes += h.bytes;
  // The optimizer reads and writes each parameter, its gradient and its state once.
  const double opt_bytes = 2.0 * static_cast<double>(e.held.parameter + e.held.optimizer_state) +
                           static_cast<double>(e.held.parameter);
  e.step_seconds += opt_bytes / std::max(rates.bytes_per_s, 1.0) +
                    static_cast<double>(g.params().size()) * rates.launch_s;
  for (auto& [label, pn] : by_label) e.nodes.push_back(pn);
  std::sort(e.nodes.begin(), e.nodes.end(),
            [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  if (opt.samples_per_epoch > 0)
    e.epoch_seconds =
        e.step_seconds * static_cast<double>((opt.samples_per_epoch + e.batch - 1) / e.batch);

  e.free_bytes = opt.free_bytes ? opt.free_bytes : free_device_memory(backend);
  if (e.free_bytes) {
    e.fits = e.total_bytes <= *e.free_bytes;
    if (opt.search_max_batch) {
      // Memory grows with the batch: double until a step no longer fits, then bisect.
      // The evaluation plans do not depend on the training batch: counted once.
      PreflightOptions train_only = opt;
      train_only.eval_samples[0] = train_only.eval_samples[1] = 0;
      auto fits = [&](int64_t b) -> Result<bool> {
        auto ps = run_plans(build, config, backend, b, train_only);
        if (!ps) return ps.error();
        return fixed + e.eval_bytes + ps->training_bytes <= *e.free_bytes;
      };
      int64_t lo = 0, hi = 1;
      constexpr int64_t kLimit = int64_t{1} << 24;
      for (;;) {
        auto f = fits(hi);
        if (!f) return f.error();
        if (!*f) break;
        lo = hi;
        if (hi >= kLimit) break;
        hi *= 2;
      }
      if (lo < kLimit) {
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          auto f = fits(mid);
          if (!f) return f.error();
          (*f ? lo : hi) = mid;
        }
      }
      e.max_batch = lo;
    }
  }
  return e;
}

}  // namespace mls
