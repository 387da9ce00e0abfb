// cpu::gemm (the engine's AVX-512 kernels where compiled) and cpu::gemm_cblas (the fallback)
// against a float64 reference: every transpose pair, shapes around the tile sizes (6 x 64,
// K passes of 128, 256-column GEMV chunks), the MLP's shapes, leading dimensions wider than
// the matrices, beta 0 over NaN-filled C, beta 1, bias per row and per column, each
// activation, and one and two threads (columns split, rows split, GEMV split).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cpu/gemm.h"

namespace mls::cpu {
namespace {

struct Case {
  int64_t m, n, k;
  bool ta = false, tb = false;
  float beta = 0.0f;
  BiasAxis axis = BiasAxis::None;
  Activation act = Activation::None;
  int64_t pad = 0;  // extra elements per row of A, B and C
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << c.m << "x" << c.n << "x" << c.k << (c.ta ? " A^T" : "") << (c.tb ? " B^T" : "") << " beta " << c.beta
    << " bias " << static_cast<int>(c.axis) << " act " << static_cast<int>(c.act) << " pad " << c.pad;
  return s.str();
}

double act_ref(Activation a, double x) {
  switch (a) {
    case Activation::None: return x;
    case Activation::Relu: return x > 0 ? x : 0;
    case Activation::Sigmoid: return 1 / (1 + std::exp(-x));
    case Activation::Tanh: return std::tanh(x);
    case Activation::Gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::Silu: return x / (1 + std::exp(-x));
  }
  return x;
}

using GemmFn = void (*)(ThreadPool&, const GemmArgs&);

// Runs `fn` on the case and compares every element of C (and nothing outside it: the padding
// of C must keep its sentinel) with the float64 result. Rounding of a k-term fp32 sum stays
// within k * 2^-24 of the sum of |terms|; the bound allows twice that plus the activation's
// float rounding.
void check(GemmFn fn, ThreadPool& pool, const Case& c, uint32_t seed) {
  INFO(describe(c));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  std::vector<float> a(static_cast<size_t>(a_rows * lda)), b(static_cast<size_t>(b_rows * ldb));
  std::vector<float> cm(static_cast<size_t>(c.m * ldc)), bias(static_cast<size_t>(c.axis == BiasAxis::Row ? c.m : c.n));
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  for (auto& v : bias) v = u(rng);
  const float sentinel = 12345.0f;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      cm[static_cast<size_t>(i * ldc + j)] =
          j >= c.n ? sentinel : c.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  const std::vector<float> c0 = cm;

  GemmArgs g{.trans_a = c.ta, .trans_b = c.tb, .m = c.m, .n = c.n, .k = c.k, .a = a.data(), .lda = lda,
             .b = b.data(), .ldb = ldb, .c = cm.data(), .ldc = ldc, .beta = c.beta,
             .bias = c.axis == BiasAxis::None ? nullptr : bias.data(), .bias_axis = c.axis, .act = c.act};
  fn(pool, g);

  auto at = [](const std::vector<float>& v, int64_t ld, int64_t r, int64_t col) {
    return static_cast<double>(v[static_cast<size_t>(r * ld + col)]);
  };
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const double got = at(cm, ldc, i, j);
      if (j >= c.n) {
        INFO("C padding at " << i << ", " << j);
        REQUIRE(got == sentinel);
        continue;
      }
      double s = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double t = (c.ta ? at(a, lda, p, i) : at(a, lda, i, p)) * (c.tb ? at(b, ldb, j, p) : at(b, ldb, p, j));
        s += t;
        mag += std::abs(t);
      }
      if (c.beta != 0.0f) {
        s += c.beta * at(c0, ldc, i, j);
        mag += std::abs(c.beta * at(c0, ldc, i, j));
      }
      if (c.axis != BiasAxis::None) {
        const double bv = bias[static_cast<size_t>(c.axis == BiasAxis::Row ? i : j)];
        s += bv;
        mag += std::abs(bv);
      }
      const double want = act_ref(c.act, s);
      const double tol = 2.0 * static_cast<double>(c.k + 2) * std::ldexp(1.0, -24) * mag * 1.2 + 4e-7 * std::abs(want) + 1e-30;
      INFO("C[" << i << ", " << j << "]: got " << got << ", want " << want);
      REQUIRE(std::abs(got - want) <= tol);
    }
}

// The shapes every variant runs on.
const std::vector<std::array<int64_t, 3>> kShapes = {
    {1, 1, 1},     {2, 3, 5},     {7, 13, 17},   {6, 64, 128},  {7, 65, 129},  {5, 16, 3},    {12, 70, 20},
    {13, 70, 20},  {31, 47, 257}, {1, 256, 784}, {1, 10, 128},  {1, 300, 37},  {1, 7, 1},     {5, 1, 33},
    {64, 1, 7},    {300, 1, 500}, {37, 29, 1},   {3, 100, 50},  {128, 10, 128}, {97, 113, 389},
    // Rows packed by chunks (two of 102), 9 panels (the last of 12 columns), K passes of 150.
    {200, 140, 300}};

