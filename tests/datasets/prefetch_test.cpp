#include "datasets/prefetch.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "datasets/in_memory_source.h"
#include "tests/common/deadline.h"

using mls::HostBatch;
using namespace mls::data;

namespace {

std::shared_ptr<const Dataset> small(int64_t count) {
  auto d = std::make_shared<Dataset>();
  d->count = count;
  d->sample_shape = {1, 3, 3};
  for (int64_t i = 0; i < count * 9; ++i) d->bytes.push_back(static_cast<uint8_t>(i * 13 + i / 9));
  for (int64_t i = 0; i < count; ++i) d->labels.push_back(i % 4);
  d->num_classes = 4;
  return d;
}

std::unique_ptr<InMemorySource> source(const std::shared_ptr<const Dataset>& d) {
  SourceOptions o;
  o.shuffle = true;
  o.seed = 99;
  o.normalization = {{0.3f}, {0.2f}};
  o.augmentations = {{AugmentKind::RandomCrop, 1}};
  return std::make_unique<InMemorySource>(d, o);
}

struct Seen {
  std::vector<int64_t> sizes, y;
  std::vector<float> x;
  bool operator==(const Seen&) const = default;
};

Seen epoch(mls::BatchSource& s, int64_t e, int64_t batch, int64_t stop_after = -1) {
  Seen out;
  HostBatch b;
  s.start_epoch(e);
  while ((stop_after < 0 || static_cast<int64_t>(out.sizes.size()) < stop_after) &&
         s.next(batch, b)) {
    out.sizes.push_back(b.size);
    out.y.insert(out.y.end(), b.y.begin(), b.y.end());
    out.x.insert(out.x.end(), b.x.begin(), b.x.end());
  }
  return out;
}

// Forwards to a source and counts the batches made from it (on the prefetch thread).
class Counting final : public mls::BatchSource {
 public:
  Counting(std::unique_ptr<mls::BatchSource> s, std::atomic<int64_t>& made)
      : s_(std::move(s)), made_(made) {}
  int64_t num_samples() const override { return s_->num_samples(); }
  mls::Shape sample_shape() const override { return s_->sample_shape(); }
  int64_t num_classes() const override { return s_->num_classes(); }
  void start_epoch(int64_t e) override { s_->start_epoch(e); }
  bool next(int64_t batch, HostBatch& out) override {
    const bool more = s_->next(batch, out);
    if (more) ++made_;
    return more;
  }

