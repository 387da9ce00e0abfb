#include "datasets/image_classification.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "tests/datasets/fixtures.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::HostBatch;
using mls::Result;
using namespace mls::data;
using namespace mls::data::test;

namespace {

// 2x2 images that carry their own index: pixel 0 = low byte, pixel 1 = high byte, so a batch
// can be traced back to samples without access to the source's internals.
std::shared_ptr<const LabeledImages> indexed_images(int64_t count) {
  auto li = std::make_shared<LabeledImages>();
  li->count = count;
  li->rows = 2;
  li->cols = 2;
  for (int64_t i = 0; i < count; ++i) {
    li->pixels.push_back(static_cast<uint8_t>(i & 0xff));
    li->pixels.push_back(static_cast<uint8_t>(i >> 8));
    li->pixels.push_back(128);
    li->pixels.push_back(255);
    li->labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return li;
}

// With mean 0 and stddev 1, x = p / 255, so the byte is recovered exactly by rounding.
int64_t sample_index(const HostBatch& b, int64_t row) {
  const float* x = b.x.data() + row * 4;
  return std::lround(x[0] * 255.0f) + 256 * std::lround(x[1] * 255.0f);
}

std::vector<int64_t> epoch_order(ImageClassificationSource& src, int64_t epoch,
                                 int64_t batch = 64) {
  std::vector<int64_t> order;
  HostBatch b;
  src.start_epoch(epoch);
  while (src.next(batch, b))
    for (int64_t r = 0; r < b.size; ++r) order.push_back(sample_index(b, r));
  return order;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

ImageSourceOptions options(bool shuffle, uint64_t seed = 0, int64_t limit = 0) {
  ImageSourceOptions o;
  o.shuffle = shuffle;
  o.seed = seed;
  o.limit = limit;
  return o;
}

}  // namespace

TEST_CASE("an epoch covers every sample once and ends with a short batch", "[source]") {
  ImageClassificationSource src(indexed_images(1500), options(true, 7, 1000));
  REQUIRE(src.num_samples() == 1000);
  HostBatch b;
  for (int64_t epoch : {0, 1}) {
    src.start_epoch(epoch);
    std::vector<int> seen(1000, 0);
    std::vector<int64_t> sizes;
    while (src.next(128, b)) {
      sizes.push_back(b.size);
      REQUIRE(b.x.size() == static_cast<size_t>(b.size) * 4);
      REQUIRE(b.y.size() == static_cast<size_t>(b.size));
      for (int64_t r = 0; r < b.size; ++r) {
        const int64_t i = sample_index(b, r);
        REQUIRE(i >= 0);
        REQUIRE(i < 1000);  // the limit keeps the first 1000 samples only
        ++seen[static_cast<size_t>(i)];
        CHECK(b.y[static_cast<size_t>(r)] == i % 10);
      }
    }
    CHECK(sizes == std::vector<int64_t>{128, 128, 128, 128, 128, 128, 128, 104});
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    CHECK_FALSE(src.next(128, b));  // stays exhausted
    CHECK(b.size == 0);
  }
}

TEST_CASE("the shuffle is reproducible from (seed, epoch)", "[source]") {
  auto images = indexed_images(500);
  ImageClassificationSource a(images, options(true, 42));
  ImageClassificationSource b(images, options(true, 42));
  ImageClassificationSource c(images, options(true, 43));

  const std::vector<int64_t> a3 = epoch_order(a, 3);
  CHECK(a3 == epoch_order(b, 3));
  CHECK(a3 == epoch_order(a, 3));  // restarting an epoch replays it
  CHECK(a3 != iota(500));
  CHECK(a3 != epoch_order(a, 4));
  CHECK(a3 != epoch_order(c, 3));
  // Batch size does not change the order.
  CHECK(epoch_order(a, 3, 7) == a3);
}

TEST_CASE("the shuffle matches an independent implementation of the spec", "[source]") {
  // Reference from a 20-line python3 transcription of the documented algorithm: splitmix64
  // seeded with mix(mix(seed) + epoch), unbiased draws by rejection, Fisher-Yates from the
  // end. Any platform or refactoring that changes these breaks saved experiments' replay.
  ImageClassificationSource src(indexed_images(10), options(true, 42));
  CHECK(epoch_order(src, 0) == std::vector<int64_t>{2, 8, 9, 7, 1, 4, 6, 0, 5, 3});
  CHECK(epoch_order(src, 1) == std::vector<int64_t>{3, 1, 6, 8, 4, 5, 9, 7, 2, 0});
  ImageClassificationSource seed0(indexed_images(10), options(true, 0));
  CHECK(epoch_order(seed0, 0) == std::vector<int64_t>{6, 3, 2, 9, 8, 1, 4, 7, 0, 5});
}

TEST_CASE("without shuffling the order is the file order", "[source]") {
  ImageClassificationSource src(indexed_images(300), options(false, 42));
  CHECK(epoch_order(src, 0, 32) == iota(300));
  CHECK(epoch_order(src, 5, 32) == iota(300));
}

TEST_CASE("next works before the first start_epoch, as epoch 0", "[source]") {
  ImageClassificationSource fresh(indexed_images(50), options(true, 9));
  std::vector<int64_t> order;
  HostBatch b;
  while (fresh.next(16, b))
    for (int64_t r = 0; r < b.size; ++r) order.push_back(sample_index(b, r));
  ImageClassificationSource other(indexed_images(50), options(true, 9));
  CHECK(order == epoch_order(other, 0));
}

TEST_CASE("pixels are normalised as (p / 255 - mean) / stddev", "[source]") {
  ImageSourceOptions o = options(false);
  o.mean = 0.5f;
  o.stddev = 0.5f;
  ImageClassificationSource src(indexed_images(1), o);
  HostBatch b;
  REQUIRE(src.next(1, b));
  CHECK(b.x[0] == -1.0f);  // p = 0
  CHECK(b.x[3] == 1.0f);   // p = 255
  CHECK(b.x[2] == (128.0f / 255.0f - 0.5f) / 0.5f);
  // 128/255 - 0.5 cancels, so float carries ~1e-8 absolute error here.
  CHECK(b.x[2] == Approx((128.0 / 255.0 - 0.5) / 0.5).margin(1e-7));
}

TEST_CASE("a warm loop reuses the batch buffers", "[source]") {
  ImageClassificationSource src(indexed_images(1000), options(true, 1));
  HostBatch b;
  REQUIRE(src.next(128, b));
  const float* x = b.x.data();
  const int64_t* y = b.y.data();
  for (int64_t epoch : {1, 2}) {
    src.start_epoch(epoch);
    while (src.next(128, b)) {
      CHECK(b.x.data() == x);
      CHECK(b.y.data() == y);
    }
  }
}

TEST_CASE("shape, classes and limits", "[source]") {
  auto images = indexed_images(20);
  ImageClassificationSource all(images, options(true));
  CHECK(all.num_samples() == 20);
  CHECK(all.sample_shape() == mls::Shape{1, 2, 2});
  CHECK(all.num_classes() == 10);
  CHECK(ImageClassificationSource(images, options(true, 0, 5)).num_samples() == 5);
  CHECK(ImageClassificationSource(images, options(true, 0, 99)).num_samples() == 20);
  // A subset view shares the pixels rather than copying them.
  ImageClassificationSource subset(all.images(), options(false, 0, 3));
  CHECK(subset.images().get() == images.get());
  CHECK(epoch_order(subset, 0) == iota(3));
}

TEST_CASE("open_fashion_mnist on the real files", "[source][real]") {
  fashion_split("train");  // fails with setup instructions when the dataset is missing
  ImageSourceOptions o = options(false);
  o.mean = kFashionMnistMean;
  o.stddev = kFashionMnistStd;
  auto src = open_fashion_mnist(kFashionMnistDir, "train", o);
  INFO((src ? std::string() : src.error().message));
  REQUIRE(src.ok());
  ImageClassificationSource& s = **src;
  CHECK(s.num_samples() == 60000);
  CHECK(s.sample_shape() == mls::Shape{1, 28, 28});

  HostBatch b;
  REQUIRE(s.next(1, b));
  CHECK(b.y[0] == 9);
  // Pixel (14, 14) of the first image is 217 (see mnist_test.cpp for its provenance).
  CHECK(b.x[14 * 28 + 14] == (217.0f / 255.0f - 0.2860f) / 0.3530f);
  CHECK(b.x[14 * 28 + 14] == Approx((217.0 / 255.0 - 0.2860) / 0.3530).epsilon(1e-6));

  // Over a shuffled epoch the normalised pixels have mean ~0 and std ~1. The exact values
  // follow from the python3 pixel statistics (mean 0.28604060, std 0.35302424 in [0,1]
  // units): (0.28604060 - 0.2860) / 0.3530 and 0.35302424 / 0.3530.
  ImageSourceOptions shuffled = o;
  shuffled.shuffle = true;
  ImageClassificationSource train(s.images(), shuffled);
  double sum = 0, sum_sq = 0;
  std::array<int64_t, 10> hist{};
  train.start_epoch(0);
  while (train.next(1000, b)) {
    for (float v : b.x) {
      sum += v;
      sum_sq += static_cast<double>(v) * v;
    }
    for (int64_t y : b.y) ++hist[static_cast<size_t>(y)];
  }
  const double n = 60000.0 * 784;
  const double mean = sum / n;
  CHECK(mean == Approx(0.00011500).margin(1e-6));
  CHECK(std::sqrt(sum_sq / n - mean * mean) == Approx(1.0000687).margin(1e-5));
  for (int64_t h : hist) CHECK(h == 6000);
}

TEST_CASE("open_fashion_mnist explains a missing dataset", "[source]") {
  TempDir dir;
  const std::string missing = dir.file("fashion-mnist");
  auto src = open_fashion_mnist(missing, "train", {});
  const std::string msg = error_of(src);
  CHECK_THAT(msg, StartsWith(missing + ": dataset directory not found"));
  CHECK_THAT(msg, Contains("apt-get install dataset-fashion-mnist"));
}
