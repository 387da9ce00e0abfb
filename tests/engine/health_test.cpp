// The health instruments' arithmetic (engine/train/health.h) against float64 references
// computed another way here: hand-computed small cases, bins found by walking the edges,
// norms summed in long double, the gradient SNR against Welford's one-pass variance.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "engine/train/health.h"

using namespace mls;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t total(const Histogram& h) {
  int64_t n = 0;
  for (int64_t c : h.counts) n += c;
  return n;
}

// The bin of x by walking the edges lo + k (hi - lo) / n (the last bin closed on the right).
int bin_by_edges(double x, double lo, double hi, int n) {
  for (int k = 1; k < n; ++k)
    if (x < lo + (hi - lo) * k / n) return k - 1;
  return n - 1;
}

long double norm_ld(const std::vector<float>& v) {
  long double s = 0;
  for (float x : v) s += static_cast<long double>(x) * x;
  return std::sqrt(s);
}

// Welford's one-pass mean and population variance per element, then the mean of mean^2/var
// over the elements that vary.
double gsnr_welford(const std::vector<std::vector<float>>& g) {
  const size_t d = g[0].size();
  double sum = 0;
  int used = 0;
  for (size_t j = 0; j < d; ++j) {
    double mean = 0, m2 = 0;
    int64_t k = 0;
    for (const auto& s : g) {
      ++k;
      const double x = s[j], delta = x - mean;
      mean += delta / static_cast<double>(k);
      m2 += delta * (x - mean);
    }
    const double var = m2 / static_cast<double>(k);
    if (var == 0) continue;
    sum += mean * mean / var;
    ++used;
  }
  return sum / used;
}

}  // namespace

TEST_CASE("histogram: equal bins from min to max of the finite values, counts known",
          "[train][health]") {
  // 0..9 in 5 bins of width 1.8: two values a bin, 9 (= max) in the last one.
  Histogram h = histogram(std::vector<float>{9, 0, 1, 2, 3, 4, 5, 6, 7, 8}, 5);
  CHECK(h.min == 0);
  CHECK(h.max == 9);
  CHECK(h.counts == std::vector<int64_t>{2, 2, 2, 2, 2});
  CHECK(h.non_finite == 0);

  // Skewed: three at the bottom, one at the top.
  h = histogram(std::vector<float>{0, 0, 0, 10}, 2);
  CHECK(h.counts == std::vector<int64_t>{3, 1});

  // Negative range, the bin edge -1 belongs to the upper bin.
  h = histogram(std::vector<float>{-3, -2.5f, -1, 1}, 2);
  CHECK(h.min == -3);
  CHECK(h.max == 1);
  CHECK(h.counts == std::vector<int64_t>{2, 2});
}

TEST_CASE("histogram: NaN and infinities are counted aside and do not move min and max",
          "[train][health]") {
  Histogram h = histogram(std::vector<float>{kNaN, 1, -kInf, 3, kInf, 2, kNaN}, 4);
  CHECK(h.non_finite == 4);
  CHECK(h.min == 1);
  CHECK(h.max == 3);
  CHECK(h.counts == std::vector<int64_t>{1, 0, 1, 1});

  // Nothing finite: min = max = 0, every count 0, the bins still there.
  h = histogram(std::vector<float>{kNaN, kInf}, 3);
  CHECK(h.non_finite == 2);
  CHECK(h.min == 0);
  CHECK(h.max == 0);
  CHECK(h.counts == std::vector<int64_t>{0, 0, 0});

  // Empty input.
  h = histogram(std::vector<float>{}, 2);
  CHECK(h.counts == std::vector<int64_t>{0, 0});
  CHECK(h.non_finite == 0);
}

TEST_CASE("histogram: all values equal go in bin 0, and bins below 1 mean one bin", "[train][health]") {
  Histogram h = histogram(std::vector<float>{2.5f, 2.5f, 2.5f}, 4);
  CHECK(h.min == 2.5);
  CHECK(h.max == 2.5);
  CHECK(h.counts == std::vector<int64_t>{3, 0, 0, 0});

  h = histogram(std::vector<float>{1, 2, 3}, 0);
  CHECK(h.counts == std::vector<int64_t>{3});
}

