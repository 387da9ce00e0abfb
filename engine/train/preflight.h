// The pre-flight estimate: before a run, what a training step at this batch size will hold
// in memory (per category and per node), how long it will take, whether it fits, and the
// largest batch that does. Nothing is allocated: the step is planned, not compiled to run.
//
//   DeviceRates rates = measure_device_rates(cpu::backend());   // ~50 ms, once
//   Result<PreflightEstimate> e = preflight(build, config, cpu::backend(), rates);
//   e->total_bytes;          // the run's planned peak: parameters, optimizer state, plans
//   e->step_seconds;         // roofline estimate from the FLOPs and bytes of each kernel
//   e->fits; e->max_batch;   // against the device's free memory
//
// The memory figure is the compiler's own plan for the steps the trainer will run (the same
// passes and memory planner), so a static run's measured peak matches it unless something
// else allocates on the device. The time figure
// is a model: each kernel costs max(FLOPs / the device's GEMM rate, bytes / its copy rate)
// plus a launch, which is right within a small factor; the op profiler shows the truth.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/exec/memory_timeline.h"
#include "engine/train/trainer.h"

namespace mls {

// Throughputs of a device, measured.
struct DeviceRates {
  double flops_per_s = 0;  // a large f32 GEMM
  double bytes_per_s = 0;  // an elementwise add over 16 MB operands (read + write)
  double launch_s = 0;     // a kernel on one element
};
DeviceRates measure_device_rates(Backend& backend);

// Free memory for a new run: the host's MemAvailable for the CPU (and the cgroup's limit,
// when lower). Empty when it cannot be told.
std::optional<int64_t> free_device_memory(Backend& backend);

struct PreflightNode {
  std::string label;   // the document node ("fc1"), else the op
  int64_t bytes = 0;   // arena bytes its forward and backward kernels write
  double flops = 0;    // per step
  double seconds = 0;  // estimated per step
  int32_t kernels = 0;
};

// A compiled plan the run will keep: its arena, inputs and constants.
struct PreflightPlan {
  std::string what;  // "training step", "last partial batch", "validation", "test, last batch"
  int64_t batch = 0;
  bool training = true;
  int64_t bytes = 0;
};

struct PreflightEstimate {
  int64_t batch = 0;
  HeldBytes held;
  int64_t arena_bytes = 0;  // the training step's
  int64_t step_bytes = 0;   // the planned peak of a training step alone
  // The run's peak: parameters, optimizer state, the training plans it keeps (the training
  // step, a last partial batch's step) and the largest evaluation's plans (the validation's or
  // the test's: an evaluation builds its plans and frees them when it ends).
  int64_t total_bytes = 0;
  int64_t eval_bytes = 0;  // that largest evaluation's plans
  std::vector<PreflightPlan> plans;
  double flops = 0;          // per step
  double step_seconds = 0;   // estimated
  double epoch_seconds = 0;  // step_seconds x steps per epoch (when samples_per_epoch is given)
  std::vector<PreflightNode> nodes;  // by estimated time, largest first
  MemoryTimeline timeline;
  std::optional<int64_t> free_bytes;
  bool fits = true;
  int64_t max_batch = 0;  // the largest batch whose step fits in free_bytes (0: unknown)
};

struct PreflightOptions {
  std::optional<int64_t> free_bytes;  // default: free_device_memory(backend)
  int64_t samples_per_epoch = 0;      // the training split: its last partial batch has a plan
  int64_t eval_samples[2] = {0, 0};   // the validation and test splits (0: none)
  bool search_max_batch = true;
};

Result<PreflightEstimate> preflight(const ModelBuilder& build, const TrainConfig& config,
                                    Backend& backend, const DeviceRates& rates,
                                    const PreflightOptions& opt = {});

// The planned peak of a training step at `batch` alone (preflight()'s step_bytes).
Result<int64_t> planned_step_bytes(const ModelBuilder& build, const TrainConfig& config,
                                   Backend& backend, int64_t batch);

}  // namespace mls
