// Trains a project on one device and prints one JSON line: the median epoch (training pass
// only), samples/s, the test accuracy and final loss, the step losses. It needs no run store,
// Lua or GUI, so the engine-only build the GPU machine uses (-DMLSTUDIO_BUILD_APP=OFF) has it:
// bench/gpu_vs_torch.py runs it beside PyTorch on CUDA, scripts/device-check for accuracy.
//
//   build/bench/device_epochs resources/examples/fashion-mnist-mlp.mls --device cuda --epochs 3
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/backend_registry.h"
#include "gpu/backends.h"
#include "runner/project.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "device_epochs: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: device_epochs PROJECT.mls [--device D] [--epochs N] [--limit N] [--test-limit N] [--precision f32|bf16|f16]");
  mls::runner::ProjectOptions o;
  o.path = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device")
      o.device = value;
    else if (flag == "--epochs")
      o.epochs = std::atoll(value.c_str());
    else if (flag == "--limit")
      o.limit = std::atoll(value.c_str());
    else if (flag == "--precision")
      o.precision = value;
    else if (flag == "--test-limit")
      o.test_limit = std::atoll(value.c_str());
    else
      return fail("unknown option " + flag);
  }
  mls::gpu::init_backends();
  auto p = mls::runner::open_project(o);
  if (!p) return fail(p.error().message);
  auto backend = mls::runner::open_backend(*p);
  if (!backend) return fail(backend.error().message);
  mls::Trainer t(**backend, p->builder(), p->train_config());
  auto r = t.fit(*p->train, p->test.get(), nullptr);
  if (!r) return fail(r.error().message);
  std::vector<double> epochs = r->epoch_seconds;
  std::sort(epochs.begin(), epochs.end());
  const double median = epochs.empty() ? 0 : epochs[epochs.size() / 2];
  nlohmann::json j{{"device", p->doc.training.device},
                   {"epochs", r->epoch_seconds.size()},
                   {"epoch_seconds", median},
                   {"epoch_seconds_all", r->epoch_seconds},
                   {"samples_per_s", median > 0 ? static_cast<double>(p->train->num_samples()) / median : 0.0},
                   {"final_loss", r->final_loss},
                   {"test_accuracy", r->has_test ? r->test.accuracy : 0.0},
                   {"step_losses", r->step_losses},
                   {"peak_bytes", (*backend)->memory().stats().total_peak}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
