// A small fork-join pool for the CPU kernels.
//
//   ThreadPool pool(2);
//   pool.parallel_for(0, rows, 64, [&](int64_t lo, int64_t hi) { ... rows lo..hi ... });
//
// The calling thread takes a share of the work, so a pool of n threads uses n-1 workers;
// it also runs the parts that no worker has started when its own is done, so a worker that
// the OS has not scheduled yet (a busy machine) delays nothing.
// Work below the grain runs inline: waking a thread costs more than a small loop. A call
// made from inside a job runs inline too, and calls from several outside threads take
// turns, so kernels may nest and two sessions may share the backend.
//
//   pool.run_tasks(kernels, [&](int64_t i) { run_kernel(i); });   // independent tasks
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace mls::cpu {

// A non-owning reference to a callable: no heap allocation per parallel_for.
class RangeFn {
 public:
  template <typename F>
  RangeFn(F& f) : obj_(&f), call_([](void* o, int64_t lo, int64_t hi) { (*static_cast<F*>(o))(lo, hi); }) {}  // NOLINT
  void operator()(int64_t lo, int64_t hi) const { call_(obj_, lo, hi); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  template <typename F>
  void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
    auto& f = fn;
    run(begin, end, grain, RangeFn(f));
  }

  // Sleeping workers get up and spin for the next job (up to 1 ms): a caller that will
  // start a burst of jobs after a pause calls this before the pause, so that the first job
  // does not wait for a thread to wake. On the 2-core VM a sleeping worker took its part of
  // a training step's first job 85-100 us after the job was posted (LeNet's first
  // convolution: 0.35 ms a step in profiles, ~0.25 with workers that never sleep).
  void wake();

  // fn(i) for i in [0, n), each task taken by whichever thread is free next, so tasks of
  // uneven size balance themselves. Inside a job (or with one thread) all run inline.
  template <typename F>
  void run_tasks(int64_t n, F&& fn) {
    std::atomic<int64_t> next{0};
    parallel_for(0, std::min<int64_t>(n, size()), 1, [&](int64_t, int64_t) {
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
    });
  }

 private:
  void run(int64_t begin, int64_t end, int64_t grain, RangeFn fn);
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one job at a time from outside callers
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const RangeFn* job_ = nullptr;
  int64_t job_begin_ = 0, job_end_ = 0, job_chunk_ = 0;
  int job_parts_ = 0;
  std::vector<char> claimed_;  // per part of the job: a thread has taken it
  std::atomic<uint64_t> generation_{0};  // written under mu_; read without it to spin
  uint64_t wakes_ = 0;                     // wake() calls, under mu_
  std::atomic<int> pending_{0};  // parts 1.. not yet finished; written under mu_, spun on without it
  bool stop_ = false;
};

}  // namespace mls::cpu
