// Waves: a schedule cut into groups of mutually independent nodes, which a backend may run
// at once (Backend::launch_concurrent).
//
//   std::vector<int32_t> w = assign_waves(g, schedule, 16);
//   // w[i]: the wave of node schedule[i]; no node of a wave reads what another one writes
//
// A node's wave is one past the latest wave that produced one of its inputs; views (reshape)
// cost nothing and take their input's. Update ops keep their order with every reader of
// what they mutate. A node moves at most `window` runnable nodes ahead of its place in the
// schedule: unbounded (ASAP), nodes of the backward that read only forward values would be
// hoisted into the forward and their results kept alive (in the arena) all along.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/ir/graph.h"

namespace mls {

// Waves are numbered 0, 1, ... with no gaps and never decrease by more than the window
// allows along the schedule. window <= 0: unbounded.
std::vector<int32_t> assign_waves(const Graph& g, std::span<const int32_t> schedule, int32_t window);

// The elements of a node's largest input or output: whether its kernel splits its own work
// across the cores (large) or runs on one thread anyway, and so may share a wave (small).
int64_t largest_operand(const Graph& g, const Node& n);

}  // namespace mls
