// For code whose failure would be a hang (a producer thread that never stops, a consumer
// that waits forever): runs `body` on its own thread and says whether it finished in time,
// so the test fails by an assertion instead of hanging until CTest's timeout.
//
//   REQUIRE(finishes_within(std::chrono::seconds(10), [] { PrefetchSource p(...); ... }));
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace mls::test {

inline bool finishes_within(std::chrono::milliseconds limit, std::function<void()> body) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread worker([done, body = std::move(body)] {
    body();
    done->set_value();
  });
  if (finished.wait_for(limit) == std::future_status::ready) {
    worker.join();
    return true;
  }
  worker.detach();  // hung: leave it, the assertion that follows ends the test
  return false;
}

}  // namespace mls::test
