// `mlstudio graph P.mls --ir`: the engine IR of a project, as text.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "app/commands.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/passes/passes.h"
#include "engine/train/collective.h"
#include "engine/train/mixed_precision.h"
#include "engine/train/step_graph.h"

namespace mls::app {

namespace {

// Trains `steps` steps on real data with every kernel timed, then prints where the time went.
int profile_command(const GraphOptions& o) {
  ProjectOptions po = o.project;
  po.epochs = 1;
  auto p = open_project(po);
  if (!p) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(p.error().message).c_str());
    return 1;
  }
  auto device = open_backend(*p);
  if (!device) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(device.error().message).c_str());
    return 1;
  }
  TrainConfig cfg = p->train_config();
  if (o.batch > 0) cfg.batch_size = o.batch;
  cfg.max_steps = o.profile;
  // Timing needs neither validation nor a schedule: early stopping (which would ask for a
  // validation split) is off, and the rate stays constant over these few steps (a one-cycle
  // schedule cannot be laid over three).
  cfg.early_stop.patience = 0;
  cfg.schedule = ScheduleConfig{};
  Trainer t(**device, p->builder(), cfg);
  t.set_profiling(true);
  auto r = t.fit(*p->train, nullptr, nullptr);
  if (!r) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(r.error().message).c_str());
    return 1;
  }
  auto plan = t.training_plan(cfg.batch_size);
  if (!plan) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(plan.error().message).c_str());
    return 1;
  }
  const auto& times = (*plan)->step_times();
  double total = 0;
  int64_t runs = 0;
  std::map<std::string, std::pair<double, int>> by_op;
  for (const auto& s : times) {
    total += s.seconds;
    runs = std::max(runs, s.runs);
    by_op[s.op].first += s.seconds;
    ++by_op[s.op].second;
  }
  if (runs == 0) {
    std::fprintf(stderr,
                 "mlstudio: no full-batch step ran (is the data set smaller than a batch?)\n");
    return 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(),
            [](auto& a, auto& b) { return a.second.first > b.second.first; });
  std::printf("%lld training steps of batch %lld, kernels %.3f ms per step\n",
              static_cast<long long>(runs), static_cast<long long>(cfg.batch_size),
              1e3 * total / static_cast<double>(runs));
  // Kernels of a wave that run at once overlap: the wall time of the plan is what they cost.
  std::printf("plan wall time %.3f ms per step (%zu of %zu kernels run at once with others)\n",
              1e3 * (*plan)->run_seconds() / static_cast<double>(runs),
              (*plan)->stats().concurrent_steps, times.size());
  std::printf("%-26s %6s %12s %7s\n", "op", "nodes", "ms/step", "share");
  for (auto& [op, v] : ops)
    std::printf("%-26s %6d %12.3f %6.1f%%\n", op.c_str(), v.second,
                1e3 * v.first / static_cast<double>(runs), 100 * v.first / total);
  std::vector<CompiledPlan::StepTime> nodes(times.begin(), times.end());
  std::sort(nodes.begin(), nodes.end(), [](auto& a, auto& b) { return a.seconds > b.seconds; });
  std::printf("\nslowest nodes\n%-26s %-24s %12s %7s\n", "op", "node", "ms/step", "share");
  for (size_t i = 0; i < std::min<size_t>(12, nodes.size()); ++i) {
    const std::string who = nodes[i].label + (nodes[i].backward ? " (backward)" : "");
    std::printf("%-26s %-24s %12.3f %6.1f%%\n", nodes[i].op.c_str(), who.c_str(),
                1e3 * nodes[i].seconds / static_cast<double>(runs), 100 * nodes[i].seconds / total);
  }
  return 0;
}

// Flags that the chosen view would not use are refused, not ignored: a user who asks for
// them expects them to change what is printed.
std::string conflicting_flags(const GraphOptions& o) {
  const bool step_view = o.backward || o.plan || o.passes;
  if (o.profile > 0 && (o.ir || step_view))
    return "--profile trains and times the step; it does not combine with --ir, --backward, "
           "--plan or --passes";
  if (o.ranks != 1 && (!o.plan || o.ranks < 1 || o.ranks > 4096))
    return "--ranks shows the data-parallel training step: use it with --plan, with 1 to 4096 ranks";
  if (o.passes && (o.ir || o.backward || o.plan))
    return "--passes prints every stage of the step; it does not combine with --ir, --backward "
           "or --plan";
  if (o.ir && step_view)
    return "--ir is the forward alone; it does not combine with --backward or --plan";
  if (o.project.limit && o.profile == 0)
    return "--limit only applies to --profile (the other views read no data)";
  if (o.project.activation_checkpointing && !step_view)
    return "--activation-checkpointing changes the training step: use it with --backward, --plan "
           "or --passes";
  return {};
}

}  // namespace

