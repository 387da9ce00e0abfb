#include "engine/cpu/thread_pool.h"

#include <algorithm>

namespace mls::cpu {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t lo, hi;
    {
      std::unique_lock lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      lo = job_begin_ + job_chunk_ * index;
      hi = std::min(job_end_, lo + job_chunk_);
    }
    if (lo < hi) (*job)(lo, hi);
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (parts <= 1 || workers_.empty()) {
    fn(begin, end);
    return;
  }
  int64_t chunk = (n + size() - 1) / size();
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_begin_ = begin;
    job_end_ = end;
    job_chunk_ = chunk;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_work_.notify_all();
  fn(begin, std::min(end, begin + chunk));  // the caller's share: chunk 0
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace mls::cpu
