// The tracing JIT (engine/exec/jit.h) against the eager session running the same function,
// and the eager session's reuse of slots, inference results and small buffers (eager.h).
//
// [SECTION] TracedFunction
// [SECTION] EagerSession reuse
#include <algorithm>
#include <cstring>

#include "engine/exec/eager.h"
#include "engine/exec/jit.h"
#include "engine/ops/math.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (float& x : v) x = static_cast<float>(r.uniform(-1, 1));
  return Tensor::from_f32(host(), shape, v);
}

// x [N,4], w [4,3], b [3] -> (sum(y*y), y) with y = relu(x w + b).
Refs layer(Emitter& e, std::span<const Ref> in) {
  Ref y = relu(e, linear(e, in[0], in[1], in[2]));
  return {sum(e, mul(e, y, y), {}, false), y};
}

// Runs `fn` eagerly on `inputs`; returns its outputs and, for inputs flagged in
// `requires_grad`, d outputs[0] / d input.
TracedCall run_eager(const TracedFunction::Fn& fn, const std::vector<Tensor>& inputs,
                     const std::vector<bool>& requires_grad = {}) {
  EagerSession s(host());
  Refs in, wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool rg = !requires_grad.empty() && requires_grad[i];
    in.push_back(s.leaf(inputs[i], rg));
    if (rg) wrt.push_back(in.back());
  }
  Refs outs = fn(s, in);
  TracedCall r;
  for (Ref o : outs) r.outputs.push_back(s.value(o).contiguous());
  if (!wrt.empty())
    for (Ref g : s.grad(outs[0], wrt)) r.grads.push_back(s.value(g).contiguous());
  return r;
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  std::vector<double> x = a.to_f64(), y = b.to_f64();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

}  // namespace

// [SECTION] TracedFunction

TEST_CASE("a traced function computes what the same function computes eagerly", "[jit]") {
  std::vector<Tensor> in{random_tensor({5, 4}, 1), random_tensor({4, 3}, 2), random_tensor({3}, 3)};
  TracedCall want = run_eager(layer, in);
  REQUIRE(want.outputs.size() == 2);
  CHECK(want.outputs[0].to_f64()[0] > 0);  // not a trivial all-zero case

  SECTION("without passes the plan runs the eager kernels in the eager order: bit-identical") {
    TracedFunction f(host(), layer, {.name = "layer", .optimize = false});
    auto got = f(in);
    REQUIRE(got.ok());
    REQUIRE(got->size() == 2);
    CHECK(bit_identical((*got)[0], want.outputs[0]));
    CHECK(bit_identical((*got)[1], want.outputs[1]));
  }
  SECTION("with the default passes (fusion may reassociate): within float rounding") {
    TracedFunction f(host(), layer, {.name = "layer"});
    auto got = f(in);
    REQUIRE(got.ok());
    REQUIRE(got->size() == 2);
    require_close((*got)[0].to_f64(), want.outputs[0].to_f64(), 1e-5, 1e-6, "sum of squares");
    require_close((*got)[1].to_f64(), want.outputs[1].to_f64(), 1e-5, 1e-6, "relu layer");
  }
}

TEST_CASE("the same signature is a cache hit, a new batch size or dtype traces again", "[jit]") {
  TracedFunction f(host(), layer);
  Tensor w = random_tensor({4, 3}, 2), b = random_tensor({3}, 3);
  Tensor x1 = random_tensor({5, 4}, 10), x2 = random_tensor({5, 4}, 11), x3 = random_tensor({7, 4}, 12);

  REQUIRE(f({x1, w, b}).ok());
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().hits == 0);
  auto r2 = f({x2, w, b});  // same types, new data: the cached plan, rebound
  REQUIRE(r2.ok());
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().hits == 1);
  require_close((*r2)[1].to_f64(), run_eager(layer, {x2, w, b}).outputs[1].to_f64(), 1e-5, 1e-6, "hit, new data");

  auto r3 = f({x3, w, b});  // batch 7: a second entry
  REQUIRE(r3.ok());
  CHECK(f.stats().traces == 2);
  CHECK(f.stats().entries == 2);
  CHECK((*r3)[1].shape() == Shape{7, 3});
  require_close((*r3)[1].to_f64(), run_eager(layer, {x3, w, b}).outputs[1].to_f64(), 1e-5, 1e-6, "batch 7");
  REQUIRE(f({x1, w, b}).ok());  // batch 5 again: still cached
  CHECK(f.stats().traces == 2);
  CHECK(f.stats().hits == 2);

  // A dtype change: the same function on i64 input casts first.
  TracedFunction g(host(), [](Emitter& e, std::span<const Ref> in) {
    return Refs{scale(e, cast(e, in[0], DType::F32), 2.0)};
  });
  auto gf = g({Tensor::from_f32(host(), {3}, {1.5f, -2, 4})});
  REQUIRE(gf.ok());
  auto gi = g({Tensor::from_i64(host(), {3}, {7, -1, 3})});
  REQUIRE(gi.ok());
  CHECK(g.stats().traces == 2);
  CHECK(g.stats().entries == 2);
  CHECK((*gf)[0].to_f64() == std::vector<double>{3, -4, 8});
  CHECK((*gi)[0].to_f64() == std::vector<double>{14, -2, 6});
  CHECK(g.graph_text().find("i64[3]") != std::string::npos);  // the last call's trace
}

