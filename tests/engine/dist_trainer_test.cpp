// Data-parallel training (Trainer::set_collective) between threads: 2 ranks with batch 64
// train the parameters 1 rank with batch 128 does, the all-reduce steps are steps of the plan,
// and a rank that stops answering is named.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <thread>

#include "blobs_source.h"
#include "engine/cpu/cpu_backend.h"
#include "graph_fixtures.h"
#include "thread_collective.h"

using namespace mls;
using namespace mls::test;

namespace {

TrainConfig dist_config(int64_t batch) {
  TrainConfig cfg;
  cfg.epochs = 3;
  cfg.batch_size = batch;
  cfg.seed = 11;
  cfg.max_steps = 50;
  cfg.opt = {.type = "adam", .lr = 0.01};
  return cfg;
}

std::vector<std::vector<float>> params_of(const Trainer& t) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : t.params()) out.push_back(p.to_f32());
  return out;
}

// max |a - b| / max |b| over every parameter.
double relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) {
      diff = std::max(diff, static_cast<double>(std::fabs(a[i][j] - b[i][j])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[i][j])));
    }
  return diff / scale;
}

struct RankResult {
  std::vector<std::vector<float>> params;
  Result<TrainResult> result = make_error("not run");
  std::string plan_text;
};

// Trains the MLP on `ranks` threads with per-rank batch `batch`; returns each rank's outcome.
std::vector<RankResult> train_ranks(int ranks, int64_t batch, ExecMode mode, int64_t bucket_bytes = 0,
                                    int silent_rank = -1, TraceRecorder* trace0 = nullptr) {
  ThreadWorld world(ranks, silent_rank >= 0 ? 2.0 : 30.0);
  std::vector<RankResult> out(static_cast<size_t>(ranks));
  auto one = [&](int r) {
    cpu::CpuBackend be(1);
    Blobs data(3200, 20, 4, 5);
    TrainConfig cfg = dist_config(batch);
    cfg.mode = mode;
    cfg.bucket_bytes = bucket_bytes;
    // Rank 0 starts from other weights: the broadcast must give every rank rank 0's.
    cfg.seed = r == 0 ? 11 : 99;
    Trainer t(be, mlp_builder(20, {64, 32}, 4), cfg);
    t.set_collective(&world.rank(r));
    if (r == silent_rank) return;  // this rank never takes part
    if (r == 0 && trace0) t.set_trace(trace0);
    RankResult& res = out[static_cast<size_t>(r)];
    res.result = t.fit(data, nullptr, nullptr);
    res.params = params_of(t);
    if (mode == ExecMode::Static)
      if (auto p = t.training_plan(batch); p) res.plan_text = (*p)->to_text();
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) threads.emplace_back(one, r);
  one(0);
  for (std::thread& t : threads) t.join();
  return out;
}

std::vector<std::vector<float>> one_rank(int64_t batch, ExecMode mode) {
  cpu::CpuBackend be(1);
  Blobs data(3200, 20, 4, 5);
  TrainConfig cfg = dist_config(batch);
  cfg.mode = mode;
  Trainer t(be, mlp_builder(20, {64, 32}, 4), cfg);
  auto r = t.fit(data, nullptr, nullptr);
  REQUIRE(r.ok());
  REQUIRE(r->steps == 50);
  return params_of(t);
}

}  // namespace

TEST_CASE("two ranks of batch 64 train what one rank of batch 128 does", "[dist][trainer]") {
  const auto mode = GENERATE(ExecMode::Static, ExecMode::Eager);
  INFO((mode == ExecMode::Static ? "static" : "eager"));
  const auto want = one_rank(128, mode);
  auto ranks = train_ranks(2, 64, mode);
  for (size_t r = 0; r < ranks.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(ranks[r].result.ok());
    CHECK(ranks[r].result->steps == 50);
    CHECK(ranks[r].result->world_size == 2);
    CHECK(relative_difference(ranks[r].params, want) < 1e-5);
  }
  // Both ranks hold the very same parameters (they apply the same summed gradients).
  CHECK(relative_difference(ranks[1].params, ranks[0].params) == 0.0);
  // Not trivially equal: one step of another batch size moves the parameters by more.
  CHECK(relative_difference(one_rank(64, mode), want) > 1e-3);
}

TEST_CASE("the all-reduce steps are steps of the training plan, started in buckets", "[dist]") {
  // Buckets of 4 KiB: fc3's and fc2's gradients start summing before fc1's are written.
  auto ranks = train_ranks(2, 64, ExecMode::Static, 4096);
  REQUIRE(ranks[0].result.ok());
  const std::string& text = ranks[0].plan_text;
  INFO(text);
  size_t starts = 0;
  for (size_t at = text.find("all_reduce_start"); at != std::string::npos; at = text.find("all_reduce_start", at + 1)) ++starts;
  CHECK(starts == 2);  // fc3 and fc2 (8.7 KB), then fc1 (5.4 KB)
  // The first bucket holds the last layers and starts waves before the wait, which follows the
  // first layer's weight gradient: the backward pass is still running when it starts.
  std::smatch first, wait;
  REQUIRE(std::regex_search(text, first, std::regex(R"(\+ after w(\d+): all_reduce_start \[bucket 0: fc3\.bias, fc3\.weight, fc2\.bias, fc2\.weight\])")));
  REQUIRE(std::regex_search(text, wait, std::regex(R"(\+ after w(\d+): all_reduce_wait)")));
  CHECK(std::stoi(first[1].str()) < std::stoi(wait[1].str()));
  // Smaller buckets change only the summation's grouping, not the result.
  const auto want = one_rank(128, ExecMode::Static);
  CHECK(relative_difference(ranks[0].params, want) < 1e-5);
  CHECK(ranks[0].result->comm_seconds > 0);
}

TEST_CASE("the all-reduce steps are timed in the op profile and drawn in the trace", "[dist]") {
  TraceRecorder trace;
  auto ranks = train_ranks(2, 64, ExecMode::Static, 4096, -1, &trace);
  REQUIRE(ranks[0].result.ok());
  size_t starts = 0, waits = 0;
  for (const auto& e : trace.events()) {
    starts += e.name.rfind("all_reduce_start [bucket ", 0) == 0;
    waits += e.name.rfind("all_reduce_wait [2 buckets]", 0) == 0;
  }
  // Every one of the 50 steps: two buckets started, one wait.
  CHECK(starts == 100);
  CHECK(waits == 50);
}

TEST_CASE("a rank that stops answering is named, and training stops with an error", "[dist]") {
  auto ranks = train_ranks(2, 64, ExecMode::Static, 0, /*silent_rank=*/1);
  REQUIRE_FALSE(ranks[0].result.ok());
  const std::string& msg = ranks[0].result.error().message;
  INFO(msg);
  CHECK(msg.find("rank 1 (thread1)") != std::string::npos);
  CHECK(msg.find("did not answer within 2 s") != std::string::npos);
}
