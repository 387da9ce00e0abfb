// Shared by the plan tests (in-place reuse, concurrent waves): training steps to compile,
// random bindings, raw result bytes, and the check that no two arena values that live in the
// same wave share memory.
#pragma once

#include <utility>
#include <vector>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/ops/conv.h"
#include "engine/ops/layout.h"
#include "test_util.h"

namespace mls::test {

// A training step: loss and the gradients of every parameter as outputs.
inline Graph training_step(Graph g, Ref loss) {
  auto grads = append_backward(g, loss, g.params());
  MLS_CHECK(grads.ok(), "append_backward failed");
  Refs outs{loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  return g;
}

// x [batch, in] -> relu(linear) -> tanh(linear) -> linear -> cross entropy.
inline Graph mlp_step(int64_t batch, int64_t in, int64_t hidden, int64_t classes) {
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {batch, in}});
  Ref y = g.add_input("y", {DType::I64, {batch}});
  Ref w1 = g.add_param("w1", {DType::F32, {in, hidden}});
  Ref b1 = g.add_param("b1", {DType::F32, {hidden}});
  Ref w2 = g.add_param("w2", {DType::F32, {hidden, hidden}});
  Ref b2 = g.add_param("b2", {DType::F32, {hidden}});
  Ref w3 = g.add_param("w3", {DType::F32, {hidden, classes}});
  Ref h = g.emit1("tanh", {linear(g, relu(g, linear(g, x, w1, b1)), w2, b2)});
  Ref loss = cross_entropy(g, linear(g, h, w3, Ref{}), y);
  return training_step(std::move(g), loss);
}

// x [batch, 3, 16, 16] -> two 3x3 convolutions with relu -> 2x2 max pool -> linear.
inline Graph conv_step(int64_t batch, int64_t channels, int64_t classes) {
  Graph g("cnn");
  Ref x = g.add_input("x", {DType::F32, {batch, 3, 16, 16}});
  Ref y = g.add_input("y", {DType::I64, {batch}});
  Ref w1 = g.add_param("w1", {DType::F32, {channels, 3, 3, 3}});
  Ref w2 = g.add_param("w2", {DType::F32, {channels, channels, 3, 3}});
  Ref w3 = g.add_param("w3", {DType::F32, {channels * 64, classes}});
  Conv2dParams same;
  same.padding = {1, 1};
  Ref h = relu(g, conv2d(g, relu(g, conv2d(g, x, w1, same)), w2, same));
  h = reshape(g, max_pool2d(g, h, Pool2dParams{}), {batch, channels * 64});
  Ref loss = cross_entropy(g, linear(g, h, w3, Ref{}), y);
  return training_step(std::move(g), loss);
}

// Tensors for every input and parameter of g; integer inputs are labels in [0, classes).
struct Bindings {
  std::vector<std::pair<Ref, Tensor>> tensors;
  // Draws new values into the same tensors (a bound plan sees them).
  void redraw(const Graph& g, Rng& rng, int64_t classes) {
    for (auto& [r, t] : tensors) {
      OpSample s;
      s.int_high = classes;
      Tensor fresh = to_tensor(random_array(g.type_of(r), rng, s), t.dtype());
      t.fill_raw(fresh.data<uint8_t>(), fresh.nbytes());
    }
  }
};
inline Bindings random_bindings(const Graph& g, Rng& rng, int64_t classes) {
  Bindings b;
  Refs all = g.inputs();
  all.insert(all.end(), g.params().begin(), g.params().end());
  for (Ref r : all) b.tensors.emplace_back(r, Tensor::empty(host(), g.type_of(r).dtype, g.type_of(r).shape, AllocTag::Other));
  b.redraw(g, rng, classes);
  return b;
}

// Gradients get their own buffers, as the trainer does.
inline CompiledPlan compile_bound(const Graph& g, PlanOptions opt, const Bindings& b) {
  for (size_t i = 1; i < g.outputs().size(); ++i)
    if (g.value(g.outputs()[i]).kind == ValueKind::Node) opt.own_buffers.emplace_back(g.outputs()[i], AllocTag::Gradient);
  auto p = CompiledPlan::compile(g, host(), opt);
  MLS_CHECK(p.ok(), "compile failed");
  for (auto& [r, t] : b.tensors) MLS_CHECK(p->bind(r, t).ok(), "bind failed");
  return std::move(*p);
}

inline std::vector<uint8_t> raw_bytes(const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  t.backend().copy_to_host(*t.buffer(), t.byte_offset(), bytes.data(), bytes.size());
  return bytes;
}

inline std::vector<std::vector<uint8_t>> output_bytes(const CompiledPlan& p, const Graph& g) {
  std::vector<std::vector<uint8_t>> out;
  for (Ref r : g.outputs()) out.push_back(raw_bytes(p.tensor(r)));
  return out;
}

// Arena values whose waves [first, last] meet and whose bytes meet, other than a value and
// the input it was written over in place (that input's last wave is its first).
inline int overlapping_placements(const CompiledPlan& p) {
  const auto& pl = p.placements();  // by value id: a value written in place comes after its input
  int bad = 0;
  for (size_t i = 0; i < pl.size(); ++i)
    for (size_t j = i + 1; j < pl.size(); ++j) {
      if (pl[j].inplace_of == pl[i].value && pl[i].last == pl[j].first) continue;
      bool same_time = pl[i].first <= pl[j].last && pl[j].first <= pl[i].last;
      bool same_bytes = pl[i].offset < pl[j].offset + pl[j].bytes && pl[j].offset < pl[i].offset + pl[i].bytes;
      bad += same_time && same_bytes ? 1 : 0;
    }
  return bad;
}

}  // namespace mls::test
