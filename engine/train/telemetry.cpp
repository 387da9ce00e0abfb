#include "engine/train/telemetry.h"

#include <algorithm>
#include <limits>

namespace mls {

OpProfile op_profile(const CompiledPlan& plan) {
  OpProfile p;
  const auto& times = plan.step_times();
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const CompiledPlan::StepTime& s : times) {
    p.steps = std::max(p.steps, s.runs);
    if (s.runs > 0) first = std::min(first, s.last.start_ns);
  }
  const double runs = static_cast<double>(std::max<int64_t>(p.steps, 1));
  for (const CompiledPlan::StepTime& s : times) {
    OpProfile::Kernel k;
    k.op = s.op;
    k.label = s.label;
    k.backward = s.backward;
    k.seconds = s.seconds / runs;
    k.flops = s.flops;
    k.node = s.node;
    k.thread = s.last.thread;
    if (s.runs > 0) {
      k.last_start_s = static_cast<double>(s.last.start_ns - first) / 1e9;
      k.last_end_s = static_cast<double>(s.last.end_ns - first) / 1e9;
    }
    p.kernels.push_back(std::move(k));
  }
  p.step_seconds = plan.run_seconds() / runs;
  return p;
}

}  // namespace mls
