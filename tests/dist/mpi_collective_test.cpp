// MpiCollective between 2 ranks: run under mpirun (tests/dist/mpirun2.sh; CTest does it,
// `ctest -L dist`). Every case runs on both ranks, in order; each rank checks its own side.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/mpi_collective.h"

using namespace mls;
using Catch::Matchers::Contains;

namespace {

// One per process (MPI initialises once); finalised at exit. A 10 s timeout: a failed check
// on one rank that leaves the other waiting ends in an error, not a hang.
MpiCollective& world() {
  static std::unique_ptr<MpiCollective> w = [] {
    auto r = MpiCollective::init(nullptr, nullptr, 10.0);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      std::abort();
    }
    return std::move(*r);
  }();
  return *w;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("dist: two ranks, each with its host, launched by OpenMPI", "[dist]") {
  MpiCollective& w = world();
  REQUIRE(w.size() == 2);
  CHECK((w.rank() == 0 || w.rank() == 1));
  REQUIRE(w.hosts().size() == 2);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(w.hosts()[static_cast<size_t>(w.rank())] == host);
  CHECK(w.hosts()[0] == w.hosts()[1]);  // one machine
  CHECK(w.timeout_seconds() == 10.0);

  LaunchEnv env = launch_env();
  CHECK(env.size == 2);
  CHECK(env.rank == w.rank());
  CHECK(env.launcher == "OpenMPI");

  auto again = MpiCollective::init(nullptr, nullptr);
  REQUIRE_FALSE(again);
  CHECK_THAT(again.error().message, Contains("already initialised"));
}

TEST_CASE("dist: broadcast gives every rank rank 0's bytes", "[dist]") {
  MpiCollective& w = world();
  std::vector<unsigned char> bytes(100000, 0);
  if (w.rank() == 0)
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  REQUIRE(w.broadcast(bytes.data(), bytes.size()));
  size_t wrong = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    wrong += bytes[i] != static_cast<unsigned char>(i * 31 + 7);
  CHECK(wrong == 0);

  float params[3] = {0, 0, 0};
  if (w.rank() == 0) params[0] = 1.5f, params[1] = -2.25f, params[2] = 1e-30f;
  REQUIRE(w.broadcast(params, sizeof params));
  CHECK(params[0] == 1.5f);
  CHECK(params[1] == -2.25f);
  CHECK(params[2] == 1e-30f);
  REQUIRE(w.broadcast(nullptr, 0));
}

TEST_CASE("dist: sum adds each rank's doubles in place", "[dist]") {
  MpiCollective& w = world();
  std::vector<double> v(5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (w.rank() + 1) * (static_cast<double>(i) + 0.5);
  const double before = w.seconds();
  REQUIRE(w.sum(v.data(), v.size()));
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == 3 * (static_cast<double>(i) + 0.5));
  CHECK(w.seconds() > before);
  double samples = w.rank() == 0 ? 64 : 36;
  REQUIRE(w.sum(&samples, 1));
  CHECK(samples == 100);
}

TEST_CASE("dist: gradient buckets started one by one are all summed by wait_all", "[dist]") {
  MpiCollective& w = world();
  const std::vector<size_t> sizes = {1, 1000, 262144, 77};
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<float>> buckets;
    for (size_t b = 0; b < sizes.size(); ++b) {
      std::vector<float> g(sizes[b]);
      for (size_t i = 0; i < g.size(); ++i)
        g[i] = static_cast<float>((w.rank() + 1) *
                                  (static_cast<int>(i % 7) + static_cast<int>(b) + round));
      buckets.push_back(std::move(g));
    }
    for (auto& g : buckets) {
      REQUIRE(w.start_sum(g.data(), g.size()));
      w.progress();  // as between the backward pass's kernels
    }
    REQUIRE(w.wait_all());
    size_t wrong = 0;
    for (size_t b = 0; b < buckets.size(); ++b)
      for (size_t i = 0; i < buckets[b].size(); ++i)
        wrong += buckets[b][i] !=
                 static_cast<float>(3 * (static_cast<int>(i % 7) + static_cast<int>(b) + round));
    CHECK(wrong == 0);
  }
  REQUIRE(w.wait_all());  // nothing started: returns at once
  CHECK_FALSE(w.failed());
}

