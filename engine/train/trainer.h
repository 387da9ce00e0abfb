// The training loop: static (a compiled plan per batch size) or eager (the same model graph
// replayed op by op with a tape), fed by BatchSources, reporting to a MetricSink.
//
//   ModelBuilder build = [&](int64_t batch, bool training) { return lower(doc, data, batch,
//   training, path); }; Trainer t(cpu, build, {.epochs = 5, .batch_size = 128, .opt = {.type =
//   "sgd", .lr = 0.05,
//                                                                   .momentum = 0.9}});
//   FitInputs in{.train = train, .validation = &val, .test = &test, .sink = &store};
//   in.on_epoch_end = [&](const EpochReport& r) { return save(t.state(), "last.ckpt"); };
//   Result<TrainResult> r = t.fit(in);
//
// Parameters are initialised once, from the seed, and shared by every plan. A classification
// model has i64 labels and is scored with a confusion matrix; a model whose targets are f32
// values is scored with MAE, RMSE and R².
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/memory_timeline.h"
#include "engine/exec/trace.h"
#include "engine/ir/graph.h"
#include "engine/train/breakpoints.h"
#include "engine/train/checkpoint.h"
#include "engine/train/data_source.h"
#include "engine/train/health.h"
#include "engine/train/metrics.h"
#include "engine/train/mixed_precision.h"
#include "engine/train/model_graph.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "engine/train/step_graph.h"

