// Mixed precision: casts round to nearest even bit for bit, matmul_lowp against float64 and
// against f32, the autocast pass, bf16 training against f32 training, and dynamic loss
// scaling (skipped steps leave everything as it was; good steps grow the scale).
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/math.h"
#include "engine/ops/precision.h"
#include "engine/passes/passes.h"
#include "engine/train/init.h"
#include "engine/train/trainer.h"
#include "blobs_source.h"
#include "graph_fixtures.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Round to nearest even with `bits` significand bits (implicit bit included), exponents
// down to `min_exp` (below it: subnormal steps), in float64 arithmetic: an independent
// model of what f32 -> bf16 (8, -126) and f32 -> f16 (11, -14) must give.
double rne(double x, int bits, int min_exp, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  const int e = std::max(std::ilogb(x), min_exp);
  const double ulp = std::ldexp(1.0, e - (bits - 1));
  const double r = std::nearbyint(x / ulp) * ulp;  // FE_TONEAREST: ties to even
  return std::abs(r) > max_finite ? std::copysign(kInf, x) : r;
}
double rne_bf16(double x) { return rne(x, 8, -126, 0x1.FEp127); }
double rne_f16(double x) { return rne(x, 11, -14, 65504.0); }

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// f32 values, cast by the CPU kernel to `to`, read back as doubles.
std::vector<double> cast_f32(const std::vector<float>& v, DType to) {
  EagerSession s(host());
  Ref x = s.leaf(Tensor::from_f32(host(), {static_cast<int64_t>(v.size())}, v));
  Ref y = cast(s, x, to);
  REQUIRE(s.type_of(y).dtype == to);
  Ref back = cast(s, y, DType::F32);  // exact: every 16-bit value is an f32
  return s.value(back).to_f64();
}

// The same hand-picked values at offsets that reach both the 32-lane vector loop and the
// scalar tail of the conversion.
std::vector<float> spread(const std::vector<float>& picks) {
  std::vector<float> v;
  for (int rep = 0; rep < 5; ++rep) v.insert(v.end(), picks.begin(), picks.end());
  return v;
}

size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op->name == op;
  return n;
}

std::vector<std::vector<double>> param_values(const Trainer& t) {
  std::vector<std::vector<double>> v;
  for (const Tensor& p : t.params()) v.push_back(p.to_f64());
  return v;
}

HostBatch first_batch(BatchSource& data, int64_t size) {
  HostBatch b;
  data.start_epoch(0);
  REQUIRE(data.next(size, b));
  return b;
}

// op(A) op(B) in float64 from the values the 16-bit tensors hold, and sum |a||b| per
// element (the scale of the rounding errors).
struct Product {
  std::vector<double> c, abs;
};
Product reference_product(const RefArray& a, const RefArray& b, bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  Product p{std::vector<double>(static_cast<size_t>(m * n)), std::vector<double>(static_cast<size_t>(m * n))};
  const int64_t lda = a.shape.back(), ldb = b.shape.back();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, as = 0;
      for (int64_t q = 0; q < k; ++q) {
        double x = a.v[static_cast<size_t>(ta ? q * lda + i : i * lda + q)];
        double y = b.v[static_cast<size_t>(tb ? j * ldb + q : q * ldb + j)];
        s += x * y;
        as += std::abs(x * y);
      }
      p.c[static_cast<size_t>(i * n + j)] = s;
      p.abs[static_cast<size_t>(i * n + j)] = as;
    }
  return p;
}

RefArray random_values(DType t, Shape s, Rng& rng) {
  OpSample range;  // uniform in [-1, 1), rounded to the dtype
  return random_array({t, std::move(s)}, rng, range);
}

}  // namespace

