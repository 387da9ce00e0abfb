// Concurrent waves: independent nodes share a wave, a wave's small kernels run at once on the
// pool, and the results are the sequential plan's, bit for bit (repeated to shake out races).
// Liveness is counted in waves, so no two values of one wave share memory.
#include <algorithm>

#include "engine/exec/default_passes.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "plan_test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

PlanOptions options(bool concurrent, bool inplace = true) {
  PlanOptions o;
  o.concurrent = concurrent;
  o.inplace = inplace;
  return o;
}

int32_t wave_of(const CompiledPlan& p, const Graph& g, Ref r) {
  return p.node_waves()[static_cast<size_t>(g.value(r).node)];
}

// Runs the concurrent and the sequential plan of g `runs` times on new random inputs;
// every output must match bit for bit.
void require_same_as_sequential(const Graph& g, int runs, int64_t classes) {
  Rng rng(21);
  Bindings b = random_bindings(g, rng, classes);
  CompiledPlan seq = compile_bound(g, options(false), b);
  CompiledPlan conc = compile_bound(g, options(true), b);
  INFO(conc.to_text());
  CHECK(conc.stats().scheduled_nodes == seq.stats().scheduled_nodes);
  CHECK(conc.stats().waves < seq.stats().waves);
  REQUIRE(conc.stats().concurrent_waves >= 1);  // else this test would test nothing
  CHECK(overlapping_placements(conc) == 0);
  int mismatches = 0;
  for (int run = 0; run < runs; ++run) {
    b.redraw(g, rng, classes);
    seq.run();
    conc.run();
    mismatches += output_bytes(seq, g) == output_bytes(conc, g) ? 0 : 1;
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("two independent branches share waves and run at once, bit-identical to sequential", "[concurrent]") {
  Graph g("branches");
  Ref x = g.add_input("x", {DType::F32, {128, 128}});
  Ref a = exp(g, scale(g, x, 0.5));          // branch a
  Ref b = g.emit1("tanh", {add_scalar(g, x, 0.25)});  // branch b
  Ref y = add(g, a, b);
  g.set_outputs({y});
  auto p = CompiledPlan::compile(g, host(), options(true));
  REQUIRE(p.ok());
  // scale and add_scalar in wave 0, exp and tanh in 1, add in 2.
  CHECK(p->stats().waves == 3);
  CHECK(p->stats().concurrent_waves == 2);
  CHECK(p->stats().concurrent_steps == 4);
  CHECK(wave_of(*p, g, a) == wave_of(*p, g, b));
  CHECK(wave_of(*p, g, y) == wave_of(*p, g, a) + 1);
  CHECK(p->to_text().find("w1*: exp") != std::string::npos);
  CHECK(overlapping_placements(*p) == 0);
  // The values of one wave are live together: exp's and tanh's results never share bytes.
  auto seq = CompiledPlan::compile(g, host(), options(false));
  REQUIRE(seq.ok());
  CHECK(seq->stats().waves == 5);
  CHECK(seq->stats().concurrent_waves == 0);
  require_same_as_sequential(g, 300, 1);
}

TEST_CASE("large kernels of a wave run alone, tiny waves stay on one thread", "[concurrent]") {
  for (int64_t n : {int64_t{512}, int64_t{16}}) {  // 512x512 kernels split themselves; 16x16 ones are too small to share
    Graph g("sizes");
    Ref x = g.add_input("x", {DType::F32, {n, n}});
    g.set_outputs({add(g, exp(g, x), neg(g, x))});
    auto p = CompiledPlan::compile(g, host(), options(true));
    REQUIRE(p.ok());
    CHECK(p->stats().waves == 2);
    CHECK(p->stats().concurrent_waves == 0);
  }
}

TEST_CASE("Update ops keep their order with the readers of what they mutate", "[concurrent]") {
  Graph g("update");
  Ref x = g.add_input("x", {DType::F32, {8}});
  Ref s = g.add_param("s", {DType::F32, {8}}, {}, false);
  Ref before = scale(g, s, 2.0);  // reads the old state
  ema_update(g, s, exp(g, x), 0.5);
  Ref after = scale(g, s, 3.0);  // graph order: reads the updated state
  g.set_outputs({before, after});
  auto p = CompiledPlan::compile(g, host(), options(true));
  REQUIRE(p.ok());
  int32_t update_wave = -1;
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (g.nodes()[k].op->name == "ema_update") update_wave = p->node_waves()[k];
  CHECK(wave_of(*p, g, before) < update_wave);
  CHECK(update_wave < wave_of(*p, g, after));
  std::vector<float> xv{0, 1, -1, 0.5f, 2, -2, 0.25f, 3}, sv{1, 2, 3, 4, -1, -2, -3, 0};
  Tensor xt = Tensor::from_f32(host(), {8}, xv), st = Tensor::from_f32(host(), {8}, sv);
  REQUIRE(p->bind(x, xt).ok());
  REQUIRE(p->bind(s, st).ok());
  p->run();
  auto b = p->tensor(before).to_f64(), a = p->tensor(after).to_f64();
  for (size_t i = 0; i < 8; ++i) {
    CHECK(b[i] == Approx(2.0 * sv[i]));
    CHECK(a[i] == Approx(3.0 * (sv[i] + 0.5 * (std::exp(double{xv[i]}) - sv[i]))).epsilon(1e-6));
  }
}

TEST_CASE("an MLP training step runs concurrent waves, bit-identical to sequential over 300 runs", "[concurrent]") {
  Graph g = mlp_step(64, 96, 128, 10);
  require_same_as_sequential(g, 300, 10);
  auto stages = run_passes(g, host(), default_passes());
  REQUIRE(stages.ok());
  require_same_as_sequential(stages->back().graph, 300, 10);
}

TEST_CASE("a conv net training step runs concurrent waves, bit-identical to sequential over 200 runs",
          "[concurrent]") {
  Graph g = conv_step(16, 8, 10);
  require_same_as_sequential(g, 200, 10);
}

TEST_CASE("two GEMMs at once from the pool's threads equal the same GEMMs in turn (OpenBLAS)", "[concurrent]") {
  // Large GEMMs are threaded inside OpenBLAS, small ones run on the calling thread: both
  // kinds, called from two of our threads at once.
  const OpDef* mm = op_registry().find("matmul");
  REQUIRE(mm != nullptr);
  Attrs attrs{{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}};
  KernelFn fn = mm->kernel(DeviceKind::CPU, DType::F32);
  Rng rng(5);
  for (int64_t n : {int64_t{384}, int64_t{48}}) {
    INFO("n = " << n);
    OpSample s;
    ValueType t{DType::F32, {n, n}};
    std::vector<Tensor> ins, outs_seq, outs_conc;
    for (int i = 0; i < 4; ++i) ins.push_back(to_tensor(random_array(t, rng, s), DType::F32));
    for (int i = 0; i < 2; ++i) {
      outs_seq.push_back(Tensor::empty(host(), DType::F32, {n, n}, AllocTag::Other));
      outs_conc.push_back(Tensor::empty(host(), DType::F32, {n, n}, AllocTag::Other));
    }
    const Tensor* in0[] = {&ins[0], &ins[1]};
    const Tensor* in1[] = {&ins[2], &ins[3]};
    Tensor* o_seq[] = {&outs_seq[0], &outs_seq[1]};
    Tensor* o_conc[] = {&outs_conc[0], &outs_conc[1]};
    KernelCall seq0{attrs, in0, std::span<Tensor* const>(&o_seq[0], 1), host()};
    KernelCall seq1{attrs, in1, std::span<Tensor* const>(&o_seq[1], 1), host()};
    host().launch(fn, seq0);
    host().launch(fn, seq1);
    const auto want0 = raw_bytes(outs_seq[0]), want1 = raw_bytes(outs_seq[1]);
    KernelCall c0{attrs, in0, std::span<Tensor* const>(&o_conc[0], 1), host()};
    KernelCall c1{attrs, in1, std::span<Tensor* const>(&o_conc[1], 1), host()};
    KernelLaunch both[] = {{fn, &c0, nullptr}, {fn, &c1, nullptr}};
    int mismatches = 0;
    for (int run = 0; run < 100; ++run) {
      outs_conc[0].fill_from_host(std::vector<float>(static_cast<size_t>(n * n), -1.f));
      outs_conc[1].fill_from_host(std::vector<float>(static_cast<size_t>(n * n), -1.f));
      host().launch_concurrent(both);
      mismatches += raw_bytes(outs_conc[0]) == want0 && raw_bytes(outs_conc[1]) == want1 ? 0 : 1;
    }
    CHECK(mismatches == 0);
  }
}