namespace mls {

class StepWatch;
class Collective;

enum class ExecMode { Static, Eager };

// Stops training when the monitored validation metric has not improved by more than
// min_delta for `patience` epochs (0: never stops early).
struct EarlyStopConfig {
  int64_t patience = 0;
  std::string monitor = "loss";  // a validation metric: "loss" (lower is better) or "accuracy"
  double min_delta = 0.0;
};

struct TrainConfig {
  int64_t epochs = 1;  // in all: a resumed run continues up to this epoch
  int64_t batch_size = 128;
  uint64_t seed = 0;
  ExecMode mode = ExecMode::Static;
  OptimizerConfig opt;
  ScheduleConfig schedule;       // its lr is taken from opt.lr
  double clip_grad_norm = 0.0;   // > 0: clip the global gradient norm before each step
  double clip_grad_value = 0.0;  // > 0: clamp every gradient element
  EarlyStopConfig early_stop;
  int64_t eval_batch_size = 1000;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
  // Stop after this many epochs in all (0: train to `epochs`), e.g. to continue later from
  // a checkpoint; schedules still span `epochs`, so the resumed run matches an
  // uninterrupted one.
  int64_t stop_after_epochs = 0;
  // Gradient checkpointing of the training plans (exec/checkpointing.h): -1 off,
  // 0 the sqrt(n) scheme, > 0 a budget in bytes for the planned arena (an error below the
  // smallest achievable one). Trades recomputation for activation memory.
  int64_t checkpoint_budget_bytes = -1;
  // Mixed precision, the one switch: BF16 or F16 compute the matrix products in that
  // precision (f32 results, f32 master weights) with dynamic loss scaling
  // (engine/train/mixed_precision.h).
  Precision precision = Precision::F32;
  LossScaleConfig loss_scale;
  // Nodes placed on the host (the project's per-node "device": "cpu"), by label: on a GPU
  // their forward and backward run on the CPU inside the static plans (PlanOptions).
  std::vector<std::string> host_nodes;
  // The debugger (engine/train/breakpoints.h): stop before the update of a step that goes
  // wrong, naming the first node at fault (TrainResult::breakpoint).
  Breakpoints breaks;
  // Health instruments every N steps (engine/train/health.h): metrics and FitInputs::health.
  HealthConfig health;
  // Data-parallel: the gradients are all-reduced in buckets of about this many bytes, started
  // in the order the backward pass writes them (0: PyTorch DDP's 1 MiB first bucket, then
  // 25 MiB).
  int64_t bucket_bytes = 0;
};

// The settings a run records in the experiment store, as text: epochs, batch_size,
// optimizer, lr, momentum, weight_decay, schedule, precision. `--run`, the editor and
// `mls.train` log these, so runs from each compare key for key.
std::vector<std::pair<std::string, std::string>> config_params(const TrainConfig& c);

struct ProgressInfo {
  int64_t epoch = 0, epochs = 0;  // epoch counts from 1
  int64_t batch = 0, batches = 0;
  double loss = 0;  // running mean over this epoch
  double samples_per_s = 0;
  double eta_s = 0;          // for the whole run
  double data_fraction = 0;  // of this epoch's time spent waiting for batches
  bool epoch_done = false;
  double loss_scale = 1;      // mixed precision: the current loss scale
  int64_t skipped_steps = 0;  // and the steps skipped for non-finite gradients so far
  double lr = 0;              // of the last step
  int64_t step = 0;           // steps done in all
  double step_loss = 0;       // the last step's loss (loss is the epoch's running mean)
  // Data-parallel (Trainer::set_collective): samples_per_s is the job's, over every rank;
  // this is the share of the epoch's time spent inside the collective (0 on one rank).
  double comm_fraction = 0;
};
using ProgressFn = std::function<void(const ProgressInfo&)>;

struct EvalResult {
  bool regression = false;
  double loss = 0;
  // Classification.
  double accuracy = 0;
  double macro_f1 = 0;  // unweighted mean of the per-class F1 scores
  double top5 = 0;      // top-5 accuracy (1 when there are 5 classes or fewer)
  ConfusionMatrix confusion{1};
  // Regression.
  RegressionMetrics values;
  int64_t samples = 0;
  // The figure to monitor: "loss", "accuracy" (classification), "mae", "rmse" or "r2".
  Result<double> metric(const std::string& name) const;
};

// What the trainer reports after each epoch (after validation, before the next epoch).
struct EpochReport {
  int64_t epoch = 0;
  double train_loss = 0;
  double seconds = 0;
  bool has_validation = false;
  EvalResult validation;
  bool improved = false;  // the monitored validation metric is the best so far
  bool stopping = false;  // early stopping ends training after this epoch
  int64_t epochs = 0;     // planned for the run
  // Set by on_epoch_end: end training after this epoch, without the test evaluation (a
  // sweep's pruned trial); the result reads as paused.
  bool halt = false;
};

struct TrainResult {
  std::vector<double> step_losses;  // this call's steps
  std::vector<double> epoch_losses;
  std::vector<double> epoch_seconds;  // training passes only
  double final_loss = 0;              // mean training loss of the last epoch
  EvalResult test;
  bool has_test = false;
  EvalResult validation;  // the last epoch's
  bool has_validation = false;
  int64_t best_epoch = 0;  // by the monitored validation metric (0: no validation)
  double best_metric = 0;
  bool stopped_early = false;
  int64_t first_epoch = 1;  // > 1 when the run was resumed
  double seconds = 0;
  double median_epoch_seconds = 0;
  double samples_per_s = 0;
  double data_seconds = 0;  // time the training loop waited for batches
  int64_t peak_bytes = 0;   // the allocator's peak over the run
  int64_t planned_arena_bytes = 0;
  int64_t planned_step_bytes = 0;  // the arena plus the gradients the step writes
  int64_t steps = 0;               // in all, including the steps before a resume
  double loss_scale = 1;           // mixed precision: the loss scale at the end
  int64_t skipped_steps = 0;  // steps skipped for non-finite gradients (a resumed run's included)
  bool interrupted = false;
  bool paused = false;  // stopped at TrainConfig::stop_after_epochs
  // A breakpoint fired (TrainConfig::breaks): training stopped before that step's update, so
  // the trainer's state is the one the step started from (state() resumes at that step).
  std::optional<BreakHit> breakpoint;
  // Data-parallel: the ranks that trained (1 alone) and the seconds spent in the collective.
  int world_size = 1;
  double comm_seconds = 0;
};

struct FitInputs {
  BatchSource& train;
  BatchSource* validation = nullptr;
  BatchSource* test = nullptr;
  MetricSink* sink = nullptr;
  ProgressFn progress;
  const std::atomic<bool>* cancel = nullptr;
  // Called after each epoch; an error stops training and is returned by fit (e.g. a
  // checkpoint that could not be written).
  std::function<Result<void>(EpochReport&)> on_epoch_end;
  // Every TrainConfig::health.every steps, on the training thread.
  std::function<void(const HealthSample&)> health;
};

// How a step is built for this configuration (precision, loss scaling, checkpointing): what
// the trainer compiles, and what `mlstudio graph` and the editor draw.
StepOptions step_options(const TrainConfig& c, bool training = true);

class Trainer {
 public:
  Trainer(Backend& backend, ModelBuilder build, TrainConfig config);
  ~Trainer();