TEST_CASE("f32 -> bf16 rounds to nearest even, bit for bit, subnormals and specials included",
          "[mixed-precision]") {
  // (f32 bits, bf16 bits) worked out by hand.
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3F800000, 0x3F80},  // 1
      {0x3F808000, 0x3F80},  // 1 + 2^-8: a tie, kept even (down)
      {0x3F818000, 0x3F82},  // a tie with an odd last bit: up
      {0x3F808001, 0x3F81},  // just above the tie: up
      {0x3F807FFF, 0x3F80},  // just below: down
      {0x00018000, 0x0002},  // a subnormal tie, odd: up (AVX-512 BF16 alone flushes it to 0)
      {0x00008000, 0x0000},  // a subnormal tie, even: down to zero
      {0x007FFFFF, 0x0080},  // the largest subnormal rounds up to the smallest normal
      {0x80018000, 0x8002},  // negative subnormal
      {0x00000001, 0x0000},  // the smallest subnormal: zero
      {0x7F7FFFFF, 0x7F80},  // the largest f32 overflows to inf
      {0x7F7F7FFF, 0x7F7F},  // the largest bf16 below it stays
      {0x7F800000, 0x7F80},  // inf
      {0xFF800000, 0xFF80},  // -inf
      {0x80000000, 0x8000},  // -0
  };
  std::vector<float> picks;
  for (auto [in, out] : cases) picks.push_back(from_bits(in));
  picks.push_back(from_bits(0x7FC00000));  // quiet NaN
  picks.push_back(from_bits(0x7F800001));  // signalling NaN: truncating would make it inf
  std::vector<float> v = spread(picks);
  std::vector<double> got = cast_f32(v, DType::BF16);
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t c = i % picks.size();
    INFO("element " << i << ", f32 bits " << std::hex << std::bit_cast<uint32_t>(v[i]));
    if (c < cases.size()) {
      const float want = std::bit_cast<float>(static_cast<uint32_t>(cases[c].second) << 16);
      CHECK(std::bit_cast<uint32_t>(static_cast<float>(got[i])) == std::bit_cast<uint32_t>(want));
      CHECK((std::isinf(want) || got[i] == rne_bf16(v[i])));  // the float64 model agrees
    } else {
      CHECK(std::isnan(got[i]));
    }
  }
}

TEST_CASE("f32 -> f16 rounds to nearest even, bit for bit, subnormals and specials included",
          "[mixed-precision]") {
  const std::vector<std::pair<float, double>> cases = {
      {1.0f, 1.0},
      {from_bits(0x3F801000), 1.0},                    // 1 + 2^-11: a tie, even: down
      {from_bits(0x3F803000), 1.0 + 0x1p-9},           // 1 + 3 * 2^-11: a tie, odd: up
      {65504.0f, 65504.0},                             // the largest f16
      {65519.0f, 65504.0},                             // below the halfway point to 2^16
      {65520.0f, kInf},                                // the halfway point: overflows
      {0x1p-24f, 0x1p-24},                             // the smallest f16 subnormal
      {0x1.8p-24f, 0x1p-23},                           // a subnormal tie, odd: up
      {0x1p-25f, 0.0},                                 // half the smallest: a tie, even: 0
      {0x1.000002p-25f, 0x1p-24},                      // just above it: up
      {-0x1.8p-24f, -0x1p-23},
      {0x1.FFCp-15f, 0x1p-14},                         // largest subnormal + half a step: normal
      {std::numeric_limits<float>::infinity(), kInf},
      {-std::numeric_limits<float>::infinity(), -kInf},
      {std::numeric_limits<float>::denorm_min(), 0.0},  // an f32 subnormal
  };
  std::vector<float> picks;
  for (auto [in, out] : cases) picks.push_back(in);
  picks.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> v = spread(picks);
  std::vector<double> got = cast_f32(v, DType::F16);
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t c = i % picks.size();
    INFO("element " << i << ", value " << v[i]);
    if (c < cases.size()) {
      CHECK(got[i] == cases[c].second);
      CHECK(std::signbit(got[i]) == std::signbit(cases[c].second));
      CHECK(got[i] == rne_f16(v[i]));
    } else {
      CHECK(std::isnan(got[i]));
    }
  }
}

