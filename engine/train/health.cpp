#include "engine/train/health.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/core/check.h"

namespace mls {

namespace {

double norm2(std::span<const float> v) {
  double sq = 0;
  for (float x : v) sq += static_cast<double>(x) * static_cast<double>(x);
  return std::sqrt(sq);
}

double diff_norm2(std::span<const float> a, std::span<const float> b) {
  double sq = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    sq += d * d;
  }
  return std::sqrt(sq);
}

// mean_gsnr's block: about this many bytes of gradients (2048 elements of a batch of 128,
// which measured twice as fast as whole rows and as 256 KiB blocks on a 1 MiB L2), at most
// kGsnrMaxBlock elements (the two accumulators of doubles stay in the cache).
constexpr size_t kGsnrBlockBytes = size_t{1} << 20;
constexpr size_t kGsnrMaxBlock = 8192;

const char* kind_of(float x) {
  return std::isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf";
}

}  // namespace

Histogram histogram(std::span<const float> values, int bins) {
  Histogram h;
  const int n = std::max(bins, 1);
  h.counts.assign(static_cast<size_t>(n), 0);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (float x : values) {
    if (!std::isfinite(x)) {
      ++h.non_finite;
      continue;
    }
    lo = std::min(lo, static_cast<double>(x));
    hi = std::max(hi, static_cast<double>(x));
  }
  if (lo > hi) return h;  // no finite value: min = max = 0, all counts 0
  h.min = lo;
  h.max = hi;
  const double width = hi - lo;
  for (float x : values) {
    if (!std::isfinite(x)) continue;
    int b = width > 0 ? static_cast<int>((static_cast<double>(x) - lo) / width * n) : 0;
    h.counts[static_cast<size_t>(std::clamp(b, 0, n - 1))]++;
  }
  return h;
}

ParamHealth param_health(std::string param, std::string label, std::span<const float> before,
                         std::span<const float> after, std::span<const float> grad,
                         std::span<const float> init, int bins) {
  MLS_CHECK(
      after.size() == before.size() && grad.size() == before.size() && init.size() == before.size(),
      "param_health: before, after, grad and init differ in size");
  ParamHealth h;
  h.param = std::move(param);
  h.label = std::move(label);
  h.grad_norm = norm2(grad);
  h.weight_norm = norm2(before);
  h.update_norm = diff_norm2(after, before);
  h.update_ratio = h.weight_norm > 0 ? h.update_norm / h.weight_norm : 0.0;
  h.distance_from_init = diff_norm2(after, init);
  h.weights = histogram(after, bins);
  h.grads = histogram(grad, bins);
  return h;
}

Result<double> mean_gsnr(const std::vector<std::vector<float>>& g) {
  const size_t n = g.size();
  if (n < 2)
    return make_error("gradient SNR: needs at least 2 per-sample gradients, got " +
                      std::to_string(n));
  const size_t d = g[0].size();
  if (d == 0) return make_error("gradient SNR: the per-sample gradients are empty");
  for (size_t s = 1; s < n; ++s)
    if (g[s].size() != d)
      return make_error("gradient SNR: sample " + std::to_string(s) + "'s gradient has " +
                        std::to_string(g[s].size()) + " elements, sample 0's has " +
                        std::to_string(d));
  // Two passes in double per element, the mean and then the squared deviations (no
  // cancellation), over a block of elements at a time so that the second pass reads the
  // block from the cache: the gradients (batch × parameters floats) are read from memory once.
  const size_t block = std::min(
      d, std::clamp<size_t>(kGsnrBlockBytes / (n * sizeof(float)) / 16 * 16, 16, kGsnrMaxBlock));
  std::vector<double> mean(block), sq(block);
  const double inv_n = 1.0 / static_cast<double>(n);
  double sum = 0;
  int64_t used = 0;
  for (size_t j0 = 0; j0 < d; j0 += block) {
    const size_t m = std::min(block, d - j0);
    std::fill(mean.begin(), mean.end(), 0.0);
    std::fill(sq.begin(), sq.end(), 0.0);
    for (const auto& gs : g) {
      const float* x = gs.data() + j0;
      for (size_t j = 0; j < m; ++j) mean[j] += x[j];
    }
    // Divided, not multiplied by 1/n: n equal values then have their value as the mean
    // exactly (n x / n rounds to x), so their deviations and variance are exactly 0.
    for (size_t j = 0; j < m; ++j) mean[j] /= static_cast<double>(n);
    for (const auto& gs : g) {
      const float* x = gs.data() + j0;
      for (size_t j = 0; j < m; ++j) {
        const double dev = static_cast<double>(x[j]) - mean[j];
        sq[j] += dev * dev;
      }
    }
    for (size_t j = 0; j < m; ++j) {
      // A sum of finite floats in double stays finite: a non-finite mean means a non-finite
      // gradient element; name the first sample that has one.
      if (!std::isfinite(mean[j]))
        for (size_t s = 0; s < n; ++s)
          if (!std::isfinite(g[s][j0 + j]))
            return make_error("gradient SNR: sample " + std::to_string(s) + "'s gradient element " +
                              std::to_string(j0 + j) + " is " + kind_of(g[s][j0 + j]));
      if (sq[j] == 0) continue;          // no variance across the samples: left out
      const double var = sq[j] * inv_n;  // population variance, as Cockpit
      sum += mean[j] * mean[j] / var;
      ++used;
    }
  }
  if (used == 0)
    return make_error("gradient SNR: no gradient element varies across the " + std::to_string(n) +
                      " samples (all per-sample gradients are equal)");
  return sum / static_cast<double>(used);
}

}  // namespace mls
