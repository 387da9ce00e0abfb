// A Collective between the threads of one process, for engine tests of data-parallel
// training without MPI: N threads, each a rank with its own trainer and CPU backend.
//
//   ThreadWorld world(2, /*timeout_s=*/5);
//   std::thread t1([&] { Trainer t(...); t.set_collective(&world.rank(1)); t.fit(...); });
//   Trainer t0(...); t0.set_collective(&world.rank(0)); t0.fit(...);
//
// Sums add the ranks' values in rank order (deterministic); a rank that stops taking part
// makes the others' calls fail after the timeout with an error naming it, as MpiCollective's do.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/train/collective.h"

namespace mls::test {

class ThreadWorld;

class ThreadRank final : public Collective {
 public:
  ThreadRank(ThreadWorld& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override;
  const std::vector<std::string>& hosts() const override;
  Result<void> broadcast(void* data, size_t bytes) override;
  Result<void> sum(double* data, size_t count) override;
  Result<void> start_sum(float* data, size_t count) override {
    pending_.push_back({data, count});
    return {};
  }
  Result<void> wait_all() override;
  Result<void> send_text(int to, const std::string& text) override;
  Result<std::string> recv_text(int from) override;
  Result<std::string> recv_text_any(int* from) override;
  double timeout_seconds() const override;
  double seconds() const override { return seconds_; }
  [[noreturn]] void abort_job(int) override { std::abort(); }
  int64_t calls = 0;  // wait_all calls that exchanged something

 private:
  friend class ThreadWorld;
  ThreadWorld& w_;
  int rank_;
  struct Pending {
    float* data;
    size_t count;
  };
  std::vector<Pending> pending_;
  double seconds_ = 0;
};

class ThreadWorld {
 public:
  ThreadWorld(int n, double timeout_s) : n_(n), timeout_(timeout_s), posted_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) {
      ranks_.push_back(std::make_unique<ThreadRank>(*this, r));
      hosts_.push_back("thread" + std::to_string(r));
    }
  }
  ThreadRank& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

  // Every rank calls it with its contribution; `combine` runs once all have arrived (in the last
  // arriver's thread), then each rank's `take` runs. Fails after the timeout naming the ranks
  // that never arrived.
  template <class Post, class Combine, class Take>
  Result<void> exchange(int rank, Post post, Combine combine, Take take) {
    std::unique_lock lk(mu_);
    const int64_t round = round_;
    post(posted_[static_cast<size_t>(rank)]);
    arrived_.push_back(rank);
    if (static_cast<int>(arrived_.size()) == n_) {
      combine(posted_);
      arrived_.clear();
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lk, std::chrono::duration<double>(timeout_), [&] { return round_ != round; })) {
      std::string missing;
      for (int r = 0; r < n_; ++r)
        if (std::find(arrived_.begin(), arrived_.end(), r) == arrived_.end())
          missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(r) + " (" + hosts_[static_cast<size_t>(r)] + ")";
      return make_error(missing + " did not answer within " + std::to_string(static_cast<int>(timeout_)) +
                        " s: it died or hangs");
    }
    take(posted_[static_cast<size_t>(rank)]);
    return {};
  }

  int n_;
  double timeout_;
  std::vector<std::unique_ptr<ThreadRank>> ranks_;
  std::vector<std::string> hosts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t round_ = 0;
  std::vector<int> arrived_;
  std::vector<std::vector<double>> posted_;  // per rank: what it brought, then what it takes
  std::map<std::pair<int, int>, std::deque<std::string>> mail_;
};

inline int ThreadRank::size() const { return w_.n_; }
inline const std::vector<std::string>& ThreadRank::hosts() const { return w_.hosts_; }
inline double ThreadRank::timeout_seconds() const { return w_.timeout_; }

inline Result<void> ThreadRank::broadcast(void* data, size_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  auto* p = static_cast<unsigned char*>(data);
  auto r = w_.exchange(
      rank_, [&](std::vector<double>& mine) { mine.assign(p, p + bytes); },
      [&](std::vector<std::vector<double>>& all) {
        for (auto& v : all) v = all[0];
      },
      [&](std::vector<double>& mine) {
        for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(mine[i]);
      });
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

inline Result<void> ThreadRank::sum(double* data, size_t count) {
  return w_.exchange(
      rank_, [&](std::vector<double>& mine) { mine.assign(data, data + count); },
      [&](std::vector<std::vector<double>>& all) {
        std::vector<double> s(all[0].size(), 0.0);
        for (auto& v : all)
          for (size_t i = 0; i < s.size(); ++i) s[i] += v[i];
        for (auto& v : all) v = s;
      },
      [&](std::vector<double>& mine) { std::copy(mine.begin(), mine.end(), data); });
}

inline Result<void> ThreadRank::wait_all() {
  const auto t0 = std::chrono::steady_clock::now();
  // The pending floats travel as floats (their sums in rank order, in f32, as MPI's would be).
  auto r = w_.exchange(
      rank_,
      [&](std::vector<double>& mine) {
        mine.clear();
        for (const Pending& p : pending_)
          for (size_t i = 0; i < p.count; ++i) mine.push_back(static_cast<double>(p.data[i]));
      },
      [&](std::vector<std::vector<double>>& all) {
        std::vector<float> s(all[0].size(), 0.0f);
        for (auto& v : all) {
          if (v.size() != s.size()) std::abort();  // ranks disagree on the buckets: a bug
          for (size_t i = 0; i < s.size(); ++i) s[i] += static_cast<float>(v[i]);
        }
        for (auto& v : all) v.assign(s.begin(), s.end());
      },
      [&](std::vector<double>& mine) {
        size_t at = 0;
        for (const Pending& p : pending_)
          for (size_t i = 0; i < p.count; ++i) p.data[i] = static_cast<float>(mine[at++]);
      });
  pending_.clear();
  ++calls;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

inline Result<void> ThreadRank::send_text(int to, const std::string& text) {
  std::lock_guard lk(w_.mu_);
  w_.mail_[{rank_, to}].push_back(text);
  w_.cv_.notify_all();
  return {};
}

inline Result<std::string> ThreadRank::recv_text(int from) {
  std::unique_lock lk(w_.mu_);
  auto& q = w_.mail_[{from, rank_}];
  if (!w_.cv_.wait_for(lk, std::chrono::duration<double>(w_.timeout_), [&] { return !q.empty(); }))
    return make_error("rank " + std::to_string(from) + " sent nothing within the timeout");
  std::string t = std::move(q.front());
  q.pop_front();
  return t;
}

inline Result<std::string> ThreadRank::recv_text_any(int* from) {
  std::unique_lock lk(w_.mu_);
  std::deque<std::string>* q = nullptr;
  auto ready = [&] {
    for (int r = 0; r < w_.n_; ++r)
      if (auto it = w_.mail_.find({r, rank_}); it != w_.mail_.end() && !it->second.empty()) {
        q = &it->second;
        *from = r;
        return true;
      }
    return false;
  };
  if (!w_.cv_.wait_for(lk, std::chrono::duration<double>(w_.timeout_), ready))
    return make_error("no rank sent anything within the timeout");
  std::string t = std::move(q->front());
  q->pop_front();
  return t;
}

}  // namespace mls::test
