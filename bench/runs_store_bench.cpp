// The experiment database at scale (issue 28): how long `mlstudio runs list` and `runs
// compare` take on 10,000 runs of 1,000 steps and 20 params each, and what logging a metric
// value costs a training run.
//
//   build/bench/runs_store_bench --mlstudio build/app/mlstudio [--runs 10000] [--steps 1000]
//                                [--db /tmp/runs-bench.db] [--keep]
//
// 1. Generates the database through RunStore (the path training takes): per run 20 params,
//    `steps` train/loss points, and per-epoch val/loss and val/accuracy (10 epochs).
// 2. Times the CLI end to end (process start included), median of 5: a filtered, sorted
//    list; a compare of 10 runs.
// 3. Trains the two-blobs example at batch 1 for 1,000,000 steps with the store as the
//    metric sink and without one, alternating, and reports the time per logged value.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "runner/backends.h"
#include "runner/project.h"
#include "store/run_store.h"

using namespace mls;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs a shell command with its output discarded; returns the wall time, or -1 on failure.
double timed(const std::string& cmd) {
  auto t0 = Clock::now();
  const int rc = std::system((cmd + " >/dev/null 2>/tmp/runs_bench_err.txt").c_str());
  const double s = seconds_since(t0);
  if (rc != 0) {
    std::fprintf(stderr, "runs_store_bench: failed (%d): %s\n", rc, cmd.c_str());
    std::system("cat /tmp/runs_bench_err.txt >&2");
    return -1;
  }
  return s;
}

double median_of(const std::string& cmd, int n) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const double s = timed(cmd);
    if (s < 0) return -1;
    t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int generate(const std::string& db, int64_t runs, int64_t steps) {
  std::filesystem::remove(db);
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
  auto st = store::RunStore::open(db);
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 1;
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const char* optimizers[] = {"sgd", "adam", "adamw", "rmsprop"};
  auto t0 = Clock::now();
  for (int64_t r = 0; r < runs; ++r) {
    auto id = (*st)->begin_run({.name = "bench-" + std::to_string(r),
                                .project_path = "/bench/p.mls",
                                .project_hash = "0000000000000000",
                                .device = "cpu",
                                .seed = static_cast<uint64_t>(r)});
    if (!id) return std::fprintf(stderr, "%s\n", id.error().message.c_str()), 1;
    const double lr = std::pow(10.0, -4 + 3 * u(rng));
    std::vector<std::pair<std::string, std::string>> params = {
        {"lr", std::to_string(lr)}, {"batch_size", std::to_string(32 << (r % 4))}, {"optimizer", optimizers[r % 4]}};
    for (int p = 3; p < 20; ++p) params.emplace_back("p" + std::to_string(p), std::to_string(u(rng)));
    for (const auto& [k, v] : params)
      if (auto w = (*st)->log_param(*id, k, v); !w) return std::fprintf(stderr, "%s\n", w.error().message.c_str()), 1;
    double loss = 2.3;
    const double rate = lr * 5;
    for (int64_t s = 1; s <= steps; ++s) {
      loss = loss * (1 - rate / (1 + rate)) + 0.02 * u(rng);
      (*st)->log_metric("train/loss", s, loss);
    }
    for (int64_t e = 1; e <= 10; ++e) {
      (*st)->log_metric("val/loss", e, loss * (1 + 0.1 * u(rng)) + 0.05 * (10 - e));
      (*st)->log_metric("val/accuracy", e, 1 - loss / 3 * u(rng));
    }
    if (auto e = (*st)->end_run(*id, "finished"); !e) return std::fprintf(stderr, "%s\n", e.error().message.c_str()), 1;
    if ((r + 1) % 1000 == 0)
      std::fprintf(stderr, "\r  %lld of %lld runs (%.0f s)", static_cast<long long>(r + 1),
                   static_cast<long long>(runs), seconds_since(t0));
  }
  std::fprintf(stderr, "\n");
  const double s = seconds_since(t0);
  const double points = static_cast<double>(runs) * static_cast<double>(steps + 20);
  std::printf("generated %lld runs x (%lld steps + 20 epoch values), 20 params: %.1f s, %.2f M points/s\n",
              static_cast<long long>(runs), static_cast<long long>(steps), s, points / s / 1e6);
  return 0;
}