TEST_CASE("gradients from a traced function equal EagerSession::grad", "[jit]") {
  std::vector<Tensor> in{random_tensor({6, 4}, 21), random_tensor({4, 3}, 22), random_tensor({3}, 23)};
  const std::vector<bool> rg{false, true, true};
  TracedCall want = run_eager(layer, in, rg);
  REQUIRE(want.grads.size() == 2);

  SECTION("without passes: bit-identical") {
    TracedFunction f(host(), layer, {.optimize = false});
    auto got = f.call(in, rg);
    REQUIRE(got.ok());
    REQUIRE(got->grads.size() == 2);
    CHECK(bit_identical(got->outputs[0], want.outputs[0]));
    CHECK(bit_identical(got->grads[0], want.grads[0]));
    CHECK(bit_identical(got->grads[1], want.grads[1]));
  }
  SECTION("with the default passes: within float rounding; requires_grad is part of the key") {
    TracedFunction f(host(), layer);
    auto got = f.call(in, rg);
    REQUIRE(got.ok());
    REQUIRE(got->grads.size() == 2);
    require_close(got->grads[0].to_f64(), want.grads[0].to_f64(), 1e-5, 1e-6, "d/dw");
    require_close(got->grads[1].to_f64(), want.grads[1].to_f64(), 1e-5, 1e-6, "d/db");
    CHECK(got->grads[0].shape() == Shape{4, 3});
    // The same types without gradients: another plan (forward only), then both are hits.
    REQUIRE(f(in).ok());
    CHECK(f.stats().traces == 2);
    auto all = f.call(in, {true, true, true});  // x too
    REQUIRE(all.ok());
    CHECK(f.stats().traces == 3);
    REQUIRE(all->grads.size() == 3);
    require_close(all->grads[0].to_f64(), run_eager(layer, in, {true, true, true}).grads[0].to_f64(), 1e-5,
                  1e-6, "d/dx");
    REQUIRE(f.call(in, rg).ok());
    CHECK(f.stats().traces == 3);
    CHECK(f.stats().hits == 1);
  }
}

TEST_CASE("results are copies: the next call does not overwrite them", "[jit]") {
  TracedFunction f(host(), layer);
  Tensor w = random_tensor({4, 3}, 2), b = random_tensor({3}, 3);
  auto first = f({random_tensor({5, 4}, 31), w, b});
  REQUIRE(first.ok());
  const std::vector<double> kept = (*first)[1].to_f64();
  auto second = f({random_tensor({5, 4}, 32), w, b});  // same plan, same arena
  REQUIRE(second.ok());
  CHECK(f.stats().hits == 1);
  CHECK((*second)[1].to_f64() != kept);  // the arena now holds other numbers...
  CHECK((*first)[1].to_f64() == kept);   // ...but the first result is its own copy
  CHECK((*first)[1].buffer() != (*second)[1].buffer());
}

TEST_CASE("a trace records one path: host state read while tracing is frozen until clear()", "[jit]") {
  bool negate = false;
  TracedFunction f(host(), [&negate](Emitter& e, std::span<const Ref> in) {
    return Refs{negate ? neg(e, in[0]) : scale(e, in[0], 3.0)};
  });
  Tensor x = Tensor::from_f32(host(), {2}, {1, -2});
  auto a = f({x});
  REQUIRE(a.ok());
  CHECK((*a)[0].to_f64() == std::vector<double>{3, -6});
  negate = true;  // invisible to the cached trace
  auto b = f({x});
  REQUIRE(b.ok());
  CHECK((*b)[0].to_f64() == std::vector<double>{3, -6});
  CHECK(f.stats().traces == 1);
  f.clear();
  auto c = f({x});
  REQUIRE(c.ok());
  CHECK((*c)[0].to_f64() == std::vector<double>{-1, 2});
  CHECK(f.stats().traces == 2);
  CHECK(f.stats().entries == 1);

  // A branch on shapes is fine: shapes are part of the key, each signature keeps its path.
  TracedFunction g(host(), [](Emitter& e, std::span<const Ref> in) {
    return Refs{e.shape_of(in[0])[0] > 2 ? sum(e, in[0], {}, false) : neg(e, in[0])};
  });
  auto small = g({Tensor::from_f32(host(), {2}, {1, 2})});
  auto large = g({Tensor::from_f32(host(), {3}, {1, 2, 3})});
  REQUIRE(small.ok());
  REQUIRE(large.ok());
  CHECK((*small)[0].to_f64() == std::vector<double>{-1, -2});
  CHECK((*large)[0].to_f64() == std::vector<double>{6});
}

