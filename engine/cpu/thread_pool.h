// A small fork-join pool for the CPU kernels.
//
//   ThreadPool pool(2);
//   pool.parallel_for(0, rows, 64, [&](int64_t lo, int64_t hi) { ... rows lo..hi ... });
//
// The calling thread takes a share of the work, so a pool of n threads uses n-1 workers.
// Work below the grain runs inline: waking a thread costs more than a small loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mls::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_begin_ = 0, job_end_ = 0, job_chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace mls::cpu