// Training with and without the store as the sink: the time each logged value costs.
int logging_cost() {
  runner::ProjectOptions po;
  po.path = std::string(MLS_SOURCE_DIR) + "/resources/examples/two-blobs-logistic.mls";
  po.sets = {"batch_size=1", "epochs=1250"};
  auto p = runner::open_project(po);
  if (!p) return std::fprintf(stderr, "%s\n", p.error().message.c_str()), 1;
  auto backend = runner::open_backend(*p);
  if (!backend) return std::fprintf(stderr, "%s\n", backend.error().message.c_str()), 1;
  const std::string db = "/tmp/runs_bench_logging.db";
  std::vector<double> with, without;
  int64_t values = 0;
  for (int round = 0; round < 2; ++round) {
    for (bool logging : {true, false}) {
      std::filesystem::remove(db);
      std::filesystem::remove(db + "-wal");
      std::filesystem::remove(db + "-shm");
      auto st = store::RunStore::open(db);
      if (!st) return std::fprintf(stderr, "%s\n", st.error().message.c_str()), 1;
      if (logging)
        if (auto b = (*st)->begin_run({.name = "logging", .device = "cpu"}); !b)
          return std::fprintf(stderr, "%s\n", b.error().message.c_str()), 1;
      Trainer t(**backend, p->builder(), p->train_config());
      auto t0 = Clock::now();
      auto r = t.fit({.train = *p->train, .sink = logging ? st->get() : nullptr});
      if (logging)
        if (auto f = (*st)->flush(); !f) return std::fprintf(stderr, "%s\n", f.error().message.c_str()), 1;
      const double s = seconds_since(t0);
      if (!r) return std::fprintf(stderr, "%s\n", r.error().message.c_str()), 1;
      if (logging) {
        auto keys = (*st)->metric_keys(1);
        values = 0;
        for (const auto& k : *keys) values += static_cast<int64_t>((*st)->metrics(1, k)->size());
      }
      (logging ? with : without).push_back(s);
    }
  }
  std::sort(with.begin(), with.end());
  std::sort(without.begin(), without.end());
  const double w = with[0], wo = without[0];
  std::printf("logging: %lld values from a 1,000,000-step run: %.2f s with the store, %.2f s without "
              "(best of 2 each): %.2f us per value (%.1f%% of the run)\n",
              static_cast<long long>(values), w, wo, 1e6 * (w - wo) / static_cast<double>(values),
              100.0 * (w - wo) / w);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mlstudio, db = "/tmp/runs-bench.db";
  int64_t runs = 10000, steps = 1000;
  bool keep = false, regenerate = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--mlstudio") mlstudio = next();
    else if (a == "--db") db = next();
    else if (a == "--runs") runs = std::stoll(next());
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--keep") keep = true;
    else if (a == "--reuse") regenerate = false;
    else {
      std::fprintf(stderr, "usage: runs_store_bench --mlstudio BIN [--runs N] [--steps N] [--db F] [--keep] [--reuse]\n");
      return 2;
    }
  }
  cpu::set_default_threads(1);
  runner::init_backends();
  if (regenerate)
    if (int rc = generate(db, runs, steps); rc != 0) return rc;
  std::printf("database: %s, %.1f MiB\n", db.c_str(),
              static_cast<double>(std::filesystem::file_size(db)) / (1 << 20));
  if (!mlstudio.empty()) {
    const std::string base = mlstudio + " runs";
    const double list = median_of(base + " list --db " + db +
                                      " --where \"params.lr < 0.001 AND metrics.val/loss.best < 0.6 "
                                      "OR params.optimizer = 'adam' AND params.batch_size >= 128\""
                                      " --sort metrics.val/loss.best --limit 50",
                                  5);
    std::string ids;
    for (int i = 0; i < 10; ++i) ids += " " + std::to_string(1 + i * (runs / 10));
    const double compare = median_of(base + " compare" + ids + " --db " + db, 5);
    const double list_all = median_of(base + " list --db " + db + " --sort -metrics.val/accuracy.max", 3);
    std::printf("runs list --where (AND, OR over params and metrics) --sort best --limit 50: %.0f ms\n", 1e3 * list);
    std::printf("runs list of all %lld runs sorted by a metric's max: %.0f ms\n", static_cast<long long>(runs), 1e3 * list_all);
    std::printf("runs compare of 10 runs (params, metrics, a text chart): %.0f ms\n", 1e3 * compare);
    std::printf("(median of 5 process runs each, process start included)\n");
  }
  if (int rc = logging_cost(); rc != 0) return rc;
  if (!keep) {
    std::filesystem::remove(db);
    std::filesystem::remove(db + "-wal");
    std::filesystem::remove(db + "-shm");
  }
  return 0;
}
