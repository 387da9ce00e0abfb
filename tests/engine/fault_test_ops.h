// Test-only probes for the fault finder (engine/train/fault_finder.h), registered by the
// tests that use them, never by the product: ops that write a NaN where a test chooses,
// and a small labelled MLP to put them in.
//
//   register_fault_probes();
//   ModelBuilder b = probed_mlp(6, {8, 8}, 3, Probe{"test_nan_at", "fc2", 5});
//   std::vector<Tensor> p = small_params(host(), *b(4, true));
//
// The probes are whole ops (reference, samples, both derivative rules), so the conformance
// suite, which walks the registry, checks them like any other when they are registered:
// their samples write no NaN (index -1), where they are the identity.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "engine/ir/graph.h"
#include "engine/train/data_source.h"
#include "engine/train/fault_finder.h"
#include "engine/train/model_graph.h"
#include "engine/train/rng.h"

namespace mls::test {

// test_nan_at(x, index): x with element `index` (flat) made NaN; index < 0: x unchanged.
// Its gradient is the identity. test_grad_nan(x, index): the identity, whose gradient is
// test_nan_at(gradient, index): finite forward, a NaN written in backward.
inline void register_fault_probes() {
  static const bool done = [] {
    auto infer = [](std::span<const ValueType> in, const Attrs&) -> Result<std::vector<ValueType>> {
      if (in.size() != 1 || in[0].dtype != DType::F32)
        return make_error("the fault probes take one f32 tensor");
      return std::vector<ValueType>{in[0]};
    };
    auto reference = [](std::span<const RefArray> in, const Attrs& a) {
      RefArray out = in[0];
      const int64_t k = a.get_int_or("index", -1);
      if (k >= 0 && k < static_cast<int64_t>(out.v.size()))
        out.v[static_cast<size_t>(k)] = std::numeric_limits<double>::quiet_NaN();
      return std::vector<RefArray>{out};
    };
    auto samples = [] {
      OpSample s;
      s.inputs = {{DType::F32, {2, 3}}};
      s.attrs = {{"index", int64_t{-1}}};
      s.note = "writes no NaN (the fault finder's test probe)";
      return std::vector<OpSample>{s};
    };
    auto identity_jvp = [](const JvpContext& c) { return Refs{c.tan(0)}; };
    OpRegistry& reg = op_registry();
    reg.define({.name = "test_nan_at",
                .attrs = {{"index", AttrKind::Int}},
                .infer = infer,
                .vjp = [](const GradContext& c) { return Refs{c.gout(0)}; },
                .jvp = identity_jvp,
                .reference = reference,
                .samples = samples,
                .doc = "test only: its input with a NaN at flat index `index`"});
    reg.define({.name = "test_grad_nan",
                .attrs = {{"index", AttrKind::Int}},
                .infer = infer,
                .vjp =
                    [](const GradContext& c) {
                      return Refs{c.e.emit1("test_nan_at", {c.gout(0)},
                                            {{"index", c.attrs.get_int("index")}})};
                    },
                .jvp = identity_jvp,
                .reference = [](std::span<const RefArray> in,
                                const Attrs&) { return std::vector<RefArray>{in[0]}; },
                .samples = samples,
                .doc = "test only: the identity, whose gradient writes a NaN at `index`"});
    reg.register_kernel("test_nan_at", DeviceKind::CPU, DType::F32, [](const KernelCall& c) {
      std::vector<float> v = c.inputs[0]->to_f32();
      const int64_t k = c.attrs.get_int_or("index", -1);
      if (k >= 0 && k < static_cast<int64_t>(v.size()))
        v[static_cast<size_t>(k)] = std::numeric_limits<float>::quiet_NaN();
      c.outputs[0]->fill_from_host(v);
    });
    reg.register_kernel("test_grad_nan", DeviceKind::CPU, DType::F32, [](const KernelCall& c) {
      c.outputs[0]->fill_from_host(c.inputs[0]->to_f32());
    });
    return true;
  }();
  (void)done;
}

// One of the probes, placed after the layer `after` ("fc2": after fc2 and its ReLU).
struct Probe {
  std::string op;     // "test_nan_at" or "test_grad_nan"
  std::string after;  // a layer's label
  int64_t index = 0;  // the element it spoils
  // > 0: a probe keyed on the model's input (its second operand, with this as its "above"
  // attribute): tests/engine/breakpoints_test.cpp's, which spoil only a marked batch.
  double above = 0;
};

// features -> hidden... -> classes; each layer's nodes labelled as a document would ("fc1"
// for its matmul and bias add, "act1" its ReLU), the probe's "probe"; cross-entropy on the
// logits ("loss"). Parameters fc<k>.weight [in, out] (Kaiming-uniform when a trainer
// initialises them) and fc<k>.bias [out] (zeros).
inline ModelBuilder probed_mlp(int64_t features, std::vector<int64_t> hidden, int64_t classes,
                               std::optional<Probe> probe = std::nullopt) {
  return [=](int64_t batch, bool) -> Result<ModelGraph> {
    ModelGraph m{Graph("probed_mlp"), {}, {}, {}, {}, {}};
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
      b.push_back(g.add_param(name + ".bias", {DType::F32, {widths[l + 1]}}, {"zeros"}));
    }
    Ref h = m.input;
    for (size_t l = 0; l < w.size(); ++l) {
      const std::string name = "fc" + std::to_string(l + 1);
      g.set_label(name);
      h = linear(g, h, w[l], b[l]);
      if (l + 1 < w.size()) {
        g.set_label("act" + std::to_string(l + 1));
        h = relu(g, h);
      }
      if (probe && probe->after == name) {
        g.set_label("probe");
        auto r = probe->above > 0
                     ? g.add_node(probe->op, {h, m.input},
                                  {{"index", probe->index}, {"above", probe->above}})
                     : g.add_node(probe->op, {h}, {{"index", probe->index}});
        if (!r) return r.error();
        h = r->at(0);
      }
    }
    m.logits = h;
    g.set_label("loss");
    m.loss = cross_entropy(g, m.logits, m.labels);
    g.set_label("");
    return m;
  };
}