TEST_CASE("casts to bf16 and f16 match round-to-nearest-even on random bit patterns", "[mixed-precision]") {
  // Random f32 bit patterns (every exponent, subnormals, NaNs) through the vector kernels,
  // against the float64 model.
  Rng rng(5);
  std::vector<float> v(1 << 16);
  for (float& x : v) x = from_bits(static_cast<uint32_t>(rng.next()));
  // Some exact ties and subnormals, which random bits rarely hit.
  for (size_t i = 0; i < 2048; ++i) v[i * 16] = from_bits(static_cast<uint32_t>(rng.next() & 0x807F8000u));
  for (size_t i = 0; i < 2048; ++i) v[i * 16 + 1] = from_bits(static_cast<uint32_t>(rng.next() & 0x807FFFFFu));
  std::vector<double> bf = cast_f32(v, DType::BF16), hf = cast_f32(v, DType::F16);
  size_t bad_bf = 0, bad_hf = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      bad_bf += !std::isnan(bf[i]);
      bad_hf += !std::isnan(hf[i]);
      continue;
    }
    bad_bf += bf[i] != rne_bf16(v[i]) || std::signbit(bf[i]) != std::signbit(v[i]);
    bad_hf += hf[i] != rne_f16(v[i]) || std::signbit(hf[i]) != std::signbit(v[i]);
  }
  CHECK(bad_bf == 0);
  CHECK(bad_hf == 0);
}

TEST_CASE("cast between every pair of types matches its reference", "[mixed-precision]") {
  // The conformance suite checks cast's gradient, so it only samples float -> f32; the other
  // pairs are checked here against the same float64 reference.
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};
  const OpDef* op = op_registry().find("cast");
  REQUIRE(op);
  Rng rng(3);
  OpSample range;
  range.lo = -300;
  range.hi = 300;
  range.int_high = 5;
  for (DType from : types)
    for (DType to : types) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      RefArray x = random_array({from, {7, 9}}, rng, range);
      Attrs a{{"dtype", std::string(dtype_name(to))}};
      EagerSession s(host());
      Ref y = s.emit1("cast", {s.leaf(to_tensor(x, from))}, a);
      CHECK(s.type_of(y).dtype == to);
      require_close(s.value(y).to_f64(), op->reference(std::vector<RefArray>{x}, a)[0].v, 0, 0, "cast");
    }
}

TEST_CASE("cast is differentiable between float types, with f32 gradients, not through integers",
          "[mixed-precision]") {
  Graph g("casts");
  Ref w = g.add_param("w", {DType::F32, {3, 4}});
  Ref v = g.add_param("v", {DType::F32, {3, 4}});
  Ref c = g.add_input("c", {DType::F32, {3, 4}});
  Ref through_bf16 = cast(g, cast(g, w, DType::BF16), DType::F32);
  Ref through_f16 = cast(g, cast(g, w, DType::F16), DType::F32);
  Ref through_int = cast(g, cast(g, v, DType::I32), DType::F32);
  Ref loss = sum(g, mul(g, add(g, add(g, through_bf16, through_f16), through_int), c), {}, false);
  Refs wrt{w, v};
  auto grads = append_backward(g, loss, wrt);
  REQUIRE(grads.ok());
  CHECK(g.type_of((*grads)[0]).dtype == DType::F32);
  g.set_outputs(*grads);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  Rng rng(1);
  RefArray cv = random_values(DType::F32, {3, 4}, rng);
  REQUIRE(plan->bind(w, to_tensor(random_values(DType::F32, {3, 4}, rng), DType::F32)).ok());
  REQUIRE(plan->bind(v, to_tensor(random_values(DType::F32, {3, 4}, rng), DType::F32)).ok());
  REQUIRE(plan->bind(c, to_tensor(cv, DType::F32)).ok());
  plan->run();
  // Through both 16-bit round trips the derivative is 1 each, not rounded: exactly 2c.
  std::vector<double> want(cv.v.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = 2 * cv.v[i];
  require_close(plan->tensor((*grads)[0]).to_f64(), want, 0, 0, "dL/dw");
  require_close(plan->tensor((*grads)[1]).to_f64(), std::vector<double>(12, 0.0), 0, 0, "dL/dv through i32");
}

TEST_CASE("matmul_lowp in bf16 matches a float64 product of the bf16 inputs", "[mixed-precision]") {
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
  };
  // Odd k (a half pair), k past one 256 pass, ragged tiles in m and n, threads split by
  // panels (n 83) and by rows (n 40, one panel), and every transpose.
  const Case cases[] = {{37, 83, 301, false, false}, {37, 83, 301, false, true}, {37, 83, 301, true, false},
                        {37, 83, 301, true, true},   {300, 40, 65, false, false}, {1, 5, 3, false, false},
                        {128, 256, 784, false, false}};
  Rng rng(11);
  for (const Case& t : cases) {
    INFO("m " << t.m << " n " << t.n << " k " << t.k << " ta " << t.ta << " tb " << t.tb);
    RefArray a = random_values(DType::BF16, t.ta ? Shape{t.k, t.m} : Shape{t.m, t.k}, rng);
    RefArray b = random_values(DType::BF16, t.tb ? Shape{t.n, t.k} : Shape{t.k, t.n}, rng);
    EagerSession s(host());
    Ref y = matmul_lowp(s, s.leaf(to_tensor(a, DType::BF16)), s.leaf(to_tensor(b, DType::BF16)), t.ta, t.tb);
    REQUIRE(s.type_of(y) == ValueType{DType::F32, {t.m, t.n}});
    std::vector<double> got = s.value(y).to_f64();
    Product want = reference_product(a, b, t.ta, t.tb, t.m, t.n, t.k);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want.c[i]) / want.abs[i]);
    INFO("worst |error| / sum |a b| = " << worst);
    CHECK(worst <= 2e-6);  // f32 sums of exact products (bf16's own step is 2^-8 = 3.9e-3)
  }
}