  // Builds the model at the training batch size and initialises the parameters.
  Result<void> init();
  // Data-parallel training over a job's ranks (engine/train/collective.h), set before fit:
  // fit starts from rank 0's whole state (parameters, optimizer state, counts), each rank
  // trains on its slice of every global batch (config.batch_size samples of batch_size x
  // size()), and the gradients are averaged by all-reduce steps in the training plan,
  // started bucket by bucket as the backward pass writes them. Null: one rank.
  void set_collective(Collective* c);
  Collective* collective() const { return collective_; }
  // Overwrites the initialised parameters (init() first) with `values`, in the order and
  // shapes of params(): to continue from weights trained elsewhere (a script's eager loop).
  // The message names the first parameter that does not fit.
  Result<void> set_param_values(const std::vector<Tensor>& values);
  Result<TrainResult> fit(const FitInputs& in);
  Result<TrainResult> fit(BatchSource& train, BatchSource* test, MetricSink* sink,
                          const ProgressFn& progress = {},
                          const std::atomic<bool>* cancel = nullptr);
  // One optimisation step on a batch; returns the loss.
  Result<double> train_step(const HostBatch& batch);
  Result<EvalResult> evaluate(BatchSource& data);
  // The model's outputs (logits or predicted values) for a batch, row-major.
  Result<std::vector<float>> predict(const HostBatch& batch, Shape* out_shape = nullptr);

  // Everything an exact resume needs: parameters (running statistics included), optimizer
  // state, steps and epochs done, the schedule's and early stopping's state.
  Result<Checkpoint> state() const;
  // Restores a state() taken from a trainer of the same model; the next fit continues
  // after the saved epoch. The message names the first tensor that does not fit.
  Result<void> restore(const Checkpoint& c);
  // For a fork that changed the graph or the optimizer: takes from `c` every parameter of
  // the same name, dtype and shape (the rest keep their fresh initialisation), and the
  // optimizer's state only where the optimizer type is the same; the step and epoch counts
  // always. The names of what was not taken come back (empty: everything fitted).
  struct Transfer {
    std::vector<std::string> fresh_params;  // initialised anew: new, or another shape
    std::vector<std::string> dropped;       // checkpoint parameters the model no longer has
    bool optimizer_state = true;            // false: the optimizer starts afresh
  };
  Result<Transfer> transfer(const Checkpoint& c);

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return param_names_; }
  const TrainConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  // Whether init() (or restore) has run: fit() initialises on its own otherwise.
  bool initialized() const { return opt_ != nullptr; }
  int64_t epochs_done() const { return epochs_done_; }
  int64_t steps_done() const { return step_; }
  bool regression() const { return !target_shape_.empty(); }
  // The training plan for a batch size (built on first use), e.g. to print or inspect.
  Result<const CompiledPlan*> training_plan(int64_t batch);
  // Times every kernel of the static plans built from now on (CompiledPlan::step_times).
  void set_profiling(bool on) { profiling_ = on; }
  // Records every static training step into `trace` (kernel spans, memory counters, the
  // optimizer update); turns profiling on. Null stops recording.
  void set_trace(TraceRecorder* trace);
  // What the trainer holds outside the plan of this batch size and mode (the training plan by
  // default): parameters, optimizer state, that plan's inputs, and (other) the other plans'
  // arenas and inputs.
  HeldBytes held_bytes(int64_t batch, bool training = true) const;
  // The memory profile of the training step at this batch size (its plan is built if need be).
  Result<MemoryTimeline> memory_timeline(int64_t batch);
  // Mixed precision: the loss scale and the steps skipped so far.
  const LossScaler& loss_scaler() const { return scaler_; }
  // A breakpoint that fired in a train_step called outside fit (fit moves it into
  // TrainResult::breakpoint); taking it clears it.
  std::optional<BreakHit> take_break();
  // The last health sample (TrainConfig::health), if one was measured.
  const std::optional<HealthSample>& last_health() const { return last_health_; }
  // The gradient of every trainable parameter for each of the first `max_samples` samples of
  // the batch alone (a batch-1 step per sample, no update), each flattened and concatenated in
  // parameter order: the health instruments' signal-to-noise ratio.
  Result<std::vector<std::vector<float>>> per_sample_gradients(const HostBatch& batch,
                                                               int64_t max_samples);

