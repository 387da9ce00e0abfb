// compare-devices without the run store, Lua or the GUI: what the engine-only build on the GPU
// machine runs (scripts/device-check compare). The same comparison as `mlstudio
// compare-devices` (runner/device_compare.h); a checkpoint file stands for --run.
//
//   build/bench/device_compare resources/examples/fashion-mnist-mlp.mls --devices cpu,vulkan,cuda
//   build/bench/device_compare P.mls --checkpoint mlstudio-runs.checkpoints/run-3/last.ckpt --json
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/core/backend_registry.h"
#include "engine/train/checkpoint.h"
#include "gpu/backends.h"
#include "runner/device_compare.h"
#include "runner/project.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "device_compare: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    return fail(
        "usage: device_compare PROJECT.mls [--devices cpu,vulkan,cuda] [--batch K] [--seed S] "
        "[--limit N] [--checkpoint FILE] [--advance STEPS] [--threshold X] [--metric rel|abs|ulps] "
        "[--json]");
  mls::runner::ProjectOptions o;
  o.path = argv[1];
  o.test_limit = 1;
  mls::runner::CompareOptions co;
  mls::runner::TableOptions t;
  std::string checkpoint;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) return fail(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--devices") {
      co.devices.clear();
      size_t at = 0;
      while (at <= value.size()) {
        const size_t comma = value.find(',', at);
        co.devices.push_back(value.substr(at, comma == std::string::npos ? comma : comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (flag == "--batch") {
      co.batch_size = std::atoll(value.c_str());
    } else if (flag == "--seed") {
      o.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--limit") {
      o.limit = std::atoll(value.c_str());
    } else if (flag == "--advance") {
      co.advance = std::atoll(value.c_str());
    } else if (flag == "--checkpoint") {
      checkpoint = value;
    } else if (flag == "--threshold") {
      t.threshold = std::atof(value.c_str());
    } else if (flag == "--metric") {
      if (value != "rel" && value != "abs" && value != "ulps")
        return fail("--metric: rel, abs or ulps");
      t.metric = value == "abs"    ? mls::runner::DiffMetric::Abs
                 : value == "ulps" ? mls::runner::DiffMetric::Ulps
                                   : mls::runner::DiffMetric::Rel;
    } else {
      return fail("unknown option " + flag);
    }
  }
  mls::gpu::init_backends();
  auto p = mls::runner::open_project(o);
  if (!p) return fail(p.error().message);
  mls::Checkpoint start;
  if (!checkpoint.empty()) {
    auto c = mls::read_checkpoint(checkpoint);
    if (!c) return fail(c.error().message);
    start = std::move(*c);
    co.start = &start;
    co.start_name = checkpoint;
  }
  auto r = mls::runner::compare_devices(*p, co);
  if (!r) return fail(r.error().message);
  if (json)
    std::printf("%s\n", mls::runner::compare_json(*r).c_str());
  else
    std::fputs(mls::runner::format_compare_table(*r, t).c_str(), stdout);
  return 0;
}