TEST_CASE("matmul_lowp broadcasts batch dims and runs f16 through f32", "[mixed-precision]") {
  Rng rng(12);
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(dtype_name(t));
    RefArray a = random_values(t, {2, 3, 5, 33}, rng), b = random_values(t, {3, 33, 7}, rng);
    EagerSession s(host());
    Ref y = matmul_lowp(s, s.leaf(to_tensor(a, t)), s.leaf(to_tensor(b, t)));
    REQUIRE(s.type_of(y) == ValueType{DType::F32, {2, 3, 5, 7}});
    std::vector<double> got = s.value(y).to_f64();
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        RefArray ai{{5, 33}, {a.v.begin() + (i * 3 + j) * 165, a.v.begin() + (i * 3 + j + 1) * 165}};
        RefArray bj{{33, 7}, {b.v.begin() + j * 231, b.v.begin() + (j + 1) * 231}};
        Product want = reference_product(ai, bj, false, false, 5, 7, 33);
        for (size_t q = 0; q < 35; ++q)
          CHECK(std::abs(got[static_cast<size_t>((i * 3 + j) * 35) + q] - want.c[q]) <= 2e-6 * want.abs[q]);
      }
  }
}

TEST_CASE("bf16 and f16 products differ from f32 ones by no more than their rounding", "[mixed-precision]") {
  Rng rng(13);
  const int64_t m = 64, k = 200, n = 48;
  RefArray a = random_values(DType::F32, {m, k}, rng), b = random_values(DType::F32, {k, n}, rng);
  Product exact = reference_product(a, b, false, false, m, n, k);
  // Rounding both inputs (relative error <= u each) moves a product by <= 2u |a b|.
  for (auto [t, u] : {std::pair{DType::BF16, 0x1p-8}, std::pair{DType::F16, 0x1p-11}}) {
    INFO(dtype_name(t));
    EagerSession s(host());
    Ref xa = s.leaf(to_tensor(a, DType::F32)), xb = s.leaf(to_tensor(b, DType::F32));
    std::vector<double> low = s.value(matmul_lowp(s, cast(s, xa, t), cast(s, xb, t))).to_f64();
    std::vector<double> full = s.value(matmul(s, xa, xb)).to_f64();
    double worst = 0, mean = 0;
    for (size_t i = 0; i < low.size(); ++i) {
      CHECK(std::abs(full[i] - exact.c[i]) <= 1e-6 * exact.abs[i]);
      const double rel = std::abs(low[i] - full[i]) / exact.abs[i];
      worst = std::max(worst, rel);
      mean += rel / static_cast<double>(low.size());
    }
    INFO("worst " << worst << ", mean " << mean);
    CHECK(worst <= 2 * u + 1e-6);
    CHECK(mean > u / 64);  // it really ran in low precision
  }
}