 private:
  struct StepPlan;
  Result<StepPlan*> plan_for(int64_t batch, bool training);
  // Frees the evaluation plans (their arenas and inputs): evaluate() builds them for one
  // evaluation, so they do not hold memory while the trainer trains.
  void drop_eval_plans();
  Result<double> eager_step(const HostBatch& batch);
  Result<void> check_batch(const HostBatch& b) const;
  void apply_update(const std::vector<Tensor>& grads);
  // Mixed precision: reads the step's gradient check (finite when all gradients are) into
  // the loss scaler; false when the step is skipped.
  bool keep_scaled_step(const Tensor& check);
  int64_t step_seed() const;
  // The debugger (trainer_debug.cpp): whether this step stops before its update (then
  // pending_break_ holds why, with the first node at fault found by a re-run).
  bool breaks_here(double loss, std::span<const float> grad_sq,
                   const std::vector<std::vector<float>>* activity, const HostBatch& batch);
  void make_watch(const StepPlan& sp);
  bool health_due() const;
  // Measures a HealthSample after this step's update from the host copies taken before it.
  void measure_health(const std::vector<std::vector<float>>& before,
                      const std::vector<std::vector<float>>& grads, double loss,
                      const HostBatch& batch);
  std::vector<std::vector<float>> trainable_to_host() const;
  // Data-parallel (trainer_dist.cpp).
  Result<void> sync_from_rank0();
  Result<void> broadcast_buffers();  // the non-trainable parameters (running statistics)
  std::vector<PlanHook> reduce_hooks(StepPlan& sp, const Graph& pg, size_t gradients);
  void start_bucket(StepPlan& sp, size_t bucket, std::span<const Tensor* const> grads);
  void finish_buckets(StepPlan& sp, std::span<const Tensor* const> outs);
  Result<void> reduce_now(std::vector<Tensor>& grads, float& loss, const Tensor* check);  // eager
  double dist_weight_ = 1;             // this rank's share of the global batch
  std::optional<Error> dist_error_;    // a collective call that failed inside the plan
  bool dist_stop_ = false;             // some rank asked to stop (Ctrl-C, SIGTERM)

  Backend& backend_;
  ModelBuilder build_;
  TrainConfig config_;
  Shape sample_shape_;
  Shape target_shape_;  // per sample; empty for class labels
  int64_t num_classes_ = 0;
  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<size_t> trainable_;  // indices into params_
  std::vector<Tensor> trainable_params_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<Schedule> schedule_;
  int64_t steps_per_epoch_ = 1;
  std::map<std::pair<int64_t, bool>, std::unique_ptr<StepPlan>> plans_;
  bool profiling_ = false;
  TraceRecorder* trace_ = nullptr;
  double lr_ = 0;
  // Progress that a checkpoint keeps.
  int64_t step_ = 0, epochs_done_ = 0;
  int64_t best_epoch_ = 0, bad_epochs_ = 0;
  double best_metric_ = 0;
  LossScaler scaler_{Precision::F32, {}};
  // Where the loop stands (for a breakpoint's report and a mid-epoch checkpoint).
  int64_t cur_epoch_ = 0, cur_batch_ = 0;
  int64_t batch_in_epoch_ = 0;  // a break's state resumes at this batch of epoch epochs_done_ + 1
  std::unique_ptr<StepWatch> watch_;
  std::optional<BreakHit> pending_break_;
  void step_done();  // tells fit's training source that a CPU step and its update are done
  const FitInputs* fit_in_ = nullptr;  // during fit: the source, sink and health callback
  std::vector<std::vector<float>> init_host_;  // trainable parameters as initialised (health)
  std::optional<HealthSample> last_health_;
  std::string snr_note_;  // why the SNR is not measured ("" : it is)
  Collective* collective_ = nullptr;
};

}  // namespace mls
