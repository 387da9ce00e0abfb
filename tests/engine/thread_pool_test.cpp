// engine/cpu/thread_pool: every index of a job runs exactly once, whichever thread takes it,
// whether the workers were spinning, asleep, or woken ahead of the job by wake(). Tagged
// [concurrent] so that the ThreadSanitizer build (scripts/sanitize tsan) runs it too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/thread_pool.h"

using mls::cpu::ThreadPool;

namespace {

// Runs parallel_for over [0, n) and returns how often each index ran.
std::vector<int> counts(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

bool each_once(const std::vector<int>& c) {
  for (int v : c)
    if (v != 1) return false;
  return true;
}

}  // namespace

TEST_CASE("a pool's job runs every index once, at any size and grain", "[concurrent]") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (int64_t n : {1, 2, 7, 1000})
      for (int64_t grain : {1, 3, 64, 5000}) {
        INFO("threads " << threads << ", n " << n << ", grain " << grain);
        CHECK(each_once(counts(pool, n, grain)));
      }
    std::atomic<int64_t> sum{0};
    pool.run_tasks(100, [&](int64_t i) { sum += i; });
    CHECK(sum == 4950);
  }
}

TEST_CASE("a woken pool runs its next jobs the same, and stops cleanly", "[concurrent]") {
  ThreadPool pool(2);
  // Workers asleep (past their spin), then woken ahead of a job: the job still runs each
  // index once, and a wake with no job after it leaves the pool usable.
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    pool.wake();
    CHECK(each_once(counts(pool, 257, 1)));
    pool.wake();
    pool.wake();
  }
  // Wakes racing with jobs from another thread: no index lost or run twice.
  std::atomic<bool> done{false};
  std::thread waker([&] {
    while (!done.load()) pool.wake();
  });
  bool ok = true;
  for (int i = 0; i < 200; ++i) ok = ok && each_once(counts(pool, 64, 1));
  done = true;
  waker.join();
  CHECK(ok);
  // A one-thread pool has no one to wake.
  ThreadPool one(1);
  one.wake();
  CHECK(each_once(counts(one, 10, 1)));
  // Destroyed right after a wake: the workers see stop and join (a hang fails the test's
  // timeout).
  auto doomed = std::make_unique<ThreadPool>(3);
  doomed->wake();
  doomed.reset();
  SUCCEED("joined");
}

TEST_CASE("the CPU backend's copies in are exact at any size, split across its threads",
          "[concurrent]") {
  // Copies of 256 KiB and more are cut into 64 KiB pieces over the pool: every byte lands once,
  // at an odd offset, and nothing past the end is touched.
  mls::cpu::CpuBackend cpu(3);
  for (size_t bytes : {size_t{1}, size_t{255} << 10, size_t{256} << 10, (size_t{256} << 10) + 13,
                       (size_t{1} << 20) + 7}) {
    INFO(bytes << " bytes");
    std::vector<unsigned char> src(bytes);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + i / 977);
    auto buf = cpu.allocate(bytes + 16, mls::AllocTag::Other);
    std::vector<unsigned char> back(bytes + 16, 0xAB);
    cpu.copy_to_device(*buf, 0, back.data(), bytes + 16);  // a known border
    cpu.copy_to_device(*buf, 3, src.data(), bytes);
    cpu.copy_to_host(*buf, 0, back.data(), bytes + 16);
    CHECK(std::equal(src.begin(), src.end(), back.begin() + 3));
    CHECK(back[0] == 0xAB);
    CHECK(back[bytes + 3] == 0xAB);
  }
}
