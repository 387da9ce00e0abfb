#include "datasets/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "engine/core/check.h"

namespace mls::data {

Normalization fit_normalization(const Dataset& d, const std::vector<int64_t>& indices) {
  const int64_t channels = channel_count(d.sample_shape);
  const int64_t per_channel = channels > 0 ? d.sample_numel() / channels : 0;
  // Two passes (mean, then squared deviations): the one-pass sum of squares leaves a
  // constant channel with a rounding-noise "std" of 1e-9 that would blow it up.
  auto for_each = [&](auto&& fn) {
    for (int64_t i : indices) {
      const size_t base = static_cast<size_t>(i * d.sample_numel());
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t k = 0; k < per_channel; ++k) {
          const size_t at = base + static_cast<size_t>(c * per_channel + k);
          fn(static_cast<size_t>(c), d.has_bytes() ? d.bytes[at] / 255.0 : double{d.floats[at]});
        }
    }
  };
  std::vector<double> mean(static_cast<size_t>(channels)), var(mean.size());
  const double count = static_cast<double>(indices.size()) * static_cast<double>(per_channel);
  for_each([&](size_t c, double v) { mean[c] += v; });
  for (double& m : mean) m = count > 0 ? m / count : 0.0;
  for_each([&](size_t c, double v) { var[c] += (v - mean[c]) * (v - mean[c]); });
  Normalization n;
  for (size_t c = 0; c < mean.size(); ++c) {
    const double sd = count > 0 ? std::sqrt(var[c] / count) : 0.0;
    n.mean.push_back(static_cast<float>(mean[c]));
    n.stddev.push_back(sd > 1e-12 ? static_cast<float>(sd) : 1.0f);  // constant: maps to 0
  }
  return n;
}

bool image_dims(const Shape& s, ImageDims& out) {
  if (s.size() == 3) {
    out = {s[0], s[1], s[2]};
    return true;
  }
  if (s.size() == 2) {
    out = {1, s[0], s[1]};
    return true;
  }
  return false;
}

void crop_with_padding(const float* src, float* dst, ImageDims d, int64_t padding, int64_t dy,
                       int64_t dx) {
  const int64_t oy = dy - padding, ox = dx - padding;  // source offset of dst(0, 0)
  for (int64_t c = 0; c < d.c; ++c)
    for (int64_t y = 0; y < d.h; ++y) {
      float* row = dst + (c * d.h + y) * d.w;
      const int64_t sy = y + oy;
      if (sy < 0 || sy >= d.h) {
        std::fill(row, row + d.w, 0.0f);
        continue;
      }
      const float* srow = src + (c * d.h + sy) * d.w;
      for (int64_t x = 0; x < d.w; ++x) {
        const int64_t sx = x + ox;
        row[x] = sx >= 0 && sx < d.w ? srow[sx] : 0.0f;
      }
    }
}

void flip_horizontal(const float* src, float* dst, ImageDims d) {
  for (int64_t r = 0; r < d.c * d.h; ++r)
    for (int64_t x = 0; x < d.w; ++x) dst[r * d.w + x] = src[r * d.w + (d.w - 1 - x)];
}

void rotate_bilinear(const float* src, float* dst, ImageDims d, double degrees) {
  const double a = degrees * std::numbers::pi / 180.0;
  double cs = std::cos(a), sn = std::sin(a);
  // cos(90°) is 6e-17 in double: snap, so quarter turns land exactly on pixel centres.
  if (std::abs(cs) < 1e-12) cs = 0;
  if (std::abs(sn) < 1e-12) sn = 0;
  const double cy = (static_cast<double>(d.h) - 1) / 2, cx = (static_cast<double>(d.w) - 1) / 2;
  auto at = [&](const float* plane, int64_t y, int64_t x) -> float {
    return y >= 0 && y < d.h && x >= 0 && x < d.w ? plane[y * d.w + x] : 0.0f;
  };
  for (int64_t y = 0; y < d.h; ++y)
    for (int64_t x = 0; x < d.w; ++x) {
      // The inverse map: where in the source this output pixel comes from.
      const double ddx = static_cast<double>(x) - cx, ddy = static_cast<double>(y) - cy;
      const double sx = cx + ddx * cs - ddy * sn;
      const double sy = cy + ddx * sn + ddy * cs;
      const double fx = std::floor(sx), fy = std::floor(sy);
      const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      const float wx = static_cast<float>(sx - fx), wy = static_cast<float>(sy - fy);
      for (int64_t c = 0; c < d.c; ++c) {
        const float* plane = src + c * d.h * d.w;
        const float top = at(plane, y0, x0) * (1 - wx) + at(plane, y0, x0 + 1) * wx;
        const float bottom = at(plane, y0 + 1, x0) * (1 - wx) + at(plane, y0 + 1, x0 + 1) * wx;
        dst[(c * d.h + y) * d.w + x] = top * (1 - wy) + bottom * wy;
      }
    }
}

void augment_sample(const std::vector<Augmentation>& augs, Rng& rng, ImageDims d, float* sample,
                    float* scratch) {
  const size_t bytes = static_cast<size_t>(d.numel()) * sizeof(float);
  for (const Augmentation& a : augs) {
    switch (a.kind) {
      case AugmentKind::RandomCrop: {
        MLS_CHECK(a.padding >= 0, "RandomCrop padding must be >= 0");
        const uint64_t span = static_cast<uint64_t>(2 * a.padding + 1);
        const int64_t dy = static_cast<int64_t>(rng.below(span));
        const int64_t dx = static_cast<int64_t>(rng.below(span));
        if (dy == a.padding && dx == a.padding) break;  // the centred crop is the identity
        crop_with_padding(sample, scratch, d, a.padding, dy, dx);
        std::memcpy(sample, scratch, bytes);
        break;
      }
      case AugmentKind::HorizontalFlip:
        if (rng.uniform() < a.p) {
          flip_horizontal(sample, scratch, d);
          std::memcpy(sample, scratch, bytes);
        }
        break;
      case AugmentKind::Rotation: {
        const double deg = rng.uniform(-a.degrees, a.degrees);
        rotate_bilinear(sample, scratch, d, deg);
        std::memcpy(sample, scratch, bytes);
        break;
      }
    }
  }
}

}  // namespace mls::data