TEST_CASE("gemm matches float64 on every transpose pair, beta 0 over NaN and beta 1", "[gemm]") {
  ThreadPool pool(1);
  uint32_t seed = 1;
  for (auto [m, n, k] : kShapes)
    for (int t = 0; t < 4; ++t)
      for (float beta : {0.0f, 1.0f}) {
        Case c{m, n, k, (t & 1) != 0, (t & 2) != 0, beta};
        check(gemm, pool, c, seed++);
        c.pad = 3;
        check(gemm, pool, c, seed++);
      }
}

TEST_CASE("gemm's epilogue: bias per row or column and each activation", "[gemm]") {
  ThreadPool pool(1);
  uint32_t seed = 100;
  const Activation acts[] = {Activation::None, Activation::Relu, Activation::Sigmoid,
                             Activation::Tanh, Activation::Gelu, Activation::Silu};
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{7, 65, 300}, {1, 40, 9}, {33, 1, 20}, {2, 3, 0}})
    for (BiasAxis axis : {BiasAxis::None, BiasAxis::Col, BiasAxis::Row})
      for (Activation act : acts)
        for (int t = 0; t < 4; ++t)
          check(gemm, pool, Case{m, n, k, (t & 1) != 0, (t & 2) != 0, t == 3 ? 0.5f : 0.0f, axis, act, 1}, seed++);
}