int graph_command(const GraphOptions& o) {
  if (const std::string why = conflicting_flags(o); !why.empty()) {
    std::fprintf(stderr, "mlstudio: graph: %s\n", terminal_safe(why).c_str());
    return 1;
  }
  if (o.profile > 0) return profile_command(o);
  ProjectOptions po = o.project;
  po.load_data = false;
  auto p = open_project(po);
  if (!p) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(p.error().message).c_str());
    return 1;
  }
  int64_t batch = o.batch > 0 ? o.batch : p->doc.training.batch_size;
  auto m = p->builder()(batch, true);
  if (!m) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(m.error().message).c_str());
    return 1;
  }
  const TrainConfig cfg = p->train_config();
  if (cfg.precision != Precision::F32)
    std::printf("// mixed precision %s: matrix products as matmul_lowp, f32 everywhere else\n",
                std::string(precision_name(cfg.precision)).c_str());
  if (!o.backward && !o.plan && !o.passes) {
    // The forward alone, as the trainer sees it before it appends the backward.
    autocast_model(*m, cfg.precision);
    std::fputs(m->graph.to_text().c_str(), stdout);
    return 0;
  }
  // The very step the trainer compiles (engine/train/step_graph.h), loss scaling included,
  // for the project's device (--device): its fusion and its plan, fallbacks included.
  auto device = open_backend(*p);
  if (!device) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(device.error().message).c_str());
    return 1;
  }
  Backend& be = **device;
  StepOptions so = step_options(cfg);
  so.keep_stages = true;
  auto step = build_step(std::move(*m), be, so);
  if (!step) {
    std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(step.error().message).c_str());
    return 1;
  }
  if (o.passes) {
    // Each stage: its IR, then its size; a summary at the end.
    std::string summary;
    for (const PassRecord& s : step->stages) {
      auto plan = CompiledPlan::compile(s.graph, be);
      if (!plan) {
        std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(plan.error().message).c_str());
        return 1;
      }
      char line[160];
      std::snprintf(line, sizeof line, "%-34s %6zu nodes %12zu planned bytes\n", s.name.c_str(),
                    s.graph.nodes().size(), plan->stats().arena_bytes);
      std::printf("// ===== %s", line);
      std::fputs(s.graph.to_text().c_str(), stdout);
      summary += line;
    }
    std::printf("\n// summary\n%s", summary.c_str());
    return 0;
  }
  // --backward: the step as autodiff made it; --plan: the optimised step that runs.
  if (o.backward) std::fputs(step->stages.front().graph.to_text().c_str(), stdout);
  if (o.plan && o.ranks > 1) {
    // The step one rank of N compiles: the same kernels with the gradients' all-reduce steps
    // between them (started bucket by bucket during the backward pass, awaited at the end).
    TrainConfig dist = cfg;
    dist.batch_size = batch;
    Trainer t(be, p->builder(), dist);
    PlanOnlyCollective world(o.ranks);
    t.set_collective(&world);
    auto plan = t.training_plan(batch);
    if (!plan) {
      std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(plan.error().message).c_str());
      return 1;
    }
    std::printf("// one rank of %d: batch %lld per rank, %lld in all\n", o.ranks,
                static_cast<long long>(batch), static_cast<long long>(batch * o.ranks));
    std::fputs((*plan)->to_text().c_str(), stdout);
    return 0;
  }
  if (o.plan) {
    const Graph& g = step->graph();
    auto plan = CompiledPlan::compile(g, be);
    if (!plan) {
      std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(plan.error().message).c_str());
      return 1;
    }
    std::fputs(plan->to_text().c_str(), stdout);
    // The same step without in-place reuse, and sequential (one kernel at a time).
    PlanOptions no_reuse, sequential;
    no_reuse.inplace = false;
    sequential.concurrent = false;
    auto a = CompiledPlan::compile(g, be, no_reuse);
    auto b = CompiledPlan::compile(g, be, sequential);
    if (a && b)
      std::printf(
          "without in-place reuse: arena %zu bytes; sequential: arena %zu bytes, %zu waves\n",
          a->stats().arena_bytes, b->stats().arena_bytes, b->stats().waves);
  }
  return 0;
}

}  // namespace mls::app
