// batch_norm_train's CPU kernel at the residual CNN's shapes (resources/examples/
// fashion-mnist-resnet.mls) against float64: its one-pass (shifted) statistics must hold
// where the mean dwarfs the spread, and rows of 196 and 49 floats exercise the vector loop
// and its tail. The registry walk (op_conformance.cpp) covers the small samples.
#include <cmath>

#include "engine/exec/eager.h"
#include "engine/ops/nn.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

void check_batch_norm(const Shape& shape, double offset, double spread, uint64_t seed) {
  Rng r(seed);
  const int64_t n = shape[0], ch = shape[1], s = numel(shape) / (n * ch);
  std::vector<double> x(static_cast<size_t>(numel(shape))), gamma(static_cast<size_t>(ch)),
      beta(static_cast<size_t>(ch));
  for (double& v : x) v = static_cast<float>(offset + spread * r.uniform(-1, 1));
  for (int64_t c = 0; c < ch; ++c) {
    gamma[static_cast<size_t>(c)] = static_cast<float>(r.uniform(0.5, 2));
    beta[static_cast<size_t>(c)] = static_cast<float>(r.uniform(-1, 1));
  }
  EagerSession es(host());
  BatchNormOut bn = batch_norm_train(es, es.leaf(to_tensor(RefArray{shape, x}, DType::F32)),
                                     es.leaf(to_tensor(RefArray{{ch}, gamma}, DType::F32)),
                                     es.leaf(to_tensor(RefArray{{ch}, beta}, DType::F32)));
  const std::vector<double> y = es.value(bn.y).to_f64(), mean = es.value(bn.mean).to_f64(),
                            var = es.value(bn.var).to_f64();
  const auto at = [&](int64_t i, int64_t c, int64_t j) {
    return static_cast<size_t>((i * ch + c) * s + j);
  };
  const auto m = static_cast<double>(n * s);
  for (int64_t c = 0; c < ch; ++c) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sum += x[at(i, c, j)];
    const double mu = sum / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sq += (x[at(i, c, j)] - mu) * (x[at(i, c, j)] - mu);
    const double v = sq / m, rstd = 1 / std::sqrt(v + kNormEps);
    const auto cu = static_cast<size_t>(c);
    CHECK(std::abs(mean[cu] - mu) <= 1e-6 * std::abs(mu) + 1e-7);
    CHECK(std::abs(var[cu] - v) <= 1e-4 * v);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const double want = gamma[cu] * (x[at(i, c, j)] - mu) * rstd + beta[cu];
        worst = std::max(worst, std::abs(y[at(i, c, j)] - want));
      }
    // f32 rounding of x - mean where |mean| / spread is large: scaled by gamma rstd.
    CHECK(worst <= 1e-5 + 4e-7 * std::abs(offset) * gamma[cu] * rstd);
  }
}

}  // namespace

TEST_CASE("batch_norm_train kernel: one-pass statistics at the residual CNN's shapes",
          "[norm][batch_norm]") {
  check_batch_norm({8, 16, 14, 14}, 0.0, 1.0, 1);    // rows of 196: 12 vectors + a tail of 4
  check_batch_norm({6, 32, 7, 7}, 0.5, 2.0, 2);      // rows of 49
  check_batch_norm({4, 16, 28, 28}, 0.0, 3.0, 3);    // the stem: rows of 784
  check_batch_norm({5, 3, 9, 11}, 1000.0, 0.01, 4);  // mean 1e5 times the spread
}
