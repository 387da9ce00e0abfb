#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace mls::cpu {

namespace {
// Set while this thread runs part of a job: nested parallel_for calls run inline.
thread_local bool t_in_job = false;

struct InJob {
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = false; }
};

constexpr auto kSpin = std::chrono::microseconds(50);
// After wake(): a job is on its way, but the caller may take a while (a training step copies
// its batch in and looks up its plan first).
constexpr auto kWakeSpin = std::chrono::microseconds(1000);

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) : claimed_(static_cast<size_t>(std::max(threads, 1)), 0) {
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

void ThreadPool::wake() {
  if (workers_.empty()) return;
  {
    std::lock_guard lock(mu_);
    ++wakes_;
  }
  cv_work_.notify_all();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0, seen_wakes = 0;
  bool woken = false;
  for (;;) {
    const RangeFn* job;
    int64_t lo, hi;
    bool mine;
    // Jobs come in bursts (a plan's kernels, microseconds apart): spin a little before
    // sleeping, since waking a sleeping thread (on a VM, its halted vCPU) costs tens of us.
    auto spin_end = std::chrono::steady_clock::now() + (woken ? kWakeSpin : kSpin);
    woken = false;
    for (int i = 0; generation_.load(std::memory_order_acquire) == seen; ++i) {
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_end) break;
      pause();
    }
    {
      std::unique_lock lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen || wakes_ != seen_wakes; });
      if (stop_) return;
      seen_wakes = wakes_;
      if (generation_ == seen) {  // woken ahead of a job: spin for it
        woken = true;
        continue;
      }
      seen = generation_;
      job = job_;
      mine = index < job_parts_ && !claimed_[static_cast<size_t>(index)];
      if (mine) claimed_[static_cast<size_t>(index)] = 1;
      lo = job_begin_ + job_chunk_ * index;
      hi = std::min(job_end_, lo + job_chunk_);
    }
    if (mine && lo < hi) {
      InJob guard;
      (*job)(lo, hi);  // kernels do not throw: they only index memory they were given
    }
    if (mine) {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t begin, int64_t end, int64_t grain, RangeFn fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (parts <= 1 || t_in_job) {
    fn(begin, end);
    return;
  }
  std::lock_guard call(call_mu_);
  int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_begin_ = begin;
    job_end_ = end;
    job_chunk_ = chunk;
    job_parts_ = parts;
    std::fill(claimed_.begin(), claimed_.end(), 0);
    claimed_[0] = 1;       // the caller's share
    pending_ = parts - 1;  // parts 1 .. parts-1
    ++generation_;
  }
  cv_work_.notify_all();
  std::exception_ptr error;
  {
    InJob guard;
    try {
      fn(begin, std::min(end, begin + chunk));  // the caller's share: chunk 0
      // Then every part that no worker has taken yet.
      for (int part = 1; part < parts; ++part) {
        {
          std::lock_guard lock(mu_);
          if (claimed_[static_cast<size_t>(part)]) continue;
          claimed_[static_cast<size_t>(part)] = 1;
          --pending_;
        }
        int64_t lo = begin + chunk * part;
        fn(lo, std::min(end, lo + chunk));
      }
    } catch (...) {
      error = std::current_exception();  // wait for the workers before `fn` goes away
    }
  }
  // The workers' parts end microseconds from now: spin for them before sleeping, since a
  // wake-up through the condition variable costs more than the wait itself.
  auto spin_end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_end) break;
    pause();
  }
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error) std::rethrow_exception(error);
}

}  // namespace mls::cpu