 private:
  std::unique_ptr<mls::BatchSource> s_;
  std::atomic<int64_t>& made_;
};

// Waits (up to 10 s) until at least `n` batches were made.
bool made_at_least(const std::atomic<int64_t>& made, int64_t n) {
  return mls::test::finishes_within(std::chrono::seconds(10), [&] {
    while (made.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
}

}  // namespace

TEST_CASE("a consumer that announces its pauses gets the same batches, made in its pauses",
          "[prefetch]") {
  auto d = small(1000);
  auto plain = source(d);
  std::atomic<int64_t> made{0};
  PrefetchSource pre(std::make_unique<Counting>(source(d), made), 2);
  const Seen want = epoch(*plain, 0, 50);
  Seen got;
  HostBatch b;
  pre.start_epoch(0);
  for (int64_t k = 1; pre.next(50, b); ++k) {
    got.sizes.push_back(b.size);
    got.y.insert(got.y.end(), b.y.begin(), b.y.end());
    got.x.insert(got.x.end(), b.x.begin(), b.x.end());
    if (k >= 2 && k + 1 < 20 && k % 3 == 0) {
      // Two buffers in the ring, ours held back since the pause before: the producer made one
      // batch ahead of us at that pause, and makes no more until the next one.
      REQUIRE(made_at_least(made, k + 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      CHECK(made.load() == k + 1);
      pre.between_steps();
      CHECK(made_at_least(made, k + 2));
    } else if (k % 5 != 4) {
      pre.between_steps();  // (and every fifth step no pause is announced: next() still gives)
    }
  }
  CHECK(got.sizes.size() == 20);
  CHECK(got == want);
  // The next epoch, with no pauses announced: whole, in order, no hang.
  REQUIRE(mls::test::finishes_within(std::chrono::seconds(20),
                                     [&] { CHECK(epoch(pre, 1, 50) == epoch(*plain, 1, 50)); }));
}

TEST_CASE("prefetching gives the same batches in the same order", "[prefetch]") {
  auto d = small(1000);
  auto plain = source(d);
  PrefetchSource pre(source(d), 2);
  CHECK(pre.num_samples() == 1000);
  CHECK(pre.sample_shape() == mls::Shape{1, 3, 3});
  for (int64_t e : {0, 1, 2}) {
    const Seen a = epoch(*plain, e, 64), b = epoch(pre, e, 64);
    CHECK(a.sizes.size() == 16);
    CHECK(a == b);
  }
}

TEST_CASE("prefetching survives start_epoch mid-epoch, batch size changes and early destruction",
          "[prefetch]") {
  auto d = small(500);
  auto plain = source(d);
  PrefetchSource pre(source(d), 3);
  epoch(pre, 0, 32, 2);  // abandon epoch 0 after two batches, with the producer ahead
  CHECK(epoch(pre, 1, 32) == epoch(*plain, 1, 32));

  // A different batch size half way: the samples still come in the epoch's order.
  HostBatch b;
  std::vector<int64_t> y_pre, y_plain;
  pre.start_epoch(4);
  plain->start_epoch(4);
  for (int64_t bs : {10, 10, 7, 100, 3}) {
    REQUIRE(pre.next(bs, b));
    y_pre.insert(y_pre.end(), b.y.begin(), b.y.end());
    REQUIRE(plain->next(bs, b));
    y_plain.insert(y_plain.end(), b.y.begin(), b.y.end());
  }
  CHECK(y_pre == y_plain);
  CHECK(y_pre.size() == 130);

  // Destroyed while its producer runs ahead: the destructor must stop the producer.
  bool got_batch = false;
  REQUIRE(mls::test::finishes_within(std::chrono::seconds(20), [d, &got_batch] {
    PrefetchSource dying(source(d), 4);
    HostBatch first;
    got_batch = dying.next(16, first);
  }));
  CHECK(got_batch);
}

TEST_CASE("a prefetched epoch ends cleanly and reuses buffers", "[prefetch]") {
  PrefetchSource pre(source(small(100)), 2);
  HostBatch b;
  int64_t total = 0, after_end = 0, second = 0;
  bool more = true;
  // A consumer that waited forever at the end of an epoch would hang here: bounded.
  REQUIRE(mls::test::finishes_within(std::chrono::seconds(20), [&] {
    while (pre.next(30, b)) total += b.size;
    more = pre.next(30, b);
    after_end = b.size;
    pre.start_epoch(1);
    while (pre.next(30, b)) second += b.size;
  }));
  CHECK(total == 100);
  CHECK_FALSE(more);
  CHECK(after_end == 0);
  CHECK(second == 100);
}

TEST_CASE("sharded sources give each rank its part of every batch, augmented as unsharded",
          "[prefetch]") {
  // 103 samples in batches of 24 for 3 ranks: parts of 8, and a last batch of 7 split 3, 2, 2.
  auto d = small(103);
  for (bool prefetch : {false, true}) {
    INFO((prefetch ? "prefetched" : "in memory"));
    auto make = [&]() -> std::unique_ptr<mls::BatchSource> {
      if (prefetch) return std::make_unique<PrefetchSource>(source(d), 2);
      return source(d);
    };
    auto whole = make();
    const Seen all = epoch(*whole, 2, 24);
    std::vector<Seen> parts;
    std::vector<std::vector<int64_t>> globals(3);
    for (int r = 0; r < 3; ++r) {
      auto s = make();
      REQUIRE(s->set_shard(r, 3));
      HostBatch b;
      Seen seen;
      s->start_epoch(2);
      while (s->next(24, b)) {
        seen.sizes.push_back(b.size);
        seen.y.insert(seen.y.end(), b.y.begin(), b.y.end());
        seen.x.insert(seen.x.end(), b.x.begin(), b.x.end());
        globals[static_cast<size_t>(r)].push_back(b.global_size);
      }
      parts.push_back(seen);
    }
    CHECK(parts[0].sizes == std::vector<int64_t>{8, 8, 8, 8, 3});
    CHECK(parts[1].sizes == std::vector<int64_t>{8, 8, 8, 8, 2});
    CHECK(globals[2] == std::vector<int64_t>{24, 24, 24, 24, 7});
    // Batch by batch, rank 0's part, then rank 1's, then rank 2's is the whole batch: the same
    // samples, labels and augmented features.
    Seen joined;
    std::vector<size_t> at(3, 0), xat(3, 0);
    const size_t per = 9;
    for (size_t k = 0; k < all.sizes.size(); ++k)
      for (size_t r = 0; r < 3; ++r) {
        const auto n = static_cast<size_t>(parts[r].sizes[k]);
        joined.y.insert(joined.y.end(), parts[r].y.begin() + static_cast<std::ptrdiff_t>(at[r]),
                        parts[r].y.begin() + static_cast<std::ptrdiff_t>(at[r] + n));
        joined.x.insert(joined.x.end(), parts[r].x.begin() + static_cast<std::ptrdiff_t>(xat[r]),
                        parts[r].x.begin() + static_cast<std::ptrdiff_t>(xat[r] + n * per));
        at[r] += n;
        xat[r] += n * per;
      }
    CHECK(joined.y == all.y);
    CHECK(joined.x == all.x);
    // set_shard(0, 1) ends it: whole batches again.
    auto s = make();
    REQUIRE(s->set_shard(1, 3));
    REQUIRE(s->set_shard(0, 1));
    CHECK(epoch(*s, 2, 24) == all);
  }
}
