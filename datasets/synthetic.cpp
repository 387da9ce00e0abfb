#include "datasets/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/train/rng.h"

namespace mls::data {
namespace {

constexpr double kPi = std::numbers::pi;

// Box-Muller: the Rng is ours (portable), so the normal draws are too.
double gaussian(Rng& r) {
  const double u1 = 1.0 - r.uniform(), u2 = r.uniform();  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

}  // namespace

const std::vector<std::string>& synthetic_kinds() {
  static const std::vector<std::string> kinds{"spirals", "circles", "xor", "blobs", "sine"};
  return kinds;
}

Result<Dataset> make_synthetic(const SyntheticOptions& o) {
  const auto& kinds = synthetic_kinds();
  if (std::find(kinds.begin(), kinds.end(), o.kind) == kinds.end())
    return make_error("unknown synthetic dataset '" + o.kind + "'");
  if (o.samples < 1) return make_error("synthetic: samples must be >= 1");
  if (o.noise < 0) return make_error("synthetic: noise must be >= 0");
  if (o.kind == "blobs" && (o.classes < 2 || o.classes > 1000))
    return make_error("synthetic: blobs need 2..1000 classes");

  Rng r(o.seed);
  Dataset d;
  d.count = o.samples;
  const size_t n = static_cast<size_t>(o.samples);
  if (o.kind == "sine") {
    d.sample_shape = {1};
    d.target_kind = TargetKind::Values;
    d.target_shape = {1};
    for (size_t i = 0; i < n; ++i) {
      const double x = r.uniform(-kPi, kPi);
      d.floats.push_back(static_cast<float>(x));
      d.targets.push_back(static_cast<float>(std::sin(x) + o.noise * gaussian(r)));
    }
    return d;
  }

  d.sample_shape = {2};
  d.num_classes = o.kind == "blobs" ? o.classes : 2;
  for (int64_t c = 0; c < d.num_classes; ++c) d.class_names.push_back(std::to_string(c));
  for (size_t i = 0; i < n; ++i) {
    const int64_t label = static_cast<int64_t>(i) % d.num_classes;
    double x = 0, y = 0;
    if (o.kind == "spirals") {
      // Two interleaved arms of 1.75 turns; arm 1 is arm 0 turned by half a circle.
      const double t = std::sqrt(r.uniform());
      const double angle = t * 1.75 * 2 * kPi + static_cast<double>(label) * kPi;
      x = t * std::cos(angle);
      y = t * std::sin(angle);
    } else if (o.kind == "circles") {
      // Class 0 on the outer circle (radius 1), class 1 on the inner one (radius 0.5).
      const double angle = r.uniform(0, 2 * kPi), radius = label == 0 ? 1.0 : 0.5;
      x = radius * std::cos(angle);
      y = radius * std::sin(angle);
    } else if (o.kind == "xor") {
      // Class 1 where the signs differ; points kept off the axes so the classes separate.
      const double sx = r.uniform() < 0.5 ? -1 : 1;
      const double sy = label == 0 ? sx : -sx;
      x = sx * r.uniform(0.1, 1.0);
      y = sy * r.uniform(0.1, 1.0);
    } else {  // blobs: centres evenly on a circle of radius 1
      const double a = 2 * kPi * static_cast<double>(label) / static_cast<double>(d.num_classes);
      x = std::cos(a);
      y = std::sin(a);
    }
    x += o.noise * gaussian(r);
    y += o.noise * gaussian(r);
    d.floats.push_back(static_cast<float>(x));
    d.floats.push_back(static_cast<float>(y));
    d.labels.push_back(label);
  }
  check_dataset(d);
  return d;
}

}  // namespace mls::data
