// The training loop: static (a compiled plan per batch size) or eager (the same model graph
// replayed op by op with a tape), fed by a BatchSource, reporting to a MetricSink.
//
//   ModelBuilder build = [&](int64_t batch) { return lower(doc, batch); };  // a ModelGraph
//   Trainer t(cpu, build, {.epochs = 5, .batch_size = 128, .opt = {.type = "sgd", .lr = 0.05,
//                                                                   .momentum = 0.9}});
//   Result<TrainResult> r = t.fit(train, &test, &store, on_progress);
//
// Parameters are initialised once, from the seed, and shared by every plan.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/exec/compiled_plan.h"
#include "engine/ir/graph.h"
#include "engine/train/data_source.h"
#include "engine/train/metrics.h"
#include "engine/train/optimizer.h"

namespace mls {

// A model's graph for one batch size: inputs [batch, ...sample], labels [batch] (i64),
// logits [batch, classes], and a scalar loss. Parameters are the graph's params, in order.
struct ModelGraph {
  Graph graph;
  Ref input, labels, logits, loss;
};
using ModelBuilder = std::function<Result<ModelGraph>(int64_t batch)>;

enum class ExecMode { Static, Eager };

struct TrainConfig {
  int64_t epochs = 1;
  int64_t batch_size = 128;
  uint64_t seed = 0;
  ExecMode mode = ExecMode::Static;
  OptimizerConfig opt;
  int64_t eval_batch_size = 1000;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
};

struct ProgressInfo {
  int64_t epoch = 0, epochs = 0;  // epoch counts from 1
  int64_t batch = 0, batches = 0;
  double loss = 0;               // running mean over this epoch
  double samples_per_s = 0;
  double eta_s = 0;              // for the whole run
  bool epoch_done = false;
};
using ProgressFn = std::function<void(const ProgressInfo&)>;

struct EvalResult {
  double loss = 0, accuracy = 0;
  double macro_f1 = 0;  // unweighted mean of the per-class F1 scores
  int64_t samples = 0;
  ConfusionMatrix confusion{1};
};

struct TrainResult {
  std::vector<double> step_losses;
  std::vector<double> epoch_losses;
  std::vector<double> epoch_seconds;  // training passes only
  double final_loss = 0;              // mean training loss of the last epoch
  EvalResult test;
  bool has_test = false;
  double seconds = 0;
  double median_epoch_seconds = 0;
  double samples_per_s = 0;
  int64_t peak_bytes = 0;       // the allocator's peak over the run
  int64_t planned_arena_bytes = 0;
  int64_t steps = 0;
  bool interrupted = false;
};

class Trainer {
 public:
  Trainer(Backend& backend, ModelBuilder build, TrainConfig config);
  ~Trainer();

  // Builds the model at the training batch size and initialises the parameters.
  Result<void> init();
  Result<TrainResult> fit(BatchSource& train, BatchSource* test, MetricSink* sink,
                          const ProgressFn& progress = {}, const std::atomic<bool>* cancel = nullptr);
  // One optimisation step on a batch; returns the loss.
  Result<double> train_step(const HostBatch& batch);
  Result<EvalResult> evaluate(BatchSource& data);

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return param_names_; }
  const TrainConfig& config() const { return config_; }
  // The training plan for a batch size (built on first use), e.g. to print or inspect.
  Result<const CompiledPlan*> training_plan(int64_t batch);
  // Times every kernel of the static plans built from now on (CompiledPlan::step_times).
  void set_profiling(bool on) { profiling_ = on; }

 private:
  struct StepPlan;
  Result<StepPlan*> plan_for(int64_t batch, bool training);
  Result<double> eager_step(const HostBatch& batch);

  Backend& backend_;
  ModelBuilder build_;
  TrainConfig config_;
  Shape sample_shape_;
  int64_t num_classes_ = 0;
  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::unique_ptr<Optimizer> opt_;
  std::map<std::pair<int64_t, bool>, std::unique_ptr<StepPlan>> plans_;
  bool profiling_ = false;
};

}  // namespace mls
