// Compiling a small graph with its backward pass and checking gradients against central
// differences, for tests of composite builders (norm_test, rnn_attention_test).
//
//   Evaluated r = evaluate({f32_input}, [](Graph& g, const Refs& x) { return sum(g, tanh(g, x[0]), {}, false); });
//   std::vector<double> want = fd_grad(reference_in_double, {x_values}, 0);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/ir/graph.h"
#include "test_util.h"

namespace mls::test {

struct In {
  ValueType type;
  std::vector<double> v;
};

struct Evaluated {
  double value = 0;
  std::vector<std::vector<double>> grads;  // one per f32 input, in order
};

// loss = build(graph, inputs) and its gradients with respect to the f32 inputs, compiled and run.
inline Evaluated evaluate(const std::vector<In>& ins, const std::function<Ref(Graph&, const Refs&)>& build) {
  Graph g("grad_check");
  Refs xs, wrt;
  for (size_t i = 0; i < ins.size(); ++i) {
    xs.push_back(g.add_input("x" + std::to_string(i), ins[i].type));
    if (ins[i].type.dtype == DType::F32) wrt.push_back(xs.back());
  }
  Ref loss = build(g, xs);
  auto grads = append_backward(g, loss, wrt);
  REQUIRE(grads.ok());
  Refs outs{loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  for (size_t i = 0; i < ins.size(); ++i)
    REQUIRE(plan->bind(xs[i], to_tensor(RefArray{ins[i].type.shape, ins[i].v}, ins[i].type.dtype)).ok());
  plan->run();
  Evaluated r;
  r.value = plan->tensor(loss).to_f64()[0];
  for (Ref gr : *grads) r.grads.push_back(plan->tensor(gr).to_f64());
  return r;
}

// Central differences of f in float64 with respect to inputs[k].
inline std::vector<double> fd_grad(const std::function<double(const std::vector<std::vector<double>>&)>& f,
                                   std::vector<std::vector<double>> inputs, size_t k, double h = 1e-5) {
  std::vector<double> g(inputs[k].size());
  for (size_t i = 0; i < g.size(); ++i) {
    double keep = inputs[k][i];
    inputs[k][i] = keep + h;
    double fp = f(inputs);
    inputs[k][i] = keep - h;
    double fm = f(inputs);
    inputs[k][i] = keep;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

}  // namespace mls::test
