// What the training debugger costs a step (issue 29): the MLP and LeNet-5 examples trained a
// fixed number of steps plain, with breakpoints armed (`nan,spike:3`), with the health
// instruments every 10 steps (the gradient SNR included where the trainer measures it), with
// health without the SNR, and with health armed but never due (the per-step part of its cost),
// alternating in one process, several rounds. Prints each model's median ms per step, the
// ratio to the plain run and the overhead, then one JSON line.
// "paired": the median over rounds of each run against the same round's plain run (steadier
// on a shared machine, where a neighbour's load moves whole rounds). MLS_THREADS=1 steadier
// still.
//
//   build/bench/debugger_overhead [--steps 300] [--rounds 5] [--warm 20] [PROJECT.mls ...]
//
// A step's time is taken between the trainer's progress callbacks (after each step's update),
// from step `warm` to the last, so compiling the plans and the first steps are left out; a
// health measurement every 10 steps falls inside that window. The training split is cut to
// steps × batch samples (--limit), no validation or test pass runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/backend_registry.h"
#include "engine/train/breakpoints.h"
#include "gpu/backends.h"
#include "runner/project.h"

using namespace mls;

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "debugger_overhead: %s\n", message.c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double load1() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// health_every 0: off; -1: armed but never due (what arming health costs every step).
struct Variant {
  const char* name;
  bool breaks;
  int64_t health_every;
  bool snr;
};
constexpr Variant kVariants[] = {{"plain", false, 0, false},
                                 {"nan,spike:3", true, 0, false},
                                 {"health/10", false, 10, true},
                                 {"health/10 no SNR", false, 10, false},
                                 {"health never due", false, -1, false}};
constexpr int kNumVariants = 5;

struct Run {
  double ms_per_step = 0;
  int64_t steps = 0, health_samples = 0, snr_samples = 0;
  bool broke = false;
  std::string snr_note;
};

