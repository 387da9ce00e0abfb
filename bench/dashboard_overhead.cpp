// What the live instruments cost a run: the MLP example trained headless and with the
// Instruments tab open and drawing (30 frames a second, the dashboard), alternately, on the
// same process and data. Reports each run's median epoch (the training pass) and the ratio.
//
//   xvfb-run -a -s "-screen 0 1600x1000x24" build/bench/dashboard_overhead [PROJECT or ""] [PAIRS]
//
// With the instruments on, the trainer also times every kernel (the op profiler's data) and
// publishes a point per step: that is part of what is measured.
#include <QApplication>
#include <QElapsedTimer>
#include <QTest>
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "editor/instruments.h"
#include "engine/core/op.h"
#include "runner/training_run.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;

namespace {

// Trains on a worker thread while this thread runs the event loop (as the editor does).
double run_once(const std::string& project, editor::InstrumentsPanel* panel, int64_t* frames) {
  runner::RunRequest req;
  req.project.path = project;
  req.project.epochs = 3;
  req.db = "/tmp/mls-dashboard-bench.db";
  std::shared_ptr<Telemetry> tm;
  if (panel) {
    tm = std::make_shared<Telemetry>();
    req.telemetry = tm.get();
    panel->setLive(tm);
  }
  Result<runner::RunOutcome> out = make_error("not run");
  bool done = false;
  const int64_t f0 = panel ? panel->frameCount() : 0;
  std::thread worker([&] {
    out = runner::run_training(req);
    done = true;
  });
  while (!done) QTest::qWait(5);
  worker.join();
  if (!out) {
    std::fprintf(stderr, "dashboard_overhead: %s\n", out.error().message.c_str());
    std::exit(1);
  }
  if (frames) *frames = panel ? panel->frameCount() - f0 : 0;
  return out->result.median_epoch_seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  cpu::init();
  const std::string project =
      argc > 1 && argv[1][0]
          ? argv[1]
          : std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls";
  const int pairs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  editor::InstrumentsPanel panel;
  panel.resize(1200, 800);
  panel.setFrameRate(30);
  panel.show();
  (void)QTest::qWaitForWindowExposed(&panel);
  std::vector<double> headless, live;
  double fps_sum = 0;
  run_once(project, nullptr, nullptr);  // warm: the data set read once, pages touched
  for (int i = 0; i < pairs; ++i) {
    // Alternate which goes first, so a drift in the machine's speed falls on both.
    for (int k = 0; k < 2; ++k) {
      const bool with_panel = (i + k) % 2 == 1;
      int64_t frames = 0;
      QElapsedTimer t;
      t.start();
      const double e = run_once(project, with_panel ? &panel : nullptr, &frames);
      (with_panel ? live : headless).push_back(e);
      if (with_panel)
        fps_sum += 1e3 * static_cast<double>(frames) / static_cast<double>(t.elapsed());
      std::printf("%-9s epoch %.3f s%s\n", with_panel ? "live" : "headless", e,
                  with_panel ? (" (" + std::to_string(frames) + " frames)").c_str() : "");
      std::fflush(stdout);
    }
  }
  const double h = median(headless), l = median(live);
  std::printf(
      "median epoch: headless %.3f s, instruments live %.3f s (%.1f frames/s): ratio %.3f "
      "(%+.1f%%)\n",
      h, l, fps_sum / pairs, l / h, 100.0 * (l / h - 1));
  return 0;
}