TEST_CASE("autocast puts bf16 products in place of f32 matmuls, forward and backward", "[mixed-precision]") {
  auto mg = mlp_builder(20, {32, 32}, 4)(16, true);
  REQUIRE(mg.ok());
  Graph& g = mg->graph;
  g.set_outputs({mg->loss});
  Graph low = autocast(g, DType::BF16);
  REQUIRE(low.verify().ok());
  CHECK(count_ops(low, "matmul") == 0);
  CHECK(count_ops(low, "matmul_lowp") == 3);
  CHECK(count_ops(low, "cast") == 6);  // x, h1, h2 and the three weights
  for (const Node& n : low.nodes()) {
    if (n.op->name == "cast") CHECK(low.type_of(n.outputs[0]).dtype == DType::BF16);
    if (n.op->name != "cast" && n.op->name != "matmul_lowp")
      for (Ref o : n.outputs) CHECK(dtype_is_float(low.type_of(o).dtype) == (low.type_of(o).dtype == DType::F32));
  }
  // The backward follows: every product is bf16, every parameter gradient f32.
  Refs f32_grads, bf16_grads;
  for (Graph* h : {&g, &low}) {
    Refs wrt(h->params().begin(), h->params().end());
    auto grads = append_backward(*h, h->outputs()[0], wrt);
    REQUIRE(grads.ok());
    for (size_t i = 0; i < wrt.size(); ++i) CHECK(h->type_of((*grads)[i]) == h->type_of(wrt[i]));
    Refs outs = *grads;
    h->set_outputs(outs);
    (h == &g ? f32_grads : bf16_grads) = outs;
  }
  CHECK(count_ops(low, "matmul") == 0);
  CHECK(count_ops(low, "matmul_lowp") == 3 + 5);  // the first layer's input needs no gradient
  // Same gradients up to bf16 rounding.
  Blobs data(16, 20, 4, 9);
  HostBatch b = first_batch(data, 16);
  std::vector<Tensor> params;
  for (size_t i = 0; i < g.params().size(); ++i) {
    const ValueType t = g.type_of(g.params()[i]);
    params.push_back(Tensor::empty(host(), t.dtype, t.shape, AllocTag::Parameter));
    REQUIRE(initialise(params.back(), g.value(g.params()[i]).init, i + 1).ok());
  }
  std::vector<std::vector<double>> results;
  for (Graph* h : {&g, &low}) {
    auto plan = CompiledPlan::compile(*h, host());
    REQUIRE(plan.ok());
    REQUIRE(plan->bind(h->inputs()[0], Tensor::from_f32(host(), {16, 20}, b.x)).ok());
    REQUIRE(plan->bind(h->inputs()[1], Tensor::from_i64(host(), {16}, b.y)).ok());
    for (size_t i = 0; i < params.size(); ++i) REQUIRE(plan->bind(h->params()[i], params[i]).ok());
    plan->run();
    for (Ref o : h->outputs()) results.push_back(plan->tensor(o).to_f64());
  }
  const size_t np = params.size();
  for (size_t i = 0; i < np; ++i) {
    double diff = 0, norm = 0;
    for (size_t j = 0; j < results[i].size(); ++j) {
      diff += std::pow(results[np + i][j] - results[i][j], 2);
      norm += std::pow(results[i][j], 2);
    }
    INFO("parameter " << i << ": relative difference " << std::sqrt(diff / norm));
    CHECK(std::sqrt(diff / norm) < 0.03);
    CHECK(std::sqrt(diff / norm) > 0);
  }
}