TEST_CASE("a captured tensor becomes a graph constant holding its trace-time contents", "[jit]") {
  Tensor c = Tensor::from_f32(host(), {3}, {10, 20, 30});
  TracedFunction f(host(), [&c](Emitter& e, std::span<const Ref> in) { return Refs{add(e, in[0], e.constant(c))}; },
                   {.optimize = false});
  Tensor x = Tensor::from_f32(host(), {3}, {1, 2, 3});
  auto a = f({x});
  REQUIRE(a.ok());
  CHECK((*a)[0].to_f64() == std::vector<double>{11, 22, 33});
  CHECK(f.graph_text().find("%captured0: f32[3] = constant") != std::string::npos);
  c.fill_from_host({-1, -1, -1});  // after the trace: the traced function keeps its copy
  auto b = f({x});
  REQUIRE(b.ok());
  CHECK((*b)[0].to_f64() == std::vector<double>{11, 22, 33});
  // The same function run eagerly reads the tensor as it is now.
  TracedCall now = run_eager([&c](Emitter& e, std::span<const Ref> in) { return Refs{add(e, in[0], e.constant(c))}; },
                             {x});
  CHECK(now.outputs[0].to_f64() == std::vector<double>{0, 1, 2});
}

TEST_CASE("the traced and optimised graphs and the plan are there to read", "[jit]") {
  TracedFunction f(host(), [](Emitter& e, std::span<const Ref> in) {
    return Refs{mul(e, scale(e, scale(e, in[0], 2.0), 0.5), in[0])};  // the passes fold the scales
  }, {.name = "square"});
  CHECK(f.graph_text().empty());
  auto r = f({Tensor::from_f32(host(), {4}, {1, 2, 3, -4})});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_f64() == std::vector<double>{1, 4, 9, 16});
  const std::string traced = f.graph_text(), optimized = f.graph_text(true);
  INFO(traced << optimized);
  CHECK(traced.find("graph square(%x0: f32[4])") == 0);
  CHECK(traced.find("scale(%x0) {alpha=2}") != std::string::npos);
  CHECK(traced.find("{alpha=0.5}") != std::string::npos);
  CHECK(optimized.find("alpha=") == std::string::npos);  // the two scales are merged away
  CHECK(std::count(optimized.begin(), optimized.end(), '\n') < std::count(traced.begin(), traced.end(), '\n'));
  CHECK(f.plan_text().find("plan square") == 0);
}

TEST_CASE("a traced function reports bad calls as errors", "[jit]") {
  TracedFunction f(host(), layer);
  std::vector<Tensor> in{random_tensor({5, 4}, 1), random_tensor({4, 3}, 2), random_tensor({3}, 3)};
  auto flags = f.call(in, {true, false});
  REQUIRE_FALSE(flags.ok());
  CHECK(flags.error().message.find("requires_grad") != std::string::npos);
  auto undefined = f({in[0], Tensor(), in[2]});
  REQUIRE_FALSE(undefined.ok());
  CHECK(undefined.error().message.find("input 1") != std::string::npos);
  // Gradients need a scalar output 0.
  TracedFunction g(host(), [](Emitter& e, std::span<const Ref> in) { return Refs{relu(e, in[0])}; }, {.name = "vec"});
  auto notscalar = g.call({in[2]}, {true});
  REQUIRE_FALSE(notscalar.ok());
  CHECK(notscalar.error().message.find("scalar") != std::string::npos);
  CHECK(g.stats().traces == 0);
  CHECK(f.stats().entries == 0);
}

// [SECTION] EagerSession reuse

TEST_CASE("a warm eager session with periodic reset() allocates nothing", "[eager]") {
  EagerSession s(host());
  Tensor a = Tensor::from_f32(host(), {4}, {1, 2, 3, 4});
  Tensor b = Tensor::from_f32(host(), {4}, {0.5f, -1, 2, 0.25f});
  auto round = [&](bool tape) {
    s.reset();
    Ref ra = s.leaf(a, tape), rb = s.leaf(b);
    Ref last = ra;
    for (int i = 0; i < 50; ++i) last = add(s, last, rb);
    CHECK(s.tape_size() == (tape ? 50u : 0u));  // no tape entry unless an input requires grad
    return s.value(last).to_f64();
  };
  round(false);
  round(true);  // warm: slots, tape entries and 50 small buffers exist now
  const MemoryStats before = host().memory().stats();
  for (int r = 0; r < 20; ++r) {
    CHECK(round(r % 2 == 0) == std::vector<double>{26, -48, 103, 16.5});  // a + 50 b
  }
  const MemoryStats after = host().memory().stats();
  CHECK(after.alloc_count == before.alloc_count);
  CHECK(after.free_count == before.free_count);
}

