// A Chrome trace-event file of a training run: one span per executed kernel, the steps and
// optimizer updates around them, and counters of live memory by category. Perfetto
// (ui.perfetto.dev) and chrome://tracing open it.
//
//   TraceRecorder trace;
//   trainer.set_trace(&trace);                 // profiles the plans, records every step
//   trainer.fit(...);
//   if (auto r = trace.write("run.json"); !r) fail(r.error().message);
//
// Times are steady_clock nanoseconds; the file gives microseconds from the first event.
// Events are kept in memory until write() (about 100 bytes each): a 26-kernel step adds
// some 30 events, so an MLP epoch of 469 steps holds ~1.5 MB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/result.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/memory_timeline.h"

namespace mls {

class TraceRecorder {
 public:
  struct Event {
    char phase = 'X';  // 'X' a span, 'C' a counter
    std::string name, cat;
    int64_t start_ns = 0, end_ns = 0;
    int32_t thread = 0;
    std::vector<std::pair<std::string, std::string>> args;  // spans
    std::vector<std::pair<std::string, double>> values;     // counters
  };

  void span(std::string name, std::string cat, int64_t start_ns, int64_t end_ns, int32_t thread,
            std::vector<std::pair<std::string, std::string>> args = {});
  void counter(std::string name, int64_t ts_ns, std::vector<std::pair<std::string, double>> values);
  // The kernels of the plan's last run (it must profile: CompiledPlan::set_profiling), each a
  // span of category `cat` ("op": a training step's; "eval": an evaluation's), and with
  // `memory`, a "memory" counter at each wave's first kernel.
  void plan_run(const CompiledPlan& plan, int64_t step, const MemoryTimeline* memory,
                std::string_view cat = "op");

  const std::vector<Event>& events() const { return events_; }
  size_t count(std::string_view cat) const;
  // The trace as Chrome's JSON object format ({"traceEvents": [...]}).
  std::string json() const;
  // Written atomically; the message names the file.
  Result<void> write(const std::string& path) const;

 private:
  std::vector<Event> events_;
};

int64_t steady_now_ns();

}  // namespace mls
