// `mlstudio graph P.mls --ir`: the engine IR of a project, as text.
#include <cstdio>

#include "app/commands.h"
#include "engine/autodiff/autodiff.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/passes/passes.h"

namespace mls::app {

int graph_command(const GraphOptions& o) {
  ProjectOptions po = o.project;
  po.load_data = false;
  auto p = open_project(po);
  if (!p) {
    std::fprintf(stderr, "mlstudio: %s\n", p.error().message.c_str());
    return 1;
  }
  int64_t batch = o.batch > 0 ? o.batch : p->doc.training.batch_size;
  auto m = p->builder()(batch);
  if (!m) {
    std::fprintf(stderr, "mlstudio: %s\n", m.error().message.c_str());
    return 1;
  }
  Graph& g = m->graph;
  if (o.backward || o.plan || o.passes) {
    auto grads = append_backward(g, m->loss, g.params());
    if (!grads) {
      std::fprintf(stderr, "mlstudio: %s\n", grads.error().message.c_str());
      return 1;
    }
    Refs outs{m->loss};
    outs.insert(outs.end(), grads->begin(), grads->end());
    g.set_outputs(outs);
  }
  if (o.passes) {
    // Each stage: its IR, then its size; a summary at the end.
    auto stages = run_passes(g, cpu::backend(), default_passes());
    if (!stages) {
      std::fprintf(stderr, "mlstudio: %s\n", stages.error().message.c_str());
      return 1;
    }
    std::string summary;
    for (const PassRecord& s : *stages) {
      auto plan = CompiledPlan::compile(s.graph, cpu::backend());
      if (!plan) {
        std::fprintf(stderr, "mlstudio: %s\n", plan.error().message.c_str());
        return 1;
      }
      char line[160];
      std::snprintf(line, sizeof line, "%-34s %6zu nodes %12zu planned bytes\n", s.name.c_str(), s.graph.nodes().size(),
                    plan->stats().arena_bytes);
      std::printf("// ===== %s", line);
      std::fputs(s.graph.to_text().c_str(), stdout);
      summary += line;
    }
    std::printf("\n// summary\n%s", summary.c_str());
    return 0;
  }
  if (o.ir || o.backward || !o.plan) std::fputs(g.to_text().c_str(), stdout);
  if (o.plan) {
    auto plan = CompiledPlan::compile(g, cpu::backend());
    if (!plan) {
      std::fprintf(stderr, "mlstudio: %s\n", plan.error().message.c_str());
      return 1;
    }
    std::fputs(plan->to_text().c_str(), stdout);
  }
  return 0;
}

}  // namespace mls::app
