// In-place reuse: an OpDef::inplace op writes its output over an input that nothing reads
// later. The arena shrinks; the results stay bit-identical; inputs still needed, graph
// inputs, parameters, outputs and broadcast operands are left alone.
#include <cstring>

#include "engine/cpu/cpu_backend.h"
#include "engine/exec/default_passes.h"
#include "engine/ops/math.h"
#include "plan_test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

// Without the kernels' workspace: what in-place reuse saves is activations, and a GEMM's
// scratch at the peak wave (the same either way) could hide it.
PlanOptions options(bool inplace, bool concurrent = false) {
  PlanOptions o;
  o.inplace = inplace;
  o.concurrent = concurrent;
  o.kernel_workspace = false;
  return o;
}

// The one placement of value r.
const CompiledPlan::Placement& placement_of(const CompiledPlan& p, Ref r) {
  for (const auto& pl : p.placements())
    if (pl.value == r) return pl;
  FAIL("no arena placement for value " << r.id);
  return p.placements().front();
}

}  // namespace

TEST_CASE("every in-place op's kernel gives the same bytes when its output is its input", "[inplace]") {
  cpu::init();
  int checked = 0;
  uint64_t seed = 11;
  for (const OpDef* op : op_registry().all()) {
    if (!op->inplace) continue;
    INFO("op " << op->name);
    REQUIRE(op->num_outputs == 1);
    REQUIRE(op->kind != OpKind::Update);
    for (const OpSample& s : op->samples()) {
      INFO("sample " << s.note << " " << s.attrs.to_string());
      Rng rng(seed++);
      std::vector<Tensor> ins;
      for (const ValueType& t : s.inputs) ins.push_back(to_tensor(random_array(t, rng, s), t.dtype));
      auto out_t = op->infer(s.inputs, s.attrs);
      REQUIRE(out_t.ok());
      const ValueType ot = (*out_t)[0];
      KernelFn fn = op->kernel(DeviceKind::CPU, kernel_dtype(*op, s.inputs, *out_t));
      REQUIRE(fn != nullptr);
      // Out of place.
      Tensor fresh = Tensor::empty(host(), ot.dtype, ot.shape, AllocTag::Other);
      std::vector<const Tensor*> in_ptrs;
      for (const Tensor& t : ins) in_ptrs.push_back(&t);
      Tensor* fresh_out = &fresh;
      host().launch(fn, KernelCall{s.attrs, in_ptrs, std::span<Tensor* const>(&fresh_out, 1), host()});
      const auto want = raw_bytes(fresh);
      // In place over each input of the output's type (the others are broadcast or of another dtype).
      for (size_t i = 0; i < ins.size(); ++i) {
        if (!(s.inputs[i] == ot)) continue;
        INFO("written over input " << i);
        Tensor shared = Tensor::empty(host(), ot.dtype, ot.shape, AllocTag::Other);
        shared.fill_raw(ins[i].data<uint8_t>(), ins[i].nbytes());
        std::vector<const Tensor*> ptrs = in_ptrs;
        ptrs[i] = &shared;
        Tensor* out = &shared;
        host().launch(fn, KernelCall{s.attrs, ptrs, std::span<Tensor* const>(&out, 1), host()});
        CHECK(raw_bytes(shared) == want);
        ++checked;
      }
    }
  }
  CHECK(checked >= 30);  // unary, binary, *_backward, scale, add_scalar, where, fused ...
}