Run run_once(Backend& backend, runner::Project& p, const Variant& v, int64_t steps, int64_t warm) {
  TrainConfig c = p.train_config();
  c.epochs = 1;
  c.max_steps = steps;
  if (v.breaks) {
    auto b = parse_breakpoints("nan,spike:3");
    if (!b) fail(b.error().message);
    c.breaks = *b;
  }
  if (v.health_every != 0) {
    c.health.every = v.health_every > 0 ? v.health_every : steps + 1000;
    if (!v.snr) c.health.snr_max_work = 0;
  }
  Run run;
  std::vector<std::pair<int64_t, std::chrono::steady_clock::time_point>> marks;
  marks.reserve(static_cast<size_t>(steps) + 1);
  FitInputs in{.train = *p.train};
  in.progress = [&](const ProgressInfo& pi) {
    if (!pi.epoch_done) marks.emplace_back(pi.step, std::chrono::steady_clock::now());
  };
  in.health = [&](const HealthSample& s) {
    ++run.health_samples;
    if (s.grad_snr >= 0) ++run.snr_samples;
    if (!s.snr_note.empty()) run.snr_note = s.snr_note;
  };
  Trainer t(backend, p.builder(), c);
  auto r = t.fit(in);
  if (!r) fail(p.path + ": " + r.error().message);
  run.broke = r->breakpoint.has_value();
  auto first = std::find_if(marks.begin(), marks.end(), [&](auto& m) { return m.first >= warm; });
  if (first == marks.end() || first + 1 >= marks.end())
    fail(p.path + ": fewer than " + std::to_string(warm + 2) + " steps ran (" + v.name + ")");
  const auto& last = marks.back();
  run.steps = last.first - first->first;
  run.ms_per_step = std::chrono::duration<double, std::milli>(last.second - first->second).count() /
                    static_cast<double>(run.steps);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 300, warm = 20;
  int rounds = 5;
  std::vector<std::string> projects;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--steps" || a == "--rounds" || a == "--warm") && i + 1 < argc) {
      const long long v = std::atoll(argv[++i]);
      if (a == "--steps") steps = v;
      if (a == "--warm") warm = v;
      if (a == "--rounds") rounds = static_cast<int>(v);
    } else if (a.starts_with("--")) {
      fail("usage: debugger_overhead [--steps N] [--rounds R] [--warm W] [PROJECT.mls ...]");
    } else {
      projects.push_back(a);
    }
  }
  if (projects.empty())
    projects = {std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls",
                std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-lenet.mls"};
  if (rounds < 1 || steps < warm + 2 || warm < 1) fail("need --rounds >= 1, --steps >= --warm + 2");
  gpu::init_backends();
  const double load_before = load1();
  nlohmann::json models = nlohmann::json::array();
  std::printf("debugger overhead: %lld steps a run (timed from step %lld), %d rounds, load %.2f\n",
              static_cast<long long>(steps), static_cast<long long>(warm), rounds, load_before);
  for (const std::string& path : projects) {
    runner::ProjectOptions o;
    o.path = path;
    o.epochs = 1;
    auto p = runner::open_project(o);
    if (!p) fail(p.error().message);
    const int64_t batch = p->doc.training.batch_size;
    o.limit = steps * batch;
    p = runner::open_project(o);
    if (!p) fail(p.error().message);
    auto backend = runner::open_backend(*p);
    if (!backend) fail(backend.error().message);
    run_once(**backend, *p, kVariants[0], warm + 2, 1);  // warm: pages touched, kernels loaded
    std::vector<double> ms[kNumVariants];
    Run seen[kNumVariants];
    for (int round = 0; round < rounds; ++round)
      for (int k = 0; k < kNumVariants; ++k) {
        // Rotate which goes first, so a drift in the machine's speed falls on all.
        const int vi = (k + round) % kNumVariants;
        Run r = run_once(**backend, *p, kVariants[vi], steps, warm);
        ms[vi].push_back(r.ms_per_step);
        seen[vi] = r;
      }
    const double plain = median(ms[0]);
    std::printf("\n%s (%s, batch %lld)\n", p->doc.name.c_str(), p->doc.training.device.c_str(),
                static_cast<long long>(batch));
    std::printf("  %-18s %8s %12s %7s %9s %10s  %s\n", "run", "ms/step", "min-max", "ratio",
                "overhead", "paired", "measured");
    nlohmann::json rows = nlohmann::json::array();
    for (int vi = 0; vi < kNumVariants; ++vi) {
      const double m = median(ms[vi]);
      const auto [lo, hi] = std::minmax_element(ms[vi].begin(), ms[vi].end());
      const Run& r = seen[vi];
      // Each round's run against that round's plain run, the median of those ratios.
      std::vector<double> per_round;
      for (size_t k = 0; k < ms[vi].size(); ++k) per_round.push_back(ms[vi][k] / ms[0][k]);
      const double paired = median(per_round);
      std::string what = r.broke ? "BREAKPOINT FIRED" : "";
      if (kVariants[vi].health_every != 0)
        what = std::to_string(r.health_samples) + " health samples, " +
               std::to_string(r.snr_samples) + " with SNR" +
               (r.snr_note.empty() ? "" : " (" + r.snr_note + ")");
      char range[32];
      std::snprintf(range, sizeof range, "%.2f-%.2f", *lo, *hi);
      std::printf("  %-18s %8.3f %12s %7.3f %+8.1f%% %10.3f  %s\n", kVariants[vi].name, m, range,
                  m / plain, 100.0 * (m / plain - 1), paired, what.c_str());
      rows.push_back({{"run", kVariants[vi].name},
                      {"ms_per_step", m},
                      {"ms_per_step_all", ms[vi]},
                      {"ratio", m / plain},
                      {"paired_ratio", paired},
                      {"health_samples", r.health_samples},
                      {"snr_samples", r.snr_samples},
                      {"breakpoint_fired", r.broke}});
    }
    models.push_back({{"project", p->doc.name}, {"batch", batch}, {"runs", rows}});
    std::fflush(stdout);
  }
  nlohmann::json j{{"bench", "debugger_overhead"},
                   {"steps", steps},
                   {"warm", warm},
                   {"rounds", rounds},
                   {"load_before", load_before},
                   {"load_after", load1()},
                   {"models", models}};
  std::printf("\n%s\n", j.dump().c_str());
  return 0;
}
