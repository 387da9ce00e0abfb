// `mlstudio compare-devices P.mls [--devices cpu,vulkan,cuda] [--run ID] [--db F] [--batch K]
// [--threshold X] [--metric rel|abs|ulps] [--json]`: one training step on each device from the
// same weights and batch, every node's forward output and gradient compared with a float64
// reference (runner/device_compare.h). A device this build or machine lacks is listed as not
// compared, with the reason; an unknown device name, a missing project or a run without a
// checkpoint is an error (exit 1).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>

#include "app/commands.h"
#include "engine/core/backend_registry.h"
#include "runner/checkpoints.h"
#include "runner/device_compare.h"

namespace mls::app {

CLI::App* add_compare_devices_command(CLI::App& app, CompareDevicesOptions& o) {
  auto* c = app.add_subcommand(
      "compare-devices",
      "One training step on each device against a float64 reference, node by node: max abs, "
      "relative and ulps differences of every forward output and gradient");
  c->add_option("project", o.project.path, "The project (.mls)")->required();
  c->add_option("--devices", o.devices, "Comma-separated devices (cpu, vulkan, cuda, vulkan:1)")
      ->capture_default_str();
  c->add_option("--run", o.run_id,
                "Start from this run's last checkpoint (default: the project's initialisation)")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  c->add_option("--db", o.db, "The run database (SQLite), with --run")->capture_default_str();
  c->add_option("--batch", o.batch_size, "Batch size of the step (default: the project's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  c->add_option("--threshold", o.threshold,
                "Mark rows whose difference (--metric) exceeds this with '!'")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--metric", o.metric, "rel, abs or ulps: what --threshold and the summary rank by")
      ->check(CLI::IsMember({"rel", "abs", "ulps"}))
      ->capture_default_str();
  c->add_option("--seed", o.project.seed,
                "Override the project's seed (initialisation, shuffling)");
  c->add_option("--advance", o.advance,
                "Train this many steps on the CPU first (as the run does: its schedule and data "
                "order) and compare the next step")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  c->add_option("--limit", o.project.limit, "Load only the first N training samples");
  c->add_flag("--json", o.json, "One JSON line instead of the table");
  return c;
}

int compare_devices_command(const CompareDevicesOptions& o) {
  runner::CompareOptions co;
  co.devices.clear();
  std::string cur;
  for (size_t i = 0; i <= o.devices.size(); ++i) {
    if (i == o.devices.size() || o.devices[i] == ',') {
      if (cur.empty()) return fail("--devices: an empty name in '" + o.devices + "'");
      co.devices.push_back(cur);
      cur.clear();
    } else if (o.devices[i] != ' ') {
      cur += o.devices[i];
    }
  }
  co.batch_size = o.batch_size;
  co.advance = o.advance;
  ProjectOptions po = o.project;
  po.test_limit = 1;  // the test split is not used
  auto project = open_project(po);
  if (!project) return fail(project.error().message);
  Checkpoint start;
  if (o.run_id > 0) {
    // The run's last checkpoint, through a trainer of this model (as eval does).
    auto cpu = backend_registry().open("cpu");
    if (!cpu) return fail(cpu.error().message);
    Trainer t(**cpu, project->builder(), project->train_config());
    auto used = runner::restore_run(t, o.db, o.run_id, "last");
    if (!used) return fail(used.error().message);
    auto st = t.state();
    if (!st) return fail(st.error().message);
    start = std::move(*st);
    co.start = &start;
    co.start_name = "run " + std::to_string(o.run_id) + " " + *used;
  }
  auto r = runner::compare_devices(*project, co);
  if (!r) return fail(r.error().message);
  if (o.json) {
    std::printf("%s\n", runner::compare_json(*r).c_str());
    return 0;
  }
  runner::TableOptions t;
  t.threshold = o.threshold;
  t.metric = o.metric == "abs"    ? runner::DiffMetric::Abs
             : o.metric == "ulps" ? runner::DiffMetric::Ulps
                                  : runner::DiffMetric::Rel;
  std::fputs(terminal_safe(runner::format_compare_table(*r, t)).c_str(), stdout);
  return 0;
}

}  // namespace mls::app
