#include "engine/exec/trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/core/atomic_file.h"

namespace mls {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void TraceRecorder::span(std::string name, std::string cat, int64_t start_ns, int64_t end_ns,
                         int32_t thread, std::vector<std::pair<std::string, std::string>> args) {
  events_.push_back(
      {'X', std::move(name), std::move(cat), start_ns, end_ns, thread, std::move(args), {}});
}

void TraceRecorder::counter(std::string name, int64_t ts_ns,
                            std::vector<std::pair<std::string, double>> values) {
  events_.push_back({'C', std::move(name), "memory", ts_ns, ts_ns, 0, {}, std::move(values)});
}

void TraceRecorder::plan_run(const CompiledPlan& plan, int64_t step, const MemoryTimeline* memory,
                             std::string_view cat) {
  const std::string step_text = std::to_string(step);
  int32_t counted_wave = -1;
  for (const CompiledPlan::StepTime& s : plan.step_times()) {
    if (s.runs == 0) continue;
    if (memory && s.wave != counted_wave && static_cast<size_t>(s.wave) < memory->samples.size()) {
      counted_wave = s.wave;
      const MemoryTimeline::Sample& m = memory->samples[static_cast<size_t>(s.wave)];
      std::vector<std::pair<std::string, double>> v;
      for (int c = 0; c < kNumMemCats; ++c)
        v.emplace_back(std::string(mem_cat_name(static_cast<MemCat>(c))),
                       static_cast<double>(m.bytes[c]));
      counter("memory", s.last.start_ns, std::move(v));
    }
    std::vector<std::pair<std::string, std::string>> args{
        {"node", s.label}, {"pass", s.backward ? "backward" : "forward"}, {"step", step_text}};
    if (s.flops > 0) {
      char f[32];
      std::snprintf(f, sizeof f, "%.0f", s.flops);
      args.emplace_back("flops", f);
    }
    span(s.label.empty() ? s.op : s.op + " [" + s.label + "]", std::string(cat), s.last.start_ns, s.last.end_ns,
         s.last.thread, std::move(args));
  }
}

size_t TraceRecorder::count(std::string_view cat) const {
  return static_cast<size_t>(
      std::count_if(events_.begin(), events_.end(), [&](const Event& e) { return e.cat == cat; }));
}

namespace {

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += ch;
    }
  }
  out += '"';
}

void put_number(std::string& out, double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", std::isfinite(v) ? v : 0.0);
  out += b;
}

}  // namespace

std::string TraceRecorder::json() const {
  int64_t t0 = 0;
  if (!events_.empty())
    t0 = std::min_element(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
           return a.start_ns < b.start_ns;
         })->start_ns;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"mlstudio training"}})";
  std::vector<int32_t> threads;
  for (const Event& e : events_) threads.push_back(e.thread);
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  for (int32_t t : threads) {
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(t) +
           ",\"args\":{\"name\":\"" + "thread " + std::to_string(t) + "\"}}";
  }
  for (const Event& e : events_) {
    out += ",\n{\"name\":";
    put_string(out, e.name);
    out += ",\"cat\":";
    put_string(out, e.cat);
    out += ",\"ph\":\"";
    out += e.phase;
    out += "\",\"pid\":1,\"tid\":" + std::to_string(e.thread) + ",\"ts\":";
    put_number(out, static_cast<double>(e.start_ns - t0) / 1e3);
    if (e.phase == 'X') {
      out += ",\"dur\":";
      put_number(out, static_cast<double>(std::max<int64_t>(0, e.end_ns - e.start_ns)) / 1e3);
    }
    out += ",\"args\":{";
    bool first = true;
    for (const auto& [k, v] : e.args) {
      if (!first) out += ',';
      first = false;
      put_string(out, k);
      out += ':';
      put_string(out, v);
    }
    for (const auto& [k, v] : e.values) {
      if (!first) out += ',';
      first = false;
      put_string(out, k);
      out += ':';
      put_number(out, v);
    }
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

Result<void> TraceRecorder::write(const std::string& path) const {
  if (auto r = write_text_atomically(path, json()); !r)
    return make_error("cannot write the trace " + path + ": " + r.error().message);
  return {};
}

}  // namespace mls
