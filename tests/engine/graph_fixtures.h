// Fixtures that several engine tests share: a dense classifier as a ModelBuilder, and a
// graph run on seeded random inputs.
//
//   Trainer t(host(), mlp_builder(20, {64}, 4), cfg);           // 20 -> 64 -> 4
//   auto before = outputs_on_random_inputs(g), after = outputs_on_random_inputs(optimised);
#pragma once

#include <vector>

#include "engine/exec/compiled_plan.h"
#include "engine/ir/graph.h"
#include "engine/train/rng.h"
#include "engine/train/trainer.h"
#include "test_util.h"

namespace mls::test {

// features -> hidden[0] -> ... -> classes: linear layers (fc1, fc2, ...; Kaiming-uniform
// weights, fan-in biases), relu between them, cross-entropy on the logits. All parameters
// are added before the first op, in layer order.
inline ModelBuilder mlp_builder(int64_t features, std::vector<int64_t> hidden, int64_t classes) {
  return [=](int64_t batch, bool) -> Result<ModelGraph> {
    ModelGraph m{Graph("mlp"), {}, {}, {}, {}, {}};
    Graph& g = m.graph;
    m.input = g.add_input("x", {DType::F32, {batch, features}});
    m.labels = g.add_input("y", {DType::I64, {batch}});
    std::vector<int64_t> widths{features};
    widths.insert(widths.end(), hidden.begin(), hidden.end());
    widths.push_back(classes);
    Refs w, b;
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      const std::string name = "fc" + std::to_string(l + 1);
      w.push_back(g.add_param(name + ".weight", {DType::F32, {widths[l], widths[l + 1]}},
                              {"kaiming_uniform", widths[l], widths[l + 1]}));
      b.push_back(g.add_param(name + ".bias", {DType::F32, {widths[l + 1]}}, {"uniform_fan_in", widths[l], widths[l + 1]}));
    }
    Ref h = m.input;
    for (size_t l = 0; l < w.size(); ++l) {
      h = linear(g, h, w[l], b[l]);
      if (l + 1 < w.size()) h = relu(g, h);
    }
    m.logits = h;
    m.loss = cross_entropy(g, m.logits, m.labels);
    return m;
  };
}

// How outputs_on_random_inputs fills a graph: floats from U(lo, hi), one stream per tensor
// (seed, seed + 1, ... in the order of the graph's inputs, then its params), integers i % classes.
struct RandomFill {
  double lo = -1, hi = 1;
  int64_t classes = 3;
  uint64_t seed = 17;
};

// Compiles and runs g with every input and param filled as `f` says; returns every output.
// Two graphs with the same inputs and params in the same order (passes keep it) see the same
// values.
inline std::vector<std::vector<double>> outputs_on_random_inputs(const Graph& g, const RandomFill& f = {}) {
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  uint64_t seed = f.seed;
  auto bind_all = [&](const Refs& refs) {
    for (Ref r : refs) {
      const ValueType t = g.type_of(r);
      Tensor x = Tensor::empty(host(), t.dtype, t.shape, AllocTag::Input);
      if (t.dtype == DType::I64) {
        std::vector<int64_t> v(static_cast<size_t>(numel(t.shape)));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i) % f.classes;
        x.fill_from_host_i64(v);
      } else {
        Rng rng(seed++);
        std::vector<float> v(static_cast<size_t>(numel(t.shape)));
        for (float& e : v) e = static_cast<float>(rng.uniform(f.lo, f.hi));
        x.fill_from_host(v);
      }
      REQUIRE(plan->bind(r, x).ok());
    }
  };
  bind_all(g.inputs());
  bind_all(g.params());
  plan->run();
  std::vector<std::vector<double>> out;
  for (Ref r : g.outputs()) out.push_back(plan->tensor(r).to_f64());
  return out;
}

}  // namespace mls::test
