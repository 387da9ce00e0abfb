// A graph replayed node by node on an EagerSession, every value kept: the trainer's eager
// step, the debugger's re-run of a failing step (engine/train/fault_finder.h) and the
// step-through view (runner/step_through.h) all run a step this way.
//
//   std::vector<Ref> map(g.values().size());
//   map[x.id] = s.leaf(x_tensor);  ...                  // the inputs and parameters
//   auto r = replay(s, g, map, [&](size_t node, std::span<const Ref> outs) {
//     return all_finite(s.value(outs[0]));              // false stops the replay here
//   });
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"

namespace mls {

// `map` holds, by value id, the session values of the graph's inputs and parameters (the
// caller's leaves). The graph's constants become leaves, then every node runs in graph order
// and its outputs go into `map`; `after` (when given) sees each node's outputs and may stop
// the replay by returning false. With the session's deferred errors on, a node it refuses is
// an error naming the node and its op.
Result<void> replay(EagerSession& s, const Graph& g, std::vector<Ref>& map,
                    const std::function<bool(size_t node, std::span<const Ref> outs)>& after = {});

}  // namespace mls