TEST_CASE("a chain exp(relu(2x) + 1) runs in one buffer, bit-identical to the plan without reuse", "[inplace]") {
  Graph g("chain");
  Ref x = g.add_input("x", {DType::F32, {512, 1024}});  // 2 MiB a value
  Ref t = scale(g, x, 2.0);        // x is a graph input: t gets a buffer of its own
  Ref r = relu(g, t);              // over t
  Ref a = add_scalar(g, r, 1.0);   // over r
  Ref e = exp(g, a);               // over a
  g.set_outputs({e});
  Rng rng(3);
  Bindings b = random_bindings(g, rng, 1);
  const size_t value_bytes = 512 * 1024 * sizeof(float);
  std::vector<std::vector<uint8_t>> results;
  for (bool concurrent : {false, true})
    for (bool inplace : {false, true}) {
      INFO("in place " << inplace << ", concurrent " << concurrent);
      CompiledPlan p = compile_bound(g, options(inplace, concurrent), b);
      CHECK(p.stats().scheduled_nodes == 4);
      CHECK(p.stats().inplace_steps == (inplace ? 3u : 0u));
      // Without reuse a value and its successor live at once; with it, the one buffer.
      CHECK(p.stats().arena_bytes == (inplace ? 1 : 2) * value_bytes);
      CHECK(p.stats().unplanned_bytes == 4 * value_bytes);
      CHECK(overlapping_placements(p) == 0);
      if (inplace) {
        CHECK(placement_of(p, r).inplace_of == t);
        CHECK(placement_of(p, e).offset == placement_of(p, t).offset);
        CHECK(p.to_text().find("(in place of ") != std::string::npos);
      }
      p.run();
      results.push_back(raw_bytes(p.tensor(e)));
    }
  for (size_t k = 1; k < results.size(); ++k) CHECK(results[k] == results[0]);
  std::vector<float> xv = b.tensors[0].second.to_f32(), ev(xv.size());
  std::memcpy(ev.data(), results[0].data(), results[0].size());
  for (size_t i = 0; i < xv.size(); i += 4099)  // against float64
    CHECK(ev[i] == Approx(std::exp(std::max(2.0 * xv[i], 0.0) + 1.0)).epsilon(1e-6));
}

