#include "datasets/in_memory_source.h"

#include <catch2/catch.hpp>
#include <numeric>

#include "datasets/image_classification.h"
#include "datasets/shuffle.h"
#include "tests/datasets/fixtures.h"

using mls::HostBatch;
using mls::Shape;
using mls::TargetKind;
using namespace mls::data;
using namespace mls::data::test;

namespace {

// count samples of 3 floats each, carrying their own index in feature 0; label i % 3.
std::shared_ptr<const Dataset> indexed_floats(int64_t count) {
  auto d = std::make_shared<Dataset>();
  d->count = count;
  d->sample_shape = {3};
  d->num_classes = 3;
  for (int64_t i = 0; i < count; ++i) {
    d->floats.insert(d->floats.end(), {static_cast<float>(i), 10.0f, -2.0f});
    d->labels.push_back(i % 3);
  }
  return d;
}

std::vector<int64_t> order_of(InMemorySource& s, int64_t epoch, int64_t batch) {
  std::vector<int64_t> out;
  HostBatch b;
  s.start_epoch(epoch);
  while (s.next(batch, b))
    for (int64_t r = 0; r < b.size; ++r)
      out.push_back(static_cast<int64_t>(b.x[static_cast<size_t>(r * 3)]));
  return out;
}

SourceOptions shuffled(uint64_t seed) {
  SourceOptions o;
  o.shuffle = true;
  o.seed = seed;
  return o;
}

}  // namespace

TEST_CASE("an in-memory source visits its subset once per epoch, in (seed, epoch) order",
          "[memory]") {
  auto data = indexed_floats(100);
  const std::vector<int64_t> subset{5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41};
  InMemorySource src(data, subset, shuffled(42));
  CHECK(src.num_samples() == 11);

  const std::vector<int64_t> e0 = order_of(src, 0, 4);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == subset);
  CHECK(e0 != subset);
  CHECK(order_of(src, 0, 3) == e0);  // batch size does not change the order
  CHECK(order_of(src, 1, 4) != e0);

  // The order is the documented Fisher-Yates over the subset's positions.
  std::vector<int64_t> positions;
  shuffled_order(11, 42, 0, positions);
  std::vector<int64_t> expected;
  for (int64_t p : positions) expected.push_back(subset[static_cast<size_t>(p)]);
  CHECK(e0 == expected);

  InMemorySource plain(data, subset, {});
  CHECK(order_of(plain, 3, 5) == subset);
}

TEST_CASE("an in-memory source ends an epoch with a short batch and stays exhausted", "[memory]") {
  InMemorySource src(indexed_floats(10), {});
  HostBatch b;
  std::vector<int64_t> sizes;
  while (src.next(4, b)) sizes.push_back(b.size);
  CHECK(sizes == std::vector<int64_t>{4, 4, 2});
  CHECK_FALSE(src.next(4, b));
  CHECK(b.size == 0);
}

TEST_CASE("the shuffle matches the Fashion-MNIST source it replaces, bit for bit",
          "[memory][real]") {
  // The app's `make run` numbers depend on this: same order, same floats.
  const LabeledImages& train = fashion_split("train");
  auto images = std::make_shared<const LabeledImages>(train);
  ImageSourceOptions old_o;
  old_o.seed = 7;
  old_o.mean = kFashionMnistMean;
  old_o.stddev = kFashionMnistStd;
  old_o.limit = 3000;
  ImageClassificationSource old_src(images, old_o);

  auto d = std::make_shared<Dataset>();
  d->count = train.count;
  d->sample_shape = {1, 28, 28};
  d->bytes = train.pixels;
  d->labels.assign(train.labels.begin(), train.labels.end());
  d->num_classes = 10;
  std::vector<int64_t> first(3000);
  std::iota(first.begin(), first.end(), int64_t{0});
  SourceOptions o = shuffled(7);
  o.normalization = {{kFashionMnistMean}, {kFashionMnistStd}};
  InMemorySource new_src(d, first, o);

  HostBatch a, b;
  for (int64_t epoch : {0, 1, 2}) {
    old_src.start_epoch(epoch);
    new_src.start_epoch(epoch);
    int64_t batches = 0;
    while (old_src.next(128, a)) {
      REQUIRE(new_src.next(128, b));
      REQUIRE(a.size == b.size);
      REQUIRE(a.y == b.y);
      REQUIRE(a.x == b.x);  // exact float equality
      ++batches;
    }
    CHECK_FALSE(new_src.next(128, b));
    CHECK(batches == 24);
  }
}