TEST_CASE("histogram: random values land in the bins that walking the edges finds",
          "[train][health]") {
  std::mt19937 rng(29);
  std::normal_distribution<float> dist(0.5f, 3.0f);
  std::vector<float> v(5000);
  for (float& x : v) x = dist(rng);
  v[17] = kNaN;
  v[4000] = -kInf;
  const int n = 32;
  Histogram h = histogram(v, n);
  double lo = 1e300, hi = -1e300;
  for (float x : v)
    if (std::isfinite(x)) lo = std::min(lo, double(x)), hi = std::max(hi, double(x));
  std::vector<int64_t> want(n, 0);
  for (float x : v)
    if (std::isfinite(x)) want[static_cast<size_t>(bin_by_edges(x, lo, hi, n))]++;
  CHECK(h.min == lo);
  CHECK(h.max == hi);
  CHECK(h.non_finite == 2);
  CHECK(total(h) == 4998);
  CHECK(h.counts == want);
}

TEST_CASE("param_health: norms, update ratio and distance from init by hand", "[train][health]") {
  const std::vector<float> before = {3, 4}, after = {3.5f, 4}, grad = {6, -8}, init = {0, 1};
  ParamHealth h = param_health("fc1.weight", "fc1", before, after, grad, init, 2);
  CHECK(h.param == "fc1.weight");
  CHECK(h.label == "fc1");
  CHECK(h.grad_norm == 10.0);
  CHECK(h.weight_norm == 5.0);  // ||before||
  CHECK(h.update_norm == 0.5);
  CHECK(h.update_ratio == Approx(0.1).epsilon(1e-15));
  CHECK(h.distance_from_init == Approx(std::sqrt(3.5 * 3.5 + 9.0)).epsilon(1e-15));
  // Histograms: the weights after the update, the gradient.
  CHECK(h.weights.min == 3.5);
  CHECK(h.weights.max == 4.0);
  CHECK(h.weights.counts == std::vector<int64_t>{1, 1});
  CHECK(h.grads.min == -8.0);
  CHECK(h.grads.max == 6.0);
  CHECK(h.grads.counts == std::vector<int64_t>{1, 1});

  // A zero weight: the ratio is 0, not a division by zero.
  const std::vector<float> zero = {0, 0}, moved = {1, 0};
  h = param_health("b", "fc1", zero, moved, grad, zero, 4);
  CHECK(h.weight_norm == 0.0);
  CHECK(h.update_norm == 1.0);
  CHECK(h.update_ratio == 0.0);
  CHECK(h.distance_from_init == 1.0);
}

TEST_CASE("param_health: sums in double (squares of 1e30 overflow a float)", "[train][health]") {
  const std::vector<float> big = {1e30f, -1e30f}, none = {0, 0};
  ParamHealth h = param_health("w", "w", big, big, big, none, 8);
  const double want = std::sqrt(2.0) * static_cast<double>(1e30f);
  CHECK(std::isfinite(h.grad_norm));
  CHECK(h.grad_norm == Approx(want).epsilon(1e-15));
  CHECK(h.weight_norm == Approx(want).epsilon(1e-15));
  CHECK(h.update_norm == 0.0);
  CHECK(h.distance_from_init == Approx(want).epsilon(1e-15));
}