TEST_CASE("dist: texts both ways, from a named rank and from any rank", "[dist]") {
  MpiCollective& w = world();
  const std::string big(1 << 20, 'x');
  if (w.rank() == 0) {
    REQUIRE(w.send_text(1, "trial 7: lr=0.1"));
    auto reply = w.recv_text(1);
    REQUIRE(reply);
    CHECK(*reply == "result of trial 7: 0.25");
    REQUIRE(w.send_text(1, big));
    int from = -1;
    auto beat = w.recv_text_any(&from);
    REQUIRE(beat);
    CHECK(from == 1);
    CHECK(beat->empty());  // a heartbeat
    from = -1;
    auto done = w.recv_text_any(&from);
    REQUIRE(done);
    CHECK(from == 1);
    CHECK(*done == "done");
  } else {
    auto trial = w.recv_text(0);
    REQUIRE(trial);
    CHECK(*trial == "trial 7: lr=0.1");
    REQUIRE(w.send_text(0, "result of trial 7: 0.25"));
    auto got = w.recv_text(0);
    REQUIRE(got);
    CHECK(got->size() == big.size());
    CHECK(*got == big);
    REQUIRE(w.send_text(0, ""));
    REQUIRE(w.send_text(0, "done"));
  }
  // A rank outside the job, or itself, is refused without harming the collective.
  auto self = w.send_text(w.rank(), "to myself");
  REQUIRE_FALSE(self);
  CHECK_THAT(self.error().message, Contains("send_text to rank " + std::to_string(w.rank())));
  CHECK_FALSE(w.recv_text(5));
  CHECK_FALSE(w.failed());
}

// Rank 0 sums while rank 1 waits for a text: neither call can complete, both ranks answer
// each other's pings, and each says the ranks are out of step rather than blaming the other.
TEST_CASE("dist: ranks in different calls are out of step, and nobody is called dead", "[dist]") {
  MpiCollective& w = world();
  auto sub = w.duplicate(1.0);
  REQUIRE(sub);
  (*sub)->set_ping_window(1.0);  // slack for a rank the machine runs late
  std::string message;
  if (w.rank() == 0) {
    double x = 1;
    auto r = (*sub)->sum(&x, 1);
    REQUIRE_FALSE(r);
    message = r.error().message;
  } else {
    auto r = (*sub)->recv_text(0);
    REQUIRE_FALSE(r);
    message = r.error().message;
  }
  CHECK_THAT(message, Contains(w.rank() == 0 ? "sum of 1 double did not complete within 1 s, "
                                               "although every other rank answers"
                                             : "text from rank 0 did not complete within 1 s, "
                                               "although rank 0 answers"));
  CHECK_THAT(message, Contains("the ranks are out of step"));
  CHECK_THAT(message, !Contains("did not answer"));
  CHECK_FALSE(w.failed());
}

// A Ctrl-C on mpirun reaches every rank: their waits are cancelled while every rank is alive,
// so the call goes on and completes (the trainer then stops every rank after the same step).
TEST_CASE("dist: a wait cancelled while every rank answers completes", "[dist]") {
  MpiCollective& w = world();
  auto sub = w.duplicate(10.0);
  REQUIRE(sub);
  std::atomic<bool> cancel{true};
  (*sub)->set_cancel_flag(&cancel);
  if (w.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  double x = 1 + w.rank();
  auto r = (*sub)->sum(&x, 1);
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r);
  CHECK(x == 3.0);
  // The next call goes on too, without pinging again.
  double y = 1;
  REQUIRE((*sub)->sum(&y, 1));
  CHECK(y == 2.0);
  CHECK_FALSE((*sub)->failed());
}

// Last: rank 1 hangs (in no MPI call, so it answers no ping) through two collectives of its
// own, which fail on rank 0 naming it; the world collective goes on.
TEST_CASE("dist: a rank that hangs is named at the deadline or when the wait is cancelled",
          "[dist]") {
  MpiCollective& w = world();
  auto deadline2 = w.duplicate(2.0);
  REQUIRE(deadline2);
  auto cancellable = w.duplicate(30.0);
  REQUIRE(cancellable);
  (*deadline2)->set_ping_window(1.0);
  CHECK((*deadline2)->timeout_seconds() == 2.0);
  const std::string rank1 = "rank 1 (host " + w.hosts()[1] + ") did not answer ";
  if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  } else {
    double x = 1;
    auto t0 = std::chrono::steady_clock::now();
    auto r = (*deadline2)->sum(&x, 1);
    const double waited = since(t0);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message,
               Contains(rank1 + "within 2 s: it died or hangs (sum of 1 double,"));
    CHECK(waited >= 2.0);
    CHECK(waited < 2.0 + 1.0 + 2.0);  // the deadline, the ping window and slack
    CHECK((*deadline2)->failed());
    auto again = (*deadline2)->sum(&x, 1);
    REQUIRE_FALSE(again);
    CHECK_THAT(again.error().message, Contains("failed earlier"));

    // A SIGTERM handler's flag cuts a 30 s wait short; the missing rank is still named.
    std::atomic<bool> cancel{false};
    (*cancellable)->set_cancel_flag(&cancel);
    std::thread terminator([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel = true;
    });
    t0 = std::chrono::steady_clock::now();
    auto c = (*cancellable)->sum(&x, 1);
    const double cut = since(t0);
    terminator.join();
    REQUIRE_FALSE(c);
    CHECK_THAT(c.error().message, Contains(rank1 + "before the wait was cancelled after"));
    CHECK(cut < 5.0);
  }
  CHECK_FALSE(w.failed());
  double one = 1;
  REQUIRE(w.sum(&one, 1));
  CHECK(one == 2);
}