TEST_CASE("in-place reuse leaves alone inputs read later, graph inputs, parameters, outputs, own buffers "
          "and broadcast operands", "[inplace]") {
  const Shape s{64, 128};
  SECTION("an input read again later") {
    Graph g("later");
    Ref x = g.add_input("x", {DType::F32, s});
    Ref t = scale(g, x, 0.5);
    Ref r = relu(g, t);  // t is read again below: r needs a buffer of its own
    Ref y = add(g, r, t);  // both inputs end here: y may take r's buffer (the first it may)
    g.set_outputs({y});
    Rng rng(4);
    Bindings b = random_bindings(g, rng, 1);
    CompiledPlan on = compile_bound(g, options(true), b);
    CompiledPlan off = compile_bound(g, options(false), b);
    CHECK(on.stats().inplace_steps == 1);
    CHECK(!placement_of(on, r).inplace_of.valid());
    CHECK(placement_of(on, r).offset != placement_of(on, t).offset);
    CHECK(placement_of(on, y).inplace_of == r);
    CHECK(overlapping_placements(on) == 0);
    on.run();
    off.run();
    CHECK(output_bytes(on, g) == output_bytes(off, g));
  }
  SECTION("an input that another kernel of the same wave reads") {
    Graph g("wave");
    Ref x = g.add_input("x", {DType::F32, s});
    Ref t = scale(g, x, 0.5);
    Ref a = exp(g, t);               // a and b share a wave and both read t last there:
    Ref b = g.emit1("tanh", {t});    // neither may write over it while the other reads it
    Ref y = add(g, a, b);
    g.set_outputs({y});
    Rng rng(6);
    Bindings bd = random_bindings(g, rng, 1);
    CompiledPlan conc = compile_bound(g, options(true, true), bd);
    CompiledPlan seq = compile_bound(g, options(false, false), bd);
    REQUIRE(conc.node_waves()[static_cast<size_t>(g.value(a).node)] == conc.node_waves()[static_cast<size_t>(g.value(b).node)]);
    CHECK(placement_of(conc, a).inplace_of != t);
    CHECK(placement_of(conc, b).inplace_of != t);
    CHECK(placement_of(conc, y).inplace_of == a);
    CHECK(overlapping_placements(conc) == 0);
    conc.run();
    seq.run();
    CHECK(output_bytes(conc, g) == output_bytes(seq, g));
  }
  SECTION("graph inputs and parameters") {
    Graph g("leaves");
    Ref x = g.add_input("x", {DType::F32, s});
    Ref w = g.add_param("w", {DType::F32, s});
    g.set_outputs({exp(g, x), neg(g, w)});
    auto p = CompiledPlan::compile(g, host());
    REQUIRE(p.ok());
    CHECK(p->stats().inplace_steps == 0);
  }
  SECTION("an output of the plan, or a value with its own buffer") {
    Graph g("kept");
    Ref x = g.add_input("x", {DType::F32, s});
    Ref t = scale(g, x, 2.0);
    Ref u = exp(g, t);
    g.set_outputs({t, u});
    auto p = CompiledPlan::compile(g, host());
    REQUIRE(p.ok());
    CHECK(p->stats().inplace_steps == 0);
    g.set_outputs({u});
    PlanOptions own;
    own.own_buffers = {{t, AllocTag::Gradient}};
    auto q = CompiledPlan::compile(g, host(), own);
    REQUIRE(q.ok());
    CHECK(q->stats().inplace_steps == 0);
  }
  SECTION("a broadcast operand") {
    Graph g("broadcast");
    Ref x = g.add_input("x", {DType::F32, s});
    Ref bias = g.add_param("bias", {DType::F32, {128}});
    Ref row = exp(g, bias);  // an arena value of 128 elements, last read by the add
    Ref y = add(g, x, row);  // [64,128]: row is broadcast, x a graph input: no reuse
    Ref row2 = exp(g, bias);
    Ref ex = exp(g, x);
    Ref z = mul(g, row2, ex);  // over ex (same shape), never over the broadcast row2
    g.set_outputs({y, z});
    auto p = CompiledPlan::compile(g, host());
    REQUIRE(p.ok());
    CHECK(!placement_of(*p, y).inplace_of.valid());
    CHECK(placement_of(*p, z).inplace_of == ex);
    CHECK(p->stats().inplace_steps == 1);
  }
}

TEST_CASE("an MLP training step: same nodes, smaller arena, identical loss and gradients with reuse on and off",
          "[inplace]") {
  Graph raw = mlp_step(64, 96, 128, 10);
  auto stages = run_passes(raw, host(), default_passes());
  REQUIRE(stages.ok());
  for (const Graph* g : {&raw, &stages->back().graph}) {
    INFO((g == &raw ? "as built" : "after the default passes"));
    Rng rng(9);
    Bindings b = random_bindings(*g, rng, 10);
    for (bool concurrent : {false, true}) {
      INFO("concurrent " << concurrent);
      CompiledPlan off = compile_bound(*g, options(false, concurrent), b);
      CompiledPlan on = compile_bound(*g, options(true, concurrent), b);
      CHECK(on.stats().scheduled_nodes == off.stats().scheduled_nodes);
      CHECK(on.stats().inplace_steps > 0);
      CHECK(on.stats().arena_bytes < off.stats().arena_bytes);
      CHECK(overlapping_placements(on) == 0);
      for (int step = 0; step < 3; ++step) {
        b.redraw(*g, rng, 10);
        on.run();
        off.run();
        auto a = output_bytes(on, *g), c = output_bytes(off, *g);
        REQUIRE(a.size() == c.size());
        for (size_t k = 0; k < a.size(); ++k) {
          INFO("output " << k);
          CHECK(a[k] == c[k]);
        }
        std::vector<double> loss = on.tensor(g->outputs()[0]).to_f64();
        CHECK(std::isfinite(loss[0]));
        CHECK(loss[0] > 0.5);  // about log(10) for random weights
      }
    }
  }
}
