// A run database with 40 runs made through RunStore, and the same facts as plain C++ so a
// test can count by hand what a filter or a sort must give.
//
//   TempDir dir;
//   std::string db = make_runs_db(dir);       // dir.file("runs.db")
//   int n = count_runs([](const FixtureRun& r) { return r.lr_num && *r.lr_num < 0.01; });
#pragma once

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/run_store.h"

#include "tests/store/fixtures.h"

namespace mls::store::test {

constexpr int kFixtureRuns = 40;

struct FixtureRun {
  int64_t id = 0;  // 1-based, in order
  std::string name, device, status, experiment, lr, batch, opt;
  std::optional<double> lr_num;
  bool keep = false;         // tag keep (no value)
  std::string group;         // tag group=a|b
  double val_loss_best = 0;  // min over epochs 1..3
  double val_loss_latest = 0;
  double test_acc = 0;
  int64_t seed = 0;
};

inline FixtureRun fixture_run(int i) {
  static const char* lrs[] = {"0.1", "0.01", "0.001", "1e-4"};
  FixtureRun r;
  r.id = i + 1;
  r.name = "run-" + std::to_string(i);
  r.device = i % 2 ? "cuda:0" : "cpu";
  r.seed = i;
  r.lr = i == 5 ? "auto" : lrs[i % 4];
  if (i != 5) r.lr_num = std::stod(r.lr);
  r.batch = i % 2 == 0 ? "32" : "64";
  r.opt = i % 3 == 0 ? "adam" : "sgd";
  r.keep = i % 5 == 0;
  r.group = i % 2 == 0 ? "a" : "b";
  r.experiment = i >= 30 ? "exp2" : "Default";
  r.status = i == 39 ? "running" : i % 7 == 3 ? "failed" : "finished";
  // val/loss at epochs 1..3: 1/e + i/100, except every 4th run gets worse at epoch 3.
  double v[3];
  for (int e = 1; e <= 3; ++e) v[e - 1] = 1.0 / e + i / 100.0;
  if (i % 4 == 0) v[2] = 2.0 + i / 100.0;
  r.val_loss_best = std::min({v[0], v[1], v[2]});
  r.val_loss_latest = v[2];
  r.test_acc = i / 100.0;
  return r;
}

inline std::vector<FixtureRun> fixture_runs() {
  std::vector<FixtureRun> out;
  for (int i = 0; i < kFixtureRuns; ++i) out.push_back(fixture_run(i));
  return out;
}

inline int count_runs(const std::function<bool(const FixtureRun&)>& pred) {
  int n = 0;
  for (const FixtureRun& r : fixture_runs()) n += pred(r) ? 1 : 0;
  return n;
}

inline std::string make_runs_db(TempDir& dir) {
  std::string path = dir.file("runs.db");
  auto st = RunStore::open(path);
  REQUIRE(st.ok());
  RunStore& s = **st;
  for (const FixtureRun& r : fixture_runs()) {
    auto id = s.begin_run({.name = r.name,
                           .project_path = "/p/" + r.name + ".mls",
                           .project_hash = "h" + std::to_string(r.id),
                           .device = r.device,
                           .seed = static_cast<uint64_t>(r.seed),
                           .experiment = r.experiment == "Default" ? "" : r.experiment});
    REQUIRE(id.ok());
    REQUIRE(*id == r.id);
    REQUIRE(s.log_param(*id, "lr", r.lr).ok());
    REQUIRE(s.log_param(*id, "batch_size", r.batch).ok());
    REQUIRE(s.log_param(*id, "optimizer", r.opt).ok());
    for (int step = 1; step <= 10; ++step)
      s.log_metric("train/loss", step, (r.id) / static_cast<double>(step));
    int i = static_cast<int>(r.id - 1);
    for (int e = 1; e <= 3; ++e)
      s.log_metric("val/loss", e, i % 4 == 0 && e == 3 ? 2.0 + i / 100.0 : 1.0 / e + i / 100.0);
    s.log_metric("test/accuracy", 10, r.test_acc);
    if (r.keep) REQUIRE(s.set_tag(*id, "keep").ok());
    REQUIRE(s.set_tag(*id, "group", r.group).ok());
    if (r.status != "running") REQUIRE(s.end_run(*id, r.status).ok());
  }
  REQUIRE(s.flush().ok());
  return path;
}

}  // namespace mls::store::test
