// Automatic differentiation as a program transformation over a tape of ops. The static
// graph's node list is a tape; so is the eager session's record. Gradients and tangents
// are emitted as ordinary ops through an Emitter, so the backward pass of a Graph is
// itself part of a Graph (printable, optimisable, differentiable again).
//
//   Graph g = ...;                                   // forward: loss = f(x; w1, b1, ...)
//   Result<Refs> grads = append_backward(g, loss, g.params());
//   g.set_outputs(*grads);                           // one graph: forward + backward
//
//   Refs tangents = append_jvp(g, {x}, {dx}, {y});   // forward mode: J(x) dx
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/ir/emitter.h"

namespace mls {

class Graph;

struct TapeEntry {
  const OpDef* op = nullptr;
  Attrs attrs;
  Refs inputs;
  Refs outputs;
  std::string label;
};

// Reverse mode: returns d(loss)/d(w) for each w in wrt (an invalid Ref where the loss does
// not depend on w). `seed` is the gradient of loss (ones when invalid).
Refs backprop(Emitter& e, std::span<const TapeEntry> tape, Ref loss, std::span<const Ref> wrt,
              Ref seed = {});

// Forward mode: the tangents of `outputs` given tangents of `primals`
// (an invalid Ref: that output does not depend on the primals).
Refs forward_tangents(Emitter& e, std::span<const TapeEntry> tape, std::span<const Ref> primals,
                      std::span<const Ref> tangents, std::span<const Ref> outputs);

// Graph versions: differentiate the graph's current nodes, appending the result. Gradients
// of parameters the loss does not reach are zeros, so the result has one Ref per wrt.
std::vector<TapeEntry> tape_of(const Graph& g);
Result<Refs> append_backward(Graph& g, Ref loss, std::span<const Ref> wrt);
Refs append_jvp(Graph& g, std::span<const Ref> primals, std::span<const Ref> tangents,
                std::span<const Ref> outputs);

}  // namespace mls
