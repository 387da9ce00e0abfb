#include "engine/train/init.h"

#include <cmath>

#include "engine/train/rng.h"

namespace mls {

Result<void> initialise(Tensor& t, const ParamInit& init, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  auto fan_in = static_cast<double>(std::max<int64_t>(init.fan_in, 1));
  auto fan_out = static_cast<double>(std::max<int64_t>(init.fan_out, 1));
  auto uniform = [&](double bound) {
    for (float& x : v) x = static_cast<float>(rng.uniform(-bound, bound));
  };
  const std::string& s = init.scheme;
  if (s == "kaiming_uniform") {
    uniform(std::sqrt(6.0 / fan_in));
  } else if (s == "xavier_uniform") {
    uniform(std::sqrt(6.0 / (fan_in + fan_out)));
  } else if (s == "uniform_fan_in" || s.empty()) {
    uniform(1.0 / std::sqrt(fan_in));
  } else if (s == "normal") {  // Box-Muller
    for (size_t i = 0; i < v.size(); ++i) {
      double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
      v[i] = static_cast<float>(0.01 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
    }
  } else if (s == "zeros" || s == "ones") {
    std::fill(v.begin(), v.end(), s == "ones" ? 1.0f : 0.0f);
  } else {
    return make_error("unknown initialiser '" + s + "'");
  }
  t.fill_from_host(v);
  return {};
}

}  // namespace mls