TEST_CASE("param_health: random tensors against long double norms", "[train][health]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t n = 20000;
  std::vector<float> before(n), after(n), grad(n), init(n), upd(n), dist_init(n);
  for (size_t i = 0; i < n; ++i) {
    before[i] = dist(rng);
    grad[i] = 1e-3f * dist(rng);
    after[i] = before[i] - 0.1f * grad[i];
    init[i] = dist(rng);
  }
  ParamHealth h = param_health("w", "w", before, after, grad, init, 16);
  long double u = 0, di = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double a = after[i], b = before[i], z = init[i];
    u += (a - b) * (a - b);
    di += (a - z) * (a - z);
  }
  CHECK(h.grad_norm == Approx(static_cast<double>(norm_ld(grad))).epsilon(1e-12));
  CHECK(h.weight_norm == Approx(static_cast<double>(norm_ld(before))).epsilon(1e-12));
  CHECK(h.update_norm == Approx(static_cast<double>(std::sqrt(u))).epsilon(1e-12));
  CHECK(h.update_ratio ==
        Approx(static_cast<double>(std::sqrt(u) / norm_ld(before))).epsilon(1e-12));
  CHECK(h.distance_from_init == Approx(static_cast<double>(std::sqrt(di))).epsilon(1e-12));
  CHECK(total(h.weights) == static_cast<int64_t>(n));
  CHECK(total(h.grads) == static_cast<int64_t>(n));
  CHECK(h.weights.counts.size() == 16);
}

TEST_CASE("param_health: a NaN gradient shows in the norm and in the histogram's non-finite",
          "[train][health]") {
  const std::vector<float> w = {1, 2, 3}, g = {0.5f, kNaN, 1};
  ParamHealth h = param_health("w", "w", w, w, g, w, 4);
  CHECK(std::isnan(h.grad_norm));
  CHECK(h.grads.non_finite == 1);
  CHECK(total(h.grads) == 2);
  CHECK(h.weight_norm == Approx(std::sqrt(14.0)).epsilon(1e-15));
  CHECK(h.update_norm == 0.0);
}

TEST_CASE("mean_gsnr: a known SNR from samples whose mean and variance are exact",
          "[train][health]") {
  // Four samples; per element m+d, m-d, m+d, m-d: mean m, population variance d^2, SNR m^2/d^2.
  //   element 0: m=3, d=1 -> 9;  element 1: m=1, d=2 -> 0.25;  element 2: m=0, d=1 -> 0;
  //   element 3: constant 5 -> variance 0, left out.
  const std::vector<std::vector<float>> g = {
      {4, 3, 1, 5}, {2, -1, -1, 5}, {4, 3, 1, 5}, {2, -1, -1, 5}};
  Result<double> r = mean_gsnr(g);
  REQUIRE(r.ok());
  CHECK(*r == Approx((9.0 + 0.25 + 0.0) / 3.0).epsilon(1e-15));
  // With the sample variance (n - 1) it would be 3/4 of that: the population one is used.
  CHECK(*r != Approx(0.75 * (9.25 / 3.0)).epsilon(1e-6));
}

TEST_CASE("mean_gsnr: two samples, and constant elements do not change the mean",
          "[train][health]") {
  // Two samples a, b: mean (a+b)/2, variance ((a-b)/2)^2, SNR ((a+b)/(a-b))^2.
  Result<double> r = mean_gsnr({{3, 1}, {1, 1}});  // element 0: (4/2)^2 = 4; element 1 constant
  REQUIRE(r.ok());
  CHECK(*r == Approx(4.0).epsilon(1e-15));
  Result<double> r2 = mean_gsnr({{3, 1, 0, 7, -2}, {1, 1, 0, 7, -2}});
  REQUIRE(r2.ok());
  CHECK(*r2 == Approx(4.0).epsilon(1e-15));
}

