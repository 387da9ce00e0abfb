#include "datasets/synthetic.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/datasets/fixtures.h"

using mls::Shape;
using mls::TargetKind;
using namespace mls::data;
using namespace mls::data::test;

namespace {

SyntheticOptions kind(const std::string& k, int64_t samples = 400, double noise = 0.0) {
  SyntheticOptions o;
  o.kind = k;
  o.samples = samples;
  o.noise = noise;
  o.seed = 5;
  return o;
}

}  // namespace

TEST_CASE("two spirals: 2 balanced classes, 2 features, reproducible from the seed",
          "[synthetic]") {
  auto d = make_synthetic(kind("spirals", 1001, 0.1));
  REQUIRE(d.ok());
  CHECK(d->sample_shape == Shape{2});
  CHECK(d->num_classes == 2);
  CHECK(d->count == 1001);
  int64_t ones = 0;
  for (int64_t l : d->labels) ones += l;
  CHECK(ones == 500);  // 501 of class 0, 500 of class 1

  auto again = make_synthetic(kind("spirals", 1001, 0.1));
  CHECK(again->floats == d->floats);
  SyntheticOptions other = kind("spirals", 1001, 0.1);
  other.seed = 6;
  CHECK(make_synthetic(other)->floats != d->floats);

  // Without noise, arm 1 is arm 0 turned by half a circle: radius t, angle differs by pi.
  auto clean = make_synthetic(kind("spirals", 200));
  for (size_t i = 0; i < 200; ++i) {
    const double x = clean->floats[2 * i], y = clean->floats[2 * i + 1];
    CHECK(std::hypot(x, y) <= 1.0 + 1e-6);
  }
}

TEST_CASE("circles, xor and blobs separate their classes as described", "[synthetic]") {
  auto c = make_synthetic(kind("circles"));
  REQUIRE(c.ok());
  for (size_t i = 0; i < 400; ++i) {
    const double r = std::hypot(c->floats[2 * i], c->floats[2 * i + 1]);
    CHECK(r == Approx(c->labels[i] == 0 ? 1.0 : 0.5).margin(1e-6));
  }
  auto x = make_synthetic(kind("xor"));
  REQUIRE(x.ok());
  for (size_t i = 0; i < 400; ++i) {
    const bool differ = (x->floats[2 * i] > 0) != (x->floats[2 * i + 1] > 0);
    CHECK(differ == (x->labels[i] == 1));
  }
  SyntheticOptions o = kind("blobs", 500);
  o.classes = 5;
  auto b = make_synthetic(o);
  REQUIRE(b.ok());
  CHECK(b->num_classes == 5);
  for (size_t i = 0; i < 500; ++i) {
    const double a = 2 * 3.14159265358979 * static_cast<double>(b->labels[i]) / 5;
    CHECK(b->floats[2 * i] == Approx(std::cos(a)).margin(1e-6));
  }
}

TEST_CASE("noisy sine is a 1-feature regression around sin(x)", "[synthetic]") {
  auto d = make_synthetic(kind("sine", 2000, 0.1));
  REQUIRE(d.ok());
  CHECK(d->target_kind == TargetKind::Values);
  CHECK(d->target_shape == Shape{1});
  CHECK(d->num_classes == 0);
  double sum = 0, sum_sq = 0;
  for (size_t i = 0; i < 2000; ++i) {
    const double e = d->targets[i] - std::sin(d->floats[i]);
    sum += e;
    sum_sq += e * e;
  }
  CHECK(sum / 2000 == Approx(0).margin(0.01));                   // 3 standard errors
  CHECK(std::sqrt(sum_sq / 2000) == Approx(0.1).epsilon(0.05));  // the noise level
}

TEST_CASE("synthetic options are checked", "[synthetic][errors]") {
  CHECK(error_of(make_synthetic(kind("moons"))) == "unknown synthetic dataset 'moons'");
  CHECK(error_of(make_synthetic(kind("xor", 0))) == "synthetic: samples must be >= 1");
}
