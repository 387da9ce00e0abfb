// Forward and reverse mode made visible. A traced scalar function (a Graph whose inputs are
// the function's arguments) is evaluated with every value's tangent (forward mode: the dual
// numbers, (value, tangent) on each wire) or every value's adjoint (reverse mode: df/dv on
// each wire, swept back from the output), using the ops' own rules (engine/autodiff), and
// drawn top to bottom as an SVG figure. No Lua here: autodiff_lib.cpp traces the Lua
// function and binds this as mls.autodiff.
//
//   Graph g("f");
//   Ref x = g.add_input("x", {DType::F32, {}});
//   Ref y = mul(g, mul(g, x, x), g.emit1("sin", {x}));   // f(x) = x^2 sin x
//   double x0 = 2, dx = 1;
//   Result<autodiff::Evaluation> fwd =
//       autodiff::evaluate(g, y, cpu::backend(), {&x0, 1}, {&dx, 1}, autodiff::Mode::Forward);
//   fwd->value;        // 3.6372 (f(2));  fwd->derivative: 1.9726 (f'(2))
//   fwd->wires[1];     // {name "v1", formula "x · x", value {4}, tangent {4}}
//   Figure fig = autodiff::figure(*fwd);   // "forward mode: f(2) = 3.6372, f'(2) = 1.9726"
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/ir/graph.h"
#include "scripting/notebook/cell_output.h"

namespace mls::lua::autodiff {

enum class Mode { Forward, Reverse };

// One value of the function: a graph input (an argument), a constant, or an op's output.
struct Wire {
  std::string name;                 // the argument's name ("x"), "c1" for a constant, or
                                    // "v1", "v2", ... for op outputs in execution order
  std::string op;                   // "input", "const", or the op ("mul", "sin")
  std::string formula;              // "x · x", "sin(x)", "v1 · v2", "2"
  std::vector<std::string> inputs;  // the names of the wires the op reads
  Shape shape;
  std::vector<double> value;    // its elements (one for a scalar), row-major
  std::vector<double> tangent;  // forward mode: d value/dx · dx (zeros: it does not depend on x)
  std::vector<double> adjoint;  // reverse mode: df/d value (zeros: f does not depend on it)
};

struct Evaluation {
  Mode mode = Mode::Forward;
  std::vector<Wire> wires;  // the arguments, constants, then op outputs in execution order
  size_t output = 0;        // the wire holding f's value
  std::vector<double> x, dx;
  double value = 0;  // f(x)
  // Forward: the output's tangent, J dx. Reverse: the input adjoints dotted with dx (with
  // one argument and dx = 1, f'(x) either way).
  double derivative = 0;
  std::vector<double> gradient;  // reverse mode: df/dx_i per argument (empty in forward mode)
};

// Evaluates `traced` (its inputs are the arguments, 0-d or one-element f32; `output` a value
// with one element) at x on `backend`: every value, and in forward mode the tangent of every
// value for the input tangents dx, in reverse mode the adjoint of every value. The errors
// name the graph and the input or value at fault.
Result<Evaluation> evaluate(const Graph& traced, Ref output, Backend& backend,
                            std::span<const double> x, std::span<const double> dx, Mode mode);

// "3.6372", "-0.4161", "1.2346e+05", "0.0000" (never "-0.0000").
std::string number(double v);
// What a wire carries in `mode`: "(3.6372, 1.9726)" (value, tangent) or "∂f/∂v2 = 3.6372".
std::string wire_label(const Wire& w, Mode mode);
// "forward mode: f(2) = 3.6372, f'(2) = 1.9726".
std::string title(const Evaluation& e);

// The graph drawn top to bottom: arguments and constants as grey tags, each op a box with its
// formula ("v2 = sin(x)"), each wire labelled with wire_label, the output leading to "f".
Figure figure(const Evaluation& e);
// Forward mode on the left and reverse mode on the right, the same graph in the same layout.
Figure compare_figure(const Evaluation& forward, const Evaluation& reverse);

}  // namespace mls::lua::autodiff