TEST_CASE("mean_gsnr: random per-sample gradients against Welford in double", "[train][health]") {
  std::mt19937 rng(2021);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> mu(-2.0f, 2.0f), sigma(0.05f, 3.0f);
  const size_t n = 9, d = 700;
  std::vector<float> means(d), sds(d);
  for (size_t j = 0; j < d; ++j) means[j] = mu(rng), sds[j] = sigma(rng);
  std::vector<std::vector<float>> g(n, std::vector<float>(d));
  for (auto& s : g)
    for (size_t j = 0; j < d; ++j) s[j] = means[j] + sds[j] * noise(rng);
  // Constant elements (dead units) are left out by both.
  for (auto& s : g) s[5] = 0.25f, s[600] = 0;
  Result<double> r = mean_gsnr(g);
  REQUIRE(r.ok());
  CHECK(*r == Approx(gsnr_welford(g)).epsilon(1e-12));
  CHECK(*r > 0);

  // A large offset with a small spread (E[g^2] - E[g]^2 would cancel badly in float).
  for (auto& s : g)
    for (size_t j = 0; j < d; ++j) s[j] = 1000.0f + 0.001f * noise(rng);
  r = mean_gsnr(g);
  REQUIRE(r.ok());
  CHECK(*r == Approx(gsnr_welford(g)).epsilon(1e-9));
  CHECK(*r > 1e10);  // (1000 / ~0.001)^2 ~ 1e12
}

TEST_CASE("mean_gsnr: equal per-sample gradients have no SNR (an error that says so)",
          "[train][health]") {
  Result<double> r = mean_gsnr({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("no gradient element varies") != std::string::npos);
  CHECK(r.error().message.find("3 samples") != std::string::npos);
}

TEST_CASE("mean_gsnr: many samples and elements (several blocks) against Welford",
          "[train][health]") {
  // 128 samples (a batch) of 5000 elements: the elements are taken in blocks, the last short.
  std::mt19937 rng(128);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const size_t n = 128, d = 5000;
  std::vector<std::vector<float>> g(n, std::vector<float>(d));
  for (auto& s : g)
    for (size_t j = 0; j < d; ++j) s[j] = 0.01f * static_cast<float>(j % 97) + noise(rng);
  for (auto& s : g) s[4999] = 3, s[2048] = -1;  // constant: left out
  Result<double> r = mean_gsnr(g);
  REQUIRE(r.ok());
  CHECK(*r == Approx(gsnr_welford(g)).epsilon(1e-12));

  // A NaN deep in a later block is found and named.
  g[77][4321] = kNaN;
  g[90][4400] = kInf;
  r = mean_gsnr(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("sample 77's gradient element 4321 is NaN") != std::string::npos);
}

TEST_CASE("mean_gsnr: copies of one random gradient have exactly no variance", "[train][health]") {
  // The mean of n equal floats must be that float exactly (or rounding would make a tiny
  // variance and an enormous SNR): 3, 7 and 100 copies of values like 0.1.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> one(3000);
  for (float& x : one) x = u(rng);
  for (size_t n : {3, 7, 100}) {
    Result<double> r = mean_gsnr(std::vector<std::vector<float>>(n, one));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("no gradient element varies") != std::string::npos);
  }
}

TEST_CASE("mean_gsnr: too few samples, sizes that differ and non-finite values are errors",
          "[train][health]") {
  Result<double> one = mean_gsnr({{1, 2}});
  REQUIRE_FALSE(one.ok());
  CHECK(one.error().message.find("at least 2 per-sample gradients, got 1") != std::string::npos);

  Result<double> none = mean_gsnr({});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("got 0") != std::string::npos);

  Result<double> empty = mean_gsnr({{}, {}});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message.find("empty") != std::string::npos);

  Result<double> ragged = mean_gsnr({{1, 2}, {1, 2}, {1}});
  REQUIRE_FALSE(ragged.ok());
  CHECK(ragged.error().message.find("sample 2's gradient has 1 elements") != std::string::npos);

  Result<double> nan = mean_gsnr({{1, 2}, {1, kNaN}});
  REQUIRE_FALSE(nan.ok());
  CHECK(nan.error().message.find("sample 1's gradient element 1 is NaN") != std::string::npos);

  Result<double> inf = mean_gsnr({{-kInf, 2}, {1, 3}});
  REQUIRE_FALSE(inf.ok());
  CHECK(inf.error().message.find("sample 0's gradient element 0 is -inf") != std::string::npos);
}
