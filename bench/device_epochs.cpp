// Trains a project on one device and prints one JSON line: the median epoch (training pass
// only), samples/s, the test accuracy and final loss, the step losses. It needs no run store,
// Lua or GUI, so the engine-only build the GPU machine uses (-DMLSTUDIO_BUILD_APP=OFF) has it:
// bench/gpu_vs_torch.py runs it beside PyTorch on CUDA, scripts/device-check for accuracy.
// Built with MPI and started by a launcher as one of N ranks, it trains data-parallel (rank r
// on GPU r mod count with --device cuda) and rank 0 prints the line, with the world size and
// communication's share of the training time: scripts/device-check dist measures scaling on a
// machine with more cores than this one.
//
//   build/bench/device_epochs resources/examples/fashion-mnist-mlp.mls --device cuda --epochs 3
//   MLS_THREADS=1 mpirun -np 4 build/bench/device_epochs P.mls --epochs 2
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/backend_registry.h"
#include "engine/train/collective.h"
#include "gpu/backends.h"
#include "runner/project.h"
#include "runner/ranks.h"
#ifdef MLS_HAVE_MPI
#include "engine/dist/mpi_collective.h"
#endif

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
  std::unique_ptr<mls::Collective> job;
  if (const mls::LaunchEnv env = mls::launch_env(); env.size > 1) {
#ifdef MLS_HAVE_MPI
    auto c = mls::MpiCollective::init(&argc, &argv);
    if (!c) return fail(c.error().message);
    job = std::move(*c);
#else
    return fail(mls::runner::no_mpi_message(env));
#endif
  }
  mls::gpu::init_backends();
  if (job && o.device && *o.device != "cpu") {
    const int count = mls::gpu::device_count(o.device->substr(0, o.device->find(':')));
    o.device = mls::runner::rank_device(*o.device, job->rank(), count);
  }
  auto p = mls::runner::open_project(o);
  if (!p) return fail(p.error().message);
  auto backend = mls::runner::open_backend(*p);
  if (!backend) return fail(backend.error().message);
  mls::Trainer t(**backend, p->builder(), p->train_config());
  t.set_collective(job.get());
  auto r = t.fit({.train = *p->train, .validation = p->validation.get(), .test = p->test.get()});
  if (!r) {
    if (job) {
      std::fprintf(stderr, "device_epochs: rank %d: %s\n", job->rank(), r.error().message.c_str());
      job->abort_job(1);
    }
    return fail(r.error().message);
  }
  if (job && job->rank() != 0) return 0;
  std::vector<double> epochs = r->epoch_seconds;
  std::sort(epochs.begin(), epochs.end());
  const double median = epochs.empty() ? 0 : epochs[epochs.size() / 2];
  nlohmann::json j{{"device", p->doc.training.device},
                   {"epochs", r->epoch_seconds.size()},
                   {"epoch_seconds", median},
                   {"epoch_seconds_all", r->epoch_seconds},
                   {"samples_per_s", median > 0 ? static_cast<double>(p->train->num_samples()) / median : 0.0},
                   {"world_size", r->world_size},
                   {"comm_seconds", r->comm_seconds},
                   {"train_seconds", [&] {
                      double s = 0;
                      for (double e : r->epoch_seconds) s += e;
                      return s;
                    }()},
                   {"final_loss", r->final_loss},
                   {"test_accuracy", r->has_test ? r->test.accuracy : 0.0},
                   {"step_losses", r->step_losses},
                   {"peak_bytes", (*backend)->memory().stats().total_peak}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