TEST_CASE("an MLP trained in bf16 learns as well as in f32, and its parameters stay f32", "[mixed-precision]") {
  // Overlapping blobs (8 classes in 3 features): not separable (f32 reaches about 0.74 on
  // the test split, chance is 0.125), so the two runs' losses and accuracies say something.
  Blobs train(4800, 3, 8, 21), test(1600, 3, 8, 21);
  std::map<Precision, TrainResult> runs;
  for (Precision p : {Precision::F32, Precision::BF16}) {
    TrainConfig cfg{.epochs = 2, .batch_size = 32, .seed = 4, .opt = {.type = "sgd", .lr = 0.05, .momentum = 0.9}};
    cfg.precision = p;
    Trainer t(host(), mlp_builder(3, {64, 64}, 8), cfg);
    auto r = t.fit(train, &test, nullptr);
    REQUIRE(r.ok());
    for (const Tensor& param : t.params()) CHECK(param.dtype() == DType::F32);
    CHECK(r->skipped_steps == 0);
    CHECK(r->loss_scale == 1.0);
    runs[p] = *r;
  }
  const TrainResult &f32 = runs[Precision::F32], &bf16 = runs[Precision::BF16];
  REQUIRE(bf16.step_losses.size() == 300);
  INFO("f32: final loss " << f32.final_loss << ", test accuracy " << f32.test.accuracy << "; bf16: "
                          << bf16.final_loss << ", " << bf16.test.accuracy);
  CHECK(bf16.step_losses.back() < 0.5 * bf16.step_losses.front());  // it learns
  CHECK(std::abs(bf16.final_loss - f32.final_loss) < 0.05 * f32.final_loss);
  CHECK(std::abs(bf16.test.accuracy - f32.test.accuracy) < 0.02);
  CHECK(bf16.test.accuracy > 0.7);
  CHECK(bf16.step_losses != f32.step_losses);  // it did run in bf16
}

TEST_CASE("eager and static bf16 training give the same losses", "[mixed-precision][eager]") {
  Blobs data(50 * 32, 20, 4, 3);
  TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 11, .opt = {.type = "adam", .lr = 0.01}};
  cfg.precision = Precision::BF16;
  Trainer st(host(), mlp_builder(20, {32, 32}, 4), cfg);
  cfg.mode = ExecMode::Eager;
  Trainer ea(host(), mlp_builder(20, {32, 32}, 4), cfg);
  auto rs = st.fit(data, nullptr, nullptr);
  auto re = ea.fit(data, nullptr, nullptr);
  REQUIRE(rs.ok());
  REQUIRE(re.ok());
  REQUIRE(rs->step_losses.size() == re->step_losses.size());
  for (size_t i = 0; i < rs->step_losses.size(); ++i)
    CHECK(std::abs(rs->step_losses[i] - re->step_losses[i]) <= 1e-5 * std::abs(rs->step_losses[i]));
}

TEST_CASE("an overflowing f16 loss scale skips the step, leaves everything as it was, and halves",
          "[mixed-precision]") {
  Blobs data(64, 20, 4, 5);
  HostBatch b = first_batch(data, 32);
  for (ExecMode mode : {ExecMode::Static, ExecMode::Eager}) {
    INFO((mode == ExecMode::Static ? "static" : "eager"));
    TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 2, .mode = mode, .opt = {.type = "adam", .lr = 0.01}};
    cfg.precision = Precision::F16;
    cfg.loss_scale = {.init = 0x1p40, .growth_interval = 1000};  // gradients * 2^40 overflow f16 (65504)
    Trainer t(host(), mlp_builder(20, {32, 32}, 4), cfg);
    REQUIRE(t.init().ok());
    auto before = param_values(t);
    auto l = t.train_step(b);
    REQUIRE(l.ok());
    CHECK(std::isfinite(*l));  // the loss itself is fine: only the scaled gradients overflow
    CHECK(t.loss_scaler().skipped() == 1);
    CHECK(t.loss_scaler().scale() == 0x1p39);
    CHECK(param_values(t) == before);  // bit for bit
    auto st = t.state();
    REQUIRE(st.ok());
    CHECK(st->ints.at("optimizer.steps") == 0);  // Adam's step count (its bias correction) too
    CHECK(st->step == 1);                        // the batch counts for schedules
    // Halving until the gradients fit: then the step is taken.
    int64_t steps = 1;
    while (t.loss_scaler().skipped() == steps && steps < 40) {
      REQUIRE(t.train_step(b).ok());
      ++steps;
    }
    const int64_t skipped = t.loss_scaler().skipped();
    INFO("skipped " << skipped);
    CHECK(skipped == steps - 1);
    CHECK(skipped > 10);
    CHECK(t.loss_scaler().scale() == std::ldexp(1.0, 40 - static_cast<int>(skipped)));
    CHECK(param_values(t) != before);
  }
}