TEST_CASE("bytes are normalised per channel", "[memory]") {
  auto d = std::make_shared<Dataset>();
  d->count = 1;
  d->sample_shape = {2, 1, 2};  // two channels of two pixels
  d->bytes = {0, 255, 51, 102};
  d->labels = {0};
  d->num_classes = 1;
  SourceOptions o;
  o.normalization = {{0.5f, 0.2f}, {0.5f, 0.1f}};
  InMemorySource src(d, o);
  HostBatch b;
  REQUIRE(src.next(8, b));
  REQUIRE(b.x.size() == 4);
  CHECK(b.x[0] == Approx(-1.0));
  CHECK(b.x[1] == Approx(1.0));
  CHECK(b.x[2] == Approx((51 / 255.0 - 0.2) / 0.1));   // = 0
  CHECK(b.x[3] == Approx((102 / 255.0 - 0.2) / 0.1));  // = 2
}

TEST_CASE("one-hot targets put a 1 at the label and keep the labels", "[memory]") {
  SourceOptions o;
  o.one_hot = true;
  InMemorySource src(indexed_floats(4), o);
  CHECK(src.target_kind() == TargetKind::Values);
  CHECK(src.target_shape() == Shape{3});
  CHECK(src.num_classes() == 3);
  HostBatch b;
  REQUIRE(src.next(4, b));
  CHECK(b.t == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0});
  CHECK(b.y == std::vector<int64_t>{0, 1, 2, 0});
}

TEST_CASE("regression targets are copied per sample", "[memory]") {
  auto d = std::make_shared<Dataset>();
  d->count = 3;
  d->sample_shape = {1};
  d->floats = {0, 1, 2};
  d->target_kind = TargetKind::Values;
  d->target_shape = {2};
  d->targets = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f};
  InMemorySource src(d, {2, 0}, {});
  CHECK(src.num_classes() == 0);
  CHECK(src.target_shape() == Shape{2});
  HostBatch b;
  REQUIRE(src.next(10, b));
  CHECK(b.size == 2);
  CHECK(b.y.empty());
  CHECK(b.x == std::vector<float>{2, 0});
  CHECK(b.t == std::vector<float>{2.5f, -2.5f, 0.5f, -0.5f});
}

TEST_CASE("a warm in-memory loop reuses the batch buffers", "[memory]") {
  auto d = std::make_shared<Dataset>();
  d->count = 1000;
  d->sample_shape = {1, 4, 4};
  d->bytes.assign(16000, 9);
  d->labels.assign(1000, 1);
  d->num_classes = 2;
  SourceOptions o = shuffled(3);
  o.augmentations = {{AugmentKind::RandomCrop, 1}, {AugmentKind::HorizontalFlip}};
  o.one_hot = true;
  InMemorySource src(d, o);
  HostBatch b;
  REQUIRE(src.next(128, b));
  const float* x = b.x.data();
  const float* t = b.t.data();
  for (int64_t epoch : {1, 2}) {
    src.start_epoch(epoch);
    while (src.next(128, b)) {
      CHECK(b.x.data() == x);
      CHECK(b.t.data() == t);
    }
  }
}

TEST_CASE("augmentations depend on (seed, epoch, sample), not on the batching", "[memory]") {
  auto d = std::make_shared<Dataset>();
  d->count = 50;
  d->sample_shape = {1, 5, 5};
  for (int64_t i = 0; i < 50 * 25; ++i) d->bytes.push_back(static_cast<uint8_t>(i * 37));
  d->labels.assign(50, 0);
  d->num_classes = 1;
  SourceOptions o = shuffled(11);
  o.augmentations = {{AugmentKind::RandomCrop, 2}, {AugmentKind::Rotation, 4, 0.5, 15}};
  InMemorySource a(d, o), b(d, o);
  auto all = [](InMemorySource& s, int64_t epoch, int64_t batch) {
    std::vector<float> x;
    HostBatch hb;
    s.start_epoch(epoch);
    while (s.next(batch, hb)) x.insert(x.end(), hb.x.begin(), hb.x.end());
    return x;
  };
  const std::vector<float> e1 = all(a, 1, 7);
  CHECK(e1 == all(b, 1, 50));
  CHECK(e1 != all(a, 2, 7));
  SourceOptions plain = o;
  plain.augmentations.clear();
  InMemorySource c(d, plain);
  CHECK(e1 != all(c, 1, 7));  // the augmentations did change something
}