TEST_CASE("the small-buffer cache hands out no buffer someone still holds, and counts what it keeps", "[eager]") {
  MemoryTracker& m = host().memory();
  const int64_t base = m.stats().current[tag_index(AllocTag::Activation)];
  {
    EagerSession s(host());
    Ref x = s.leaf(Tensor::from_f32(host(), {2, 2}, {1, 2, 3, 4}));
    Ref y = scale(s, x, 2.0);
    Ref v = reshape(s, y, {4});  // a view: shares y's buffer
    Tensor kept = s.value(scale(s, x, 3.0));  // the caller keeps this one past reset()
    CHECK(s.value(v).to_f64() == std::vector<double>{2, 4, 6, 8});
    s.reset();
    CHECK(s.num_values() == 0);
    CHECK(s.cached_bytes() == 64);  // y's buffer (once, though two values held it); not `kept`'s
    // The tracker still counts what the cache holds, plus `kept`.
    CHECK(m.stats().current[tag_index(AllocTag::Activation)] - base == 128);
    Ref x2 = s.leaf(Tensor::from_f32(host(), {2, 2}, {5, 6, 7, 8}));
    Ref z = scale(s, x2, -1.0);  // reuses y's buffer, not kept's
    CHECK(s.cached_bytes() == 0);
    CHECK(s.value(z).to_f64() == std::vector<double>{-5, -6, -7, -8});
    CHECK(kept.to_f64() == std::vector<double>{3, 6, 9, 12});
    CHECK(s.value(z).buffer() != kept.buffer());
    s.reset();
    s.release_cached_buffers();
    CHECK(s.cached_bytes() == 0);
    CHECK(m.stats().current[tag_index(AllocTag::Activation)] - base == 64);  // kept alone
  }
  CHECK(m.stats().current[tag_index(AllocTag::Activation)] == base);  // kept is gone too
}

TEST_CASE("remembered type inference tells ops apart by attributes and input types", "[eager]") {
  EagerSession s(host());
  Ref x = s.leaf(Tensor::from_f32(host(), {2, 3}, {1, 2, 3, 4, 5, 6}));
  for (int i = 0; i < 2; ++i) {  // the second pass hits the remembered entries
    CHECK(s.shape_of(sum(s, x, {0}, false)) == Shape{3});
    CHECK(s.shape_of(sum(s, x, {1}, false)) == Shape{2});
    CHECK(s.shape_of(sum(s, x, {1}, true)) == Shape{2, 1});
    CHECK(s.value(sum(s, x, {1}, false)).to_f64() == std::vector<double>{6, 15});
    CHECK(s.type_of(cast(s, x, DType::I64)).dtype == DType::I64);
    CHECK(s.type_of(cast(s, x, DType::I32)).dtype == DType::I32);  // same-length name
    CHECK(s.value(scale(s, x, i + 2.0)).to_f64()[5] == 6 * (i + 2));
    Ref t = transpose(s, x, {1, 0});
    CHECK(s.shape_of(t) == Shape{3, 2});
    CHECK(s.shape_of(add(s, t, t)) == Shape{3, 2});
    CHECK(s.shape_of(add(s, x, x)) == Shape{2, 3});
  }
}

TEST_CASE("eager gradients stay right across reset() with reused tape entries", "[eager]") {
  EagerSession s(host());
  std::vector<Tensor> in{random_tensor({6, 4}, 41), random_tensor({4, 3}, 42), random_tensor({3}, 43)};
  TracedCall fresh = run_eager(layer, in, {false, true, true});
  for (int r = 0; r < 3; ++r) {
    s.reset();
    Ref x = s.leaf(in[0]), w = s.leaf(in[1], true), b = s.leaf(in[2], true);
    if (r == 1) relu(s, add(s, w, w));  // a longer tape before: entries are reused at other positions
    Refs outs = layer(s, std::vector<Ref>{x, w, b});
    Refs g = s.grad(outs[0], Refs{w, b});
    CHECK(bit_identical(s.value(g[0]), fresh.grads[0]));
    CHECK(bit_identical(s.value(g[1]), fresh.grads[1]));
  }
}

TEST_CASE("a session's own value can be a leaf of it again, while its slots grow", "[eager]") {
  EagerSession s(host());
  Ref r = s.leaf(Tensor::from_f32(host(), {2}, {1, -1}));
  for (int i = 0; i < 200; ++i) r = s.leaf(s.value(add_scalar(s, r, 1.0)));  // value() points into the slots
  CHECK(s.num_values() == 401);
  CHECK(s.value(r).to_f64() == std::vector<double>{201, 199});
}