TEST_CASE("a non-finite gradient in bf16 skips the step, a dynamic scale halves, and good steps grow it",
          "[mixed-precision]") {
  Blobs data(64, 20, 4, 6);
  HostBatch b = first_batch(data, 32);
  TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 3, .opt = {.type = "sgd", .lr = 0.05, .momentum = 0.9}};
  cfg.precision = Precision::BF16;
  cfg.loss_scale.growth_interval = 3;
  HostBatch bad = b;
  bad.x[7] = std::numeric_limits<float>::infinity();
  {  // bf16's default: no scaling at all (S stays 1), but a non-finite step is still skipped
    Trainer t(host(), mlp_builder(20, {32, 32}, 4), cfg);
    REQUIRE(t.init().ok());
    CHECK_FALSE(t.loss_scaler().dynamic());
    auto before = param_values(t);
    REQUIRE(t.train_step(bad).ok());
    CHECK(param_values(t) == before);
    CHECK(t.loss_scaler().skipped() == 1);
    for (int i = 0; i < 4; ++i) REQUIRE(t.train_step(b).ok());
    CHECK(param_values(t) != before);
    CHECK(t.loss_scaler().scale() == 1.0);
  }
  cfg.loss_scale.init = 1.0;  // asked for: the dynamic scale in bf16
  Trainer t(host(), mlp_builder(20, {32, 32}, 4), cfg);
  REQUIRE(t.init().ok());
  CHECK(t.loss_scaler().dynamic());
  CHECK(t.loss_scaler().scale() == 1.0);
  auto before = param_values(t);
  REQUIRE(t.train_step(bad).ok());
  CHECK(param_values(t) == before);
  CHECK(t.loss_scaler().skipped() == 1);
  CHECK(t.loss_scaler().scale() == 0.5);
  for (int i = 0; i < 3; ++i) REQUIRE(t.train_step(b).ok());
  CHECK(t.loss_scaler().scale() == 1.0);  // 3 good steps: doubled
  CHECK(param_values(t) != before);
  for (int i = 0; i < 3; ++i) REQUIRE(t.train_step(b).ok());
  CHECK(t.loss_scaler().scale() == 2.0);
  CHECK(t.loss_scaler().skipped() == 1);
}

TEST_CASE("the loss scale is part of the trainer's state, f32 checkpoints stay as they were",
          "[mixed-precision]") {
  Blobs data(64, 20, 4, 7);
  HostBatch b = first_batch(data, 32);
  TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 3, .opt = {.type = "sgd", .lr = 0.05}};
  cfg.precision = Precision::F16;
  cfg.loss_scale = {.init = 0x1p40, .growth_interval = 5};
  Trainer t(host(), mlp_builder(20, {32, 32}, 4), cfg);
  for (int i = 0; i < 3; ++i) REQUIRE(t.train_step(b).ok());
  auto st = t.state();
  REQUIRE(st.ok());
  Trainer back(host(), mlp_builder(20, {32, 32}, 4), cfg);
  REQUIRE(back.restore(*st).ok());
  CHECK(back.loss_scaler().scale() == 0x1p37);
  CHECK(back.loss_scaler().skipped() == 3);
  CHECK(back.loss_scaler().good_steps() == t.loss_scaler().good_steps());

  TrainConfig f32_cfg = cfg;
  f32_cfg.precision = Precision::F32;
  Trainer plain(host(), mlp_builder(20, {32, 32}, 4), f32_cfg);
  REQUIRE(plain.train_step(b).ok());
  auto old = plain.state();
  REQUIRE(old.ok());
  CHECK(old->numbers.count("loss_scale") == 0);
  CHECK(old->ints.count("skipped_steps") == 0);
  Trainer resumed(host(), mlp_builder(20, {32, 32}, 4), cfg);  // an f32 checkpoint resumed in f16
  REQUIRE(resumed.restore(*old).ok());
  CHECK(resumed.loss_scaler().scale() == 0x1p40);
  CHECK(resumed.loss_scaler().skipped() == 0);
}