// Every parameter of `m` on `backend`, uniform in [-0.5, 0.5) (seeded: the same each call).
inline std::vector<Tensor> small_params(Backend& backend, const ModelGraph& m, uint64_t seed = 3) {
  std::vector<Tensor> out;
  for (Ref r : m.graph.params()) {
    const ValueType t = m.graph.type_of(r);
    Rng rng(seed++);
    std::vector<float> v(static_cast<size_t>(numel(t.shape)));
    for (float& e : v) e = static_cast<float>(rng.uniform(-0.5, 0.5));
    out.push_back(Tensor::from_f32(backend, t.shape, v, AllocTag::Parameter));
  }
  return out;
}

// `size` samples of `features` values in [0.5, 1) with labels i % classes.
inline HostBatch probe_batch(int64_t size, int64_t features, int64_t classes) {
  HostBatch b;
  b.size = size;
  Rng rng(41);
  for (int64_t i = 0; i < size * features; ++i)
    b.x.push_back(static_cast<float>(rng.uniform(0.5, 1.0)));
  for (int64_t i = 0; i < size; ++i) b.y.push_back(i % classes);
  return b;
}

// The forward case on any backend (the CPU here, Vulkan in gpu_tests): a NaN written at
// flat index 5 after fc2 of 6 -> 8 -> 8 -> 3 is named as the probe's output, forward, with
// its operand (act2's ReLU) finite.
inline void check_forward_probe(Backend& backend) {
  register_fault_probes();
  const ModelBuilder build = probed_mlp(6, {8, 8}, 3, Probe{"test_nan_at", "fc2", 5});
  auto m = build(4, true);
  REQUIRE(m.ok());
  const std::vector<Tensor> params = small_params(backend, *m);
  const HostBatch batch = probe_batch(4, 6, 3);
  FaultQuery q{.backend = &backend, .build = &build, .params = params, .batch = &batch};
  auto f = find_first_fault(q);
  REQUIRE(f.ok());
  REQUIRE(f->has_value());
  const FaultSite& s = **f;
  CHECK(s.phase == FaultSite::Phase::Forward);
  CHECK(s.label == "probe");
  CHECK(s.op == "test_nan_at");
  CHECK(s.stats.first_non_finite == 5);
  CHECK(s.stats.nan == 1);
  CHECK(s.stats.non_finite == 1);
  CHECK(s.stats.shape == Shape{4, 8});
  REQUIRE(s.node >= 0);
  REQUIRE(static_cast<size_t>(s.node) < m->graph.nodes().size());  // a forward node
  CHECK(m->graph.nodes()[static_cast<size_t>(s.node)].op->name == "test_nan_at");
  REQUIRE(s.inputs.size() == 1);
  CHECK(s.inputs[0].rfind("act2 (relu) [4,8]: max |x| ", 0) == 0);
  CHECK(s.inputs[0].find("nan") == std::string::npos);
}

}  // namespace mls::test
