#include "engine/train/health.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/core/check.h"

namespace mls {

namespace {

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
  // One pass for the range, without branches (|x| <= FLT_MAX is false for NaN and infinities)
  // so that it vectorises; min and max of floats are exact in float.
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  int64_t non_finite = 0;
  for (float x : values) {
    const bool finite = std::fabs(x) <= std::numeric_limits<float>::max();
    non_finite += !finite;
    lo = finite ? std::min(lo, x) : lo;
    hi = finite ? std::max(hi, x) : hi;
  }
  h.non_finite = non_finite;
  if (lo > hi) return h;  // no finite value: min = max = 0, all counts 0
  h.min = lo;
  h.max = hi;
  if (!(hi > lo)) {  // all finite values equal: bin 0
    h.counts[0] = static_cast<int64_t>(values.size()) - non_finite;
    return h;
  }
  const double base = lo, scale = n / (static_cast<double>(hi) - base);
  int64_t* counts = h.counts.data();
  auto put = [&](float x) {
    const int b = static_cast<int>((static_cast<double>(x) - base) * scale);
    counts[std::min(b, n - 1)]++;  // b >= 0: x >= lo
  };
  if (non_finite == 0)
    for (float x : values) put(x);
  else
    for (float x : values)
      if (std::fabs(x) <= std::numeric_limits<float>::max()) put(x);
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
  // The four sums of squares in one pass over the four arrays.
  double g2 = 0, w2 = 0, u2 = 0, d2 = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    const double b = before[i], a = after[i], g = grad[i], z = init[i];
    g2 += g * g;
    w2 += b * b;
    u2 += (a - b) * (a - b);
    d2 += (a - z) * (a - z);
  }
  h.grad_norm = std::sqrt(g2);
  h.weight_norm = std::sqrt(w2);
  h.update_norm = std::sqrt(u2);
  h.update_ratio = h.weight_norm > 0 ? h.update_norm / h.weight_norm : 0.0;
  h.distance_from_init = std::sqrt(d2);
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
