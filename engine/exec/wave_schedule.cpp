#include "engine/exec/wave_schedule.h"

#include <algorithm>
#include <numeric>

namespace mls {

std::vector<int32_t> assign_waves(const Graph& g, std::span<const int32_t> schedule, int32_t window) {
  const size_t nv = g.values().size();
  auto at = [](Ref r) { return static_cast<size_t>(r.id); };
  std::vector<int32_t> avail(nv, 0);  // the first wave that may read the value
  std::vector<int32_t> root(nv);      // the value whose storage it is (views resolved)
  std::iota(root.begin(), root.end(), 0);
  std::vector<int32_t> read_until(nv, -1);  // per root: the latest wave that reads it
  std::vector<int32_t> updated_at(nv, -1);  // per root: the wave of its latest Update
  std::vector<int32_t> wave(schedule.size(), 0);
  std::vector<int32_t> runnable;  // the waves of the runnable nodes so far, in schedule order
  for (size_t s = 0; s < schedule.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(schedule[s])];
    int32_t w = 0;
    for (Ref r : n.inputs) {
      w = std::max(w, avail[at(r)]);
      w = std::max(w, updated_at[static_cast<size_t>(root[at(r)])] + 1);  // reads the new value
    }
    if (n.op->view) {
      root[at(n.outputs[0])] = root[at(n.inputs[0])];
      avail[at(n.outputs[0])] = avail[at(n.inputs[0])];
      wave[s] = w;  // for display only: a view does not run
      continue;
    }
    if (n.op->kind == OpKind::Update)  // after every earlier reader of the old value
      for (int m : n.op->mutated_inputs)
        w = std::max(w, read_until[static_cast<size_t>(root[at(n.inputs[static_cast<size_t>(m)])])] + 1);
    if (window > 0 && runnable.size() >= static_cast<size_t>(window))
      w = std::max(w, runnable[runnable.size() - static_cast<size_t>(window)]);
    wave[s] = w;
    runnable.push_back(w);
    for (Ref r : n.inputs) {
      int32_t& until = read_until[static_cast<size_t>(root[at(r)])];
      until = std::max(until, w);
    }
    for (Ref o : n.outputs) avail[at(o)] = w + 1;
    if (n.op->kind == OpKind::Update)
      for (int m : n.op->mutated_inputs) updated_at[static_cast<size_t>(root[at(n.inputs[static_cast<size_t>(m)])])] = w;
  }
  // Number the waves densely (a view's display wave may name an empty one).
  std::vector<int32_t> used(wave.begin(), wave.end());
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (int32_t& w : wave) w = static_cast<int32_t>(std::lower_bound(used.begin(), used.end(), w) - used.begin());
  return wave;
}

int64_t largest_operand(const Graph& g, const Node& n) {
  int64_t m = 0;
  for (Ref r : n.inputs) m = std::max(m, numel(g.type_of(r).shape));
  for (Ref r : n.outputs) m = std::max(m, numel(g.type_of(r).shape));
  return m;
}

}  // namespace mls
