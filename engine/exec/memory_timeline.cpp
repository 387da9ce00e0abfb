#include "engine/exec/memory_timeline.h"

#include <algorithm>
#include <numeric>

namespace mls {

std::string_view mem_cat_name(MemCat c) {
  switch (c) {
    case MemCat::Parameter:
      return "parameters";
    case MemCat::Gradient:
      return "gradients";
    case MemCat::OptimizerState:
      return "optimizer state";
    case MemCat::Input:
      return "inputs";
    case MemCat::Constant:
      return "constants";
    case MemCat::Activation:
      return "activations";
    case MemCat::Backward:
      return "backward temporaries";
    case MemCat::Workspace:
      return "kernel workspace";
    case MemCat::ArenaFree:
      return "arena, free";
    case MemCat::Other:
      return "other";
  }
  return "?";
}

std::string_view step_phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::Forward:
      return "forward";
    case StepPhase::Backward:
      return "backward";
    case StepPhase::Optimizer:
      return "optimizer";
  }
  return "?";
}

int64_t MemoryTimeline::Sample::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
}

int64_t MemoryTimeline::Sample::live() const {
  return total() - bytes[mem_cat_index(MemCat::ArenaFree)];
}

std::vector<size_t> MemoryTimeline::live_at(size_t sample) const {
  std::vector<size_t> out;
  if (sample >= samples.size()) return out;
  const int32_t w = samples[sample].wave;
  const bool optimizer = samples[sample].phase == StepPhase::Optimizer;
  const int32_t end = samples.size() >= 2 ? samples[samples.size() - 2].wave : 0;
  for (size_t i = 0; i < holders.size(); ++i) {
    const Holder& h = holders[i];
    if (optimizer ? h.last == end : (h.first <= w && w <= h.last)) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t a, size_t b) { return holders[a].bytes > holders[b].bytes; });
  return out;
}

int64_t plan_constant_bytes(const CompiledPlan& plan) {
  // Constants hold their buffers as long as the plan's graph lives (one count per buffer).
  std::vector<const Buffer*> seen;
  int64_t bytes = 0;
  for (const Value& v : plan.graph().values()) {
    if (v.kind != ValueKind::Const || !v.constant.defined()) continue;
    const Buffer* b = v.constant.buffer();
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
    seen.push_back(b);
    bytes += static_cast<int64_t>(b->size());
  }
  return bytes;
}

MemoryTimeline memory_timeline(const CompiledPlan& plan, const HeldBytes& held) {
  const Graph& g = plan.graph();
  MemoryTimeline t;
  t.arena_bytes = static_cast<int64_t>(plan.stats().arena_bytes);

  // The values behind the step's outputs after the first (the loss): the gradients. An
  // output that is a view (reshape) is held by the value it views.
  std::vector<bool> gradient(g.values().size(), false);
  for (size_t i = 1; i < g.outputs().size(); ++i)
    gradient[static_cast<size_t>(g.viewed_value(g.outputs()[i]).id)] = true;

  int32_t waves = 0;
  for (int32_t w : plan.node_waves()) waves = std::max(waves, w + 1);
  std::vector<bool> backward_wave(static_cast<size_t>(waves), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const int32_t w = plan.node_waves()[k];
    if (w >= 0 && g.nodes()[k].backward) backward_wave[static_cast<size_t>(w)] = true;
  }

  std::vector<int32_t> holder_of(g.values().size(), -1);
  for (const CompiledPlan::Placement& p : plan.placements()) {
    const Value& v = g.value(p.value);
    MemoryTimeline::Holder h;
    h.value = g.value_name(p.value);
    h.bytes = static_cast<int64_t>(p.bytes);
    h.first = p.first;
    h.last = p.last;
    if (v.kind == ValueKind::Node) {
      const Node& n = g.nodes()[static_cast<size_t>(v.node)];
      h.graph_node = v.node;
      h.op = n.op->name;
      h.node = n.label.empty() ? n.op->name : n.label;
      if (gradient[static_cast<size_t>(p.value.id)])
        h.cat = MemCat::Gradient;
      else
        h.cat = n.backward ? MemCat::Backward : MemCat::Activation;
    }
    holder_of[static_cast<size_t>(p.value.id)] = static_cast<int32_t>(t.holders.size());
    t.holders.push_back(std::move(h));
  }
  // The kernels' declared workspace: its step's wave only.
  for (const CompiledPlan::WorkspacePlacement& w : plan.workspaces()) {
    const Node& n = g.nodes()[static_cast<size_t>(w.node)];
    MemoryTimeline::Holder h;
    h.value = "workspace";
    h.graph_node = w.node;
    h.op = n.op->name;
    h.node = n.label.empty() ? n.op->name : n.label;
    h.cat = MemCat::Workspace;
    h.bytes = static_cast<int64_t>(w.bytes);
    h.first = h.last = w.wave;
    t.holders.push_back(std::move(h));
  }
  // A buffer taken over in place belongs to its new value from the wave that takes it.
  for (const CompiledPlan::Placement& p : plan.placements()) {
    if (!p.inplace_of.valid()) continue;
    const int32_t src = holder_of[static_cast<size_t>(p.inplace_of.id)];
    if (src < 0) continue;
    MemoryTimeline::Holder& h = t.holders[static_cast<size_t>(src)];
    h.last = std::max(h.first, std::min(h.last, p.first - 1));
  }

  std::array<int64_t, kNumMemCats> base{};
  base[mem_cat_index(MemCat::Parameter)] = held.parameter;
  base[mem_cat_index(MemCat::OptimizerState)] = held.optimizer_state;
  base[mem_cat_index(MemCat::Input)] = held.input;
  base[mem_cat_index(MemCat::Gradient)] = held.gradient;
  base[mem_cat_index(MemCat::Other)] = held.other;
  base[mem_cat_index(MemCat::Constant)] = plan_constant_bytes(plan);
  for (int32_t w = 0; w <= waves; ++w) {
    MemoryTimeline::Sample s;
    s.wave = w;
    s.phase = w == waves ? StepPhase::Optimizer
                         : (backward_wave[static_cast<size_t>(w)] ? StepPhase::Backward
                                                                  : StepPhase::Forward);
    s.bytes = base;
    t.samples.push_back(s);
  }
  // The optimizer reads what outlives the schedule: the holders that last to its end.
  const int32_t end = std::max(0, waves - 1);
  for (const MemoryTimeline::Holder& h : t.holders) {
    for (int32_t w = h.first; w <= h.last && w < waves; ++w)
      t.samples[static_cast<size_t>(w)].bytes[mem_cat_index(h.cat)] += h.bytes;
    if (h.last == end) t.samples.back().bytes[mem_cat_index(h.cat)] += h.bytes;
  }
  for (MemoryTimeline::Sample& s : t.samples) {
    int64_t live_arena = 0;
    for (MemCat c : {MemCat::Activation, MemCat::Backward, MemCat::Workspace}) live_arena += s.bytes[mem_cat_index(c)];
    live_arena += s.bytes[mem_cat_index(MemCat::Gradient)] - held.gradient;
    // The planner never overlaps two live values, so the live ones fit in the arena.
    MLS_CHECK(live_arena <= t.arena_bytes, "memory_timeline: live values exceed the arena");
    s.bytes[mem_cat_index(MemCat::ArenaFree)] = t.arena_bytes - live_arena;
  }
  t.total_bytes = t.samples.front().total();
  for (size_t i = 1; i < t.samples.size(); ++i)
    if (t.samples[i].live() > t.samples[t.peak].live()) t.peak = i;
  return t;
}

}  // namespace mls
