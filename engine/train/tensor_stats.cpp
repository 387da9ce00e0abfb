#include "engine/train/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mls {

TensorStats tensor_stats(const std::vector<double>& v, const Shape& shape, int bins) {
  TensorStats s;
  s.shape = shape;
  s.count = static_cast<int64_t>(v.size());
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t finite = 0, zeros = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    if (!std::isfinite(x)) {
      if (s.non_finite++ == 0) s.first_non_finite = static_cast<int64_t>(i);
      ++(std::isnan(x) ? s.nan : x > 0 ? s.pos_inf : s.neg_inf);
      continue;
    }
    ++finite;
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    if (x == 0) ++zeros;
  }
  if (finite == 0) return s;
  s.mean = sum / static_cast<double>(finite);
  double sq = 0;
  for (double x : v)
    if (std::isfinite(x)) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(finite));
  s.min = lo;
  s.max = hi;
  s.zero_fraction = static_cast<double>(zeros) / static_cast<double>(finite);
  const int n = hi > lo ? std::max(bins, 1) : 1;
  s.histogram.assign(static_cast<size_t>(n), 0);
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    int b = hi > lo ? static_cast<int>((x - lo) / (hi - lo) * n) : 0;
    s.histogram[static_cast<size_t>(std::clamp(b, 0, n - 1))]++;
  }
  return s;
}

TensorStats tensor_stats(const Tensor& t, int bins) {
  TensorStats s = tensor_stats(t.to_f64(), t.shape(), bins);
  s.dtype = t.dtype();
  return s;
}

}  // namespace mls
