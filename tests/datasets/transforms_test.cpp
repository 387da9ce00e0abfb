#include "datasets/transforms.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "datasets/shuffle.h"

using namespace mls::data;

namespace {

// A 4x4 image whose pixel (y, x) holds 4y + x + 1, so every output names its source.
std::vector<float> ramp(int64_t c = 1) {
  std::vector<float> v;
  for (int64_t k = 0; k < c; ++k)
    for (int i = 0; i < 16; ++i) v.push_back(static_cast<float>(i + 1 + 100 * k));
  return v;
}

}  // namespace

TEST_CASE("rotating by 90 degrees equals numpy's rot90", "[transforms]") {
  const std::vector<float> src = ramp(2);
  std::vector<float> dst(32, -1.0f);
  rotate_bilinear(src.data(), dst.data(), {2, 4, 4}, 90);
  // np.rot90(np.arange(1, 17).reshape(4, 4)): out[i][j] = a[j][3 - i].
  const std::vector<float> rot90{4, 8, 12, 16, 3, 7, 11, 15, 2, 6, 10, 14, 1, 5, 9, 13};
  for (size_t k = 0; k < 16; ++k) {
    CHECK(dst[k] == Approx(rot90[k]).margin(1e-5));
    CHECK(dst[16 + k] == Approx(rot90[k] + 100).margin(1e-5));
  }
  std::vector<float> back(32);
  rotate_bilinear(dst.data(), back.data(), {2, 4, 4}, -90);
  for (size_t k = 0; k < 32; ++k) CHECK(back[k] == Approx(src[k]).margin(1e-5));
}

TEST_CASE("a small rotation interpolates and fills uncovered corners with zero", "[transforms]") {
  std::vector<float> ones(25, 1.0f), dst(25);
  rotate_bilinear(ones.data(), dst.data(), {1, 5, 5}, 45);
  CHECK(dst[12] == Approx(1.0f));  // the centre stays
  // Output (y, x) comes from source x = 2 + (x-2) cos - (y-2) sin, y = 2 + (x-2) sin + (y-2) cos.
  // (0, 2) -> (3.414, 0.586): inside, so bilinear of ones is 1.
  CHECK(dst[2] == Approx(1.0f));
  // (0, 0) -> (2, 2 - 2 sqrt 2): 0.828 of the way into the zero row above the image.
  CHECK(dst[0] == Approx(3 - 2 * std::sqrt(2.0)));
  // (0, 1) -> (2.707, 2 - 3 / sqrt 2): 0.121 into it.
  CHECK(dst[1] == Approx(3 - 3 / std::sqrt(2.0)));
  // (4, 4) -> (2, 2 + 2 sqrt 2) = (2, 4.83): beyond the last row by 0.83.
  CHECK(dst[24] == Approx(3 - 2 * std::sqrt(2.0)));
}

TEST_CASE("crop with padding shifts and zero-fills", "[transforms]") {
  const std::vector<float> src = ramp();
  std::vector<float> dst(16);
  crop_with_padding(src.data(), dst.data(), {1, 4, 4}, 2, 2, 2);  // the centred crop
  CHECK(dst == src);
  crop_with_padding(src.data(), dst.data(), {1, 4, 4}, 2, 0, 3);  // up 2 rows, right 1 column
  const std::vector<float> expected{0, 0, 0, 0,                   //
                                    0, 0, 0, 0,                   //
                                    2, 3, 4, 0,                   //
                                    6, 7, 8, 0};
  CHECK(dst == expected);
}

TEST_CASE("horizontal flip mirrors each row of each channel", "[transforms]") {
  const std::vector<float> src = ramp(2);
  std::vector<float> dst(32);
  flip_horizontal(src.data(), dst.data(), {2, 4, 4});
  CHECK(std::vector<float>(dst.begin(), dst.begin() + 4) == std::vector<float>{4, 3, 2, 1});
  CHECK(std::vector<float>(dst.begin() + 28, dst.end()) == std::vector<float>{116, 115, 114, 113});
}

TEST_CASE("augment_sample is reproducible from its stream and a flip with p = 1 always flips",
          "[transforms]") {
  std::vector<float> a = ramp(), b = ramp(), scratch(16);
  const std::vector<Augmentation> augs{{AugmentKind::RandomCrop, 1},
                                       {AugmentKind::Rotation, 4, 0.5, 30}};
  mls::Rng r1 = sample_rng(5, 2, 9), r2 = sample_rng(5, 2, 9);
  augment_sample(augs, r1, {1, 4, 4}, a.data(), scratch.data());
  augment_sample(augs, r2, {1, 4, 4}, b.data(), scratch.data());
  CHECK(a == b);
  CHECK(a != ramp());

  std::vector<float> f = ramp(), mirrored(16);
  flip_horizontal(ramp().data(), mirrored.data(), {1, 4, 4});
  mls::Rng r3(1);
  augment_sample({{AugmentKind::HorizontalFlip, 4, 1.0}}, r3, {1, 4, 4}, f.data(), scratch.data());
  CHECK(f == mirrored);
}

TEST_CASE("fit_normalization computes per-channel statistics in raw units", "[transforms]") {
  Dataset d;
  d.count = 2;
  d.sample_shape = {2, 1, 2};
  d.bytes = {0,   255, 51, 51,  //
             255, 0,   51, 51};
  d.labels = {0, 0};
  d.num_classes = 1;
  Normalization n = fit_normalization(d, {0, 1});
  REQUIRE(n.mean.size() == 2);
  CHECK(n.mean[0] == Approx(0.5));
  CHECK(n.stddev[0] == Approx(0.5));
  CHECK(n.mean[1] == Approx(0.2));
  CHECK(n.stddev[1] == 1.0f);  // constant channel: scale 1, not inf

  Dataset f;
  f.count = 3;
  f.sample_shape = {2};  // flat samples: each feature its own channel
  f.floats = {1, 10, 2, 20, 3, 30};
  f.labels = {0, 0, 0};
  f.num_classes = 1;
  n = fit_normalization(f, {0, 1, 2});
  CHECK(n.mean == std::vector<float>{2, 20});
  CHECK(n.stddev[0] == Approx(std::sqrt(2.0 / 3)));
  CHECK(n.stddev[1] == Approx(10 * std::sqrt(2.0 / 3)));
  n = fit_normalization(f, {2});  // only the training indices count
  CHECK(n.mean == std::vector<float>{3, 30});
}