TEST_CASE("gemm at the MLP's shapes on one and two threads", "[gemm]") {
  ThreadPool one(1), two(2);
  // The three GEMMs of a 784-256 dense layer's step at batch 128, the 256-128 layer, a
  // product split by rows (one 64-column panel), and matrix-vector products split in two.
  // The forward (few rows, long K) adds two halves of K before its epilogue: with bias,
  // activation and beta, and transposed operands.
  const Case cases[] = {{128, 256, 784},
                        {128, 256, 784, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {100, 300, 700, true, true, 1.0f, BiasAxis::Row, Activation::Tanh},
                        {128, 200, 1000, false, true, 0.5f, BiasAxis::Col, Activation::Gelu},
                        {784, 256, 128, true, false},
                        {128, 784, 256, false, true},
                        {128, 128, 256, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {600, 40, 256, false, false, 1.0f, BiasAxis::Row, Activation::None},
                        {1, 256, 784, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {1, 2100, 1000, true, true, 1.0f},
                        {1, 2100, 1000, false, false, 0.0f, BiasAxis::Row, Activation::Sigmoid},
                        {2000, 1, 1100, false, true},
                        // A^T packed by chunks of rows, tasks of 8 panels and a partial one.
                        {300, 520, 600, true, false, 1.0f, BiasAxis::Col, Activation::Relu},
                        // Plain A packed by chunks of rows in row tasks of 8 panels.
                        {400, 300, 530, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {400, 300, 530, false, true, 1.0f, BiasAxis::Row, Activation::None},
                        // Blocks of two chunks of rows run against groups of packed panels:
                        // on one thread two groups (32 panels, then 6 and a partial one), on
                        // two a grid of tasks 204 rows x 10 panels.
                        {400, 600, 300, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {400, 600, 300, true, true, 1.0f, BiasAxis::Row, Activation::None},
                        {430, 700, 200, true, false, 0.5f, BiasAxis::Col, Activation::Gelu},
                        {430, 700, 200, false, true},
                        // Split-K whose smaller half takes the longer K pass (AVX-512: 516 in
                        // 5 passes of 104, 508 in 4 of 127; AVX2: 258 in 2 of 129, 254 in 1).
                        {128, 512, 1024, false, false, 0.0f, BiasAxis::Col, Activation::Relu},
                        {128, 512, 512, false, false, 0.0f, BiasAxis::Col, Activation::Relu}};
  uint32_t seed = 500;
  for (const Case& c : cases) {
    check(gemm, one, c, seed++);
    check(gemm, two, c, seed++);
  }
}

TEST_CASE("gemm gives the same bits on one and two threads", "[gemm]") {
  // Each element of C is summed in the same order whichever thread computes its tile, so a
  // training run does not depend on the thread count.
  ThreadPool one(1), two(2);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{128, 256, 784}, {784, 256, 128}, {600, 40, 256}, {100, 300, 700}, {300, 520, 600}, {400, 300, 530},
                                                                    {400, 600, 300}})
    for (int t = 0; t < 4; ++t) {
      std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c1(static_cast<size_t>(m * n)),
          c2(c1.size());
      for (auto& v : a) v = u(rng);
      for (auto& v : b) v = u(rng);
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      GemmArgs g{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .a = a.data(), .lda = ta ? m : k,
                 .b = b.data(), .ldb = tb ? k : n, .c = c1.data(), .ldc = n};
      gemm(one, g);
      g.c = c2.data();
      gemm(two, g);
      INFO(m << "x" << n << "x" << k << " transposes " << t);
      REQUIRE(c1 == c2);
    }
}

// A kernel that declares gemm_workspace_floats() and passes it in GemmArgs::workspace makes
// the GEMM pack into that memory (which the memory plan holds) instead of per-thread buffers;
// the bits are the same either way. Shapes reach each path: one part, parts over columns and
// over row tasks, split-K, and GEMVs (strided x gathered, sums beside beta 1).
TEST_CASE("gemm packs into a declared workspace when given one, with the same bits", "[gemm][workspace]") {
  ThreadPool one(1), two(2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Shape3 {
    int64_t m, n, k;
    bool ta, tb;
    float beta;
  };
  const Shape3 shapes[] = {{20, 30, 40, false, false, 0.f},   {128, 256, 784, false, false, 0.f},
                           {8, 100, 300, false, false, 0.f},  {8, 100, 300, false, true, 0.f},
                           {784, 256, 128, true, false, 0.f}, {600, 40, 256, false, true, 1.f},
                           {128, 512, 600, false, false, 0.f}, {1, 300, 700, true, false, 0.f},
                           {300, 1, 700, false, false, 1.f}, {400, 600, 300, false, true, 1.f},
                           {430, 700, 200, false, false, 0.f},
                           {2000, 1, 1100, false, true, 1.f}, {1, 256, 784, false, false, 1.f},
                           {128, 512, 1024, false, false, 0.f}, {128, 512, 512, false, false, 0.f}};
  if (gemm_workspace_floats(GemmArgs{.m = 128, .n = 256, .k = 784, .lda = 784, .ldb = 256, .ldc = 256}, 2) == 0) {
    WARN("SKIPPED: this build's GEMM is CBLAS's (no AVX-512 here), which takes no workspace");
    return;
  }
  for (ThreadPool* pool : {&one, &two})
    for (const Shape3& sh : shapes) {
      INFO(sh.m << "x" << sh.n << "x" << sh.k << (sh.ta ? " A^T" : "") << (sh.tb ? " B^T" : "") << " beta "
                << sh.beta << ", " << pool->size() << " threads");
      std::vector<float> a(static_cast<size_t>(sh.m * sh.k)), b(static_cast<size_t>(sh.k * sh.n)),
          c0(static_cast<size_t>(sh.m * sh.n));
      for (auto& v : a) v = u(rng);
      for (auto& v : b) v = u(rng);
      for (auto& v : c0) v = u(rng);
      std::vector<float> c1 = c0, c2 = c0;
      GemmArgs g{.trans_a = sh.ta, .trans_b = sh.tb, .m = sh.m, .n = sh.n, .k = sh.k, .a = a.data(),
                 .lda = sh.ta ? sh.m : sh.k, .b = b.data(), .ldb = sh.tb ? sh.k : sh.n, .c = c1.data(),
                 .ldc = sh.n, .beta = sh.beta};
      gemm(*pool, g);
      const int64_t floats = gemm_workspace_floats(g, pool->size());
      if (floats == 0) {  // a GEMV writing its sums in place, or a few rows reading B in place
        CHECK((sh.m == 1 || sh.n == 1 || (!sh.tb && sh.m <= 12)));
        continue;
      }
      // 64-byte aligned, NaN-filled: what the GEMM writes there shows that it used it.
      std::vector<float> storage(static_cast<size_t>(floats + 16), nan);
      float* ws = storage.data();
      while (reinterpret_cast<uintptr_t>(ws) % 64 != 0) ++ws;
      g.c = c2.data();
      g.workspace = ws;
      g.workspace_floats = floats;
      gemm(*pool, g);
      CHECK(c1 == c2);
      int64_t written = 0;
      for (int64_t i = 0; i < floats; ++i) written += !std::isnan(ws[i]);
      CHECK(written > 0);
      // Nothing past the declared floats.
      CHECK(std::all_of(ws + floats, storage.data() + storage.size(), [](float v) { return std::isnan(v); }));
      // Too small a workspace (sized for another pool, say) is left alone.
      std::fill(storage.begin(), storage.end(), nan);
      g.workspace_floats = floats - 1;
      std::vector<float> c3 = c0;
      g.c = c3.data();
      gemm(*pool, g);
      CHECK(c1 == c3);
      CHECK(std::all_of(storage.begin(), storage.end(), [](float v) { return std::isnan(v); }));
    }
}

TEST_CASE("gemm_cblas (the fallback) matches float64 with the same epilogue", "[gemm]") {
  ThreadPool pool(2);
  uint32_t seed = 900;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{7, 13, 17}, {1, 256, 784}, {33, 1, 20}, {4, 5, 0}})
    for (int t = 0; t < 4; ++t)
      check(gemm_cblas, pool, Case{m, n, k, (t & 1) != 0, (t & 2) != 0, t == 2 ? 1.0f : 0.0f,
                                   t == 1 ? BiasAxis::Row : BiasAxis::Col, Activation::Tanh, 2},
            seed++);
}

}  // namespace
}  // namespace mls::cpu
