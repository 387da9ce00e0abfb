// The training loop on synthetic data: static and eager agree step by step, a warm
// static step allocates nothing, and training actually learns.
#include <cmath>

#include "engine/train/trainer.h"
#include "blobs_source.h"
#include "graph_fixtures.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;


TEST_CASE("eager and static execution give the same loss trajectory over 100 steps", "[trainer][eager]") {
  Blobs data(100 * 32, 20, 4, 3);
  TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 11, .opt = {.type = "sgd", .lr = 0.05, .momentum = 0.9}};
  Trainer st(host(), mlp_builder(20, {64}, 4), cfg);
  cfg.mode = ExecMode::Eager;
  Trainer ea(host(), mlp_builder(20, {64}, 4), cfg);
  auto rs = st.fit(data, nullptr, nullptr);
  CHECK(data.pauses == 100);  // each step's end announced to the source (a CPU step)
  auto re = ea.fit(data, nullptr, nullptr);
  CHECK(data.pauses == 200);
  REQUIRE(rs.ok());
  REQUIRE(re.ok());
  REQUIRE(rs->step_losses.size() == 100);
  REQUIRE(re->step_losses.size() == 100);
  double worst = 0;
  for (size_t i = 0; i < 100; ++i)
    worst = std::max(worst, std::abs(rs->step_losses[i] - re->step_losses[i]) / std::abs(rs->step_losses[i]));
  INFO("worst relative difference " << worst);
  CHECK(worst <= 1e-5);
  CHECK(rs->step_losses.back() < 0.5 * rs->step_losses.front());  // it learns
}

TEST_CASE("after warm-up a static training step allocates nothing", "[trainer][memory]") {
  Blobs data(64 * 20, 20, 4, 4);
  Trainer t(host(), mlp_builder(20, {32}, 4), {.epochs = 1, .batch_size = 64, .seed = 1, .opt = {.type = "adam", .lr = 0.01}});
  HostBatch b;
  data.start_epoch(0);
  REQUIRE(data.next(64, b));
  REQUIRE(t.train_step(b).ok());  // warm-up: builds and binds the plan
  REQUIRE(t.train_step(b).ok());
  MemoryStats before = host().memory().stats();
  for (int i = 0; i < 10; ++i) {
    REQUIRE(data.next(64, b));
    REQUIRE(t.train_step(b).ok());
  }
  MemoryStats after = host().memory().stats();
  CHECK(after.alloc_count == before.alloc_count);
  CHECK(after.free_count == before.free_count);
  CHECK(after.current[tag_index(AllocTag::Parameter)] > 0);
  // Gradients are planned values of the step's arena (tagged Activation), not buffers of their own.
  CHECK(after.current[tag_index(AllocTag::Gradient)] == 0);
  CHECK(after.current[tag_index(AllocTag::OptimizerState)] == 2 * after.current[tag_index(AllocTag::Parameter)]);
}

TEST_CASE("training separates blobs and evaluation reports accuracy, a bad label is an error", "[trainer]") {
  Blobs train(2000, 10, 3, 7), test(500, 10, 3, 7);
  Trainer t(host(), mlp_builder(10, {32}, 3), {.epochs = 3, .batch_size = 50, .seed = 2, .opt = {.type = "sgd", .lr = 0.1, .momentum = 0.9}});
  auto r = t.fit(train, &test, nullptr);
  REQUIRE(r.ok());
  CHECK(train.pauses == 3 * 40);
  CHECK(test.pauses == 0);  // evaluation is not fed through fit's training loop
  CHECK(r->has_test);
  CHECK(r->test.accuracy > 0.95);
  CHECK(r->epoch_seconds.size() == 3);
  CHECK(r->peak_bytes > 0);
  HostBatch bad;
  bad.size = 1;
  bad.x.assign(10, 0.f);
  bad.y = {7};
  auto e = t.train_step(bad);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("label 7") != std::string::npos);
}

TEST_CASE("a NaN in the data is named where it sits, not blamed on the learning rate", "[trainer]") {
  // (Data sources refuse non-finite values when they load; this is the trainer's own net for
  // a source that does not.) A linear model passes a NaN on: that very step's loss is NaN.
  Blobs data(256, 20, 4, 3);
  data.set(64 + 5, 17, std::nanf(""));  // the second batch of 64, its sixth sample
  Trainer t(host(), mlp_builder(20, {}, 4),
            {.epochs = 1, .batch_size = 64, .seed = 1, .opt = {.type = "sgd", .lr = 0.01}});
  auto r = t.fit(data, nullptr, nullptr);
  REQUIRE_FALSE(r.ok());
  const std::string& m = r.error().message;
  INFO(m);
  CHECK(m.find("the training data is not finite: the batch of step 2 (epoch 1) holds nan in its "
               "inputs ([20] each) at sample 5, value 17") != std::string::npos);
  CHECK(m.find("learning rate") == std::string::npos);

  // Finite data that diverges is the learning rate's: the message says the data were checked.
  Blobs clean(256, 20, 4, 3);
  Trainer wild(host(), mlp_builder(20, {32}, 4),
               {.epochs = 3, .batch_size = 64, .seed = 1, .opt = {.type = "sgd", .lr = 1e30}});
  auto w = wild.fit(clean, nullptr, nullptr);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find("the data are finite, so try a smaller learning rate") !=
        std::string::npos);
}
