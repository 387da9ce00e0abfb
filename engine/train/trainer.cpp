#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/eager.h"
#include "engine/exec/replay.h"
#include "engine/passes/passes.h"
#include "engine/train/init.h"
#include "engine/train/rng.h"
#include "engine/train/step_graph.h"
#include "engine/train/step_watch.h"
#include "engine/train/collective.h"
#include "engine/train/trainer_step_plan.h"

namespace mls {

namespace {

// Where a batch holds its first NaN or infinity: "holds nan at sample 3, feature 17 of
// [1,28,28]" (inputs) or "... in its targets ..."; nullopt when all is finite.
std::optional<std::string> first_non_finite(const HostBatch& b, const Shape& sample_shape) {
  auto describe = [](const std::vector<float>& v, int64_t per_sample, const std::string& what)
      -> std::optional<std::string> {
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i])) {
        const int64_t sample = per_sample > 0 ? static_cast<int64_t>(i) / per_sample : 0;
        const int64_t at = per_sample > 0 ? static_cast<int64_t>(i) % per_sample : 0;
        return std::string("holds ") + (std::isnan(v[i]) ? "nan" : "inf") + " in its " + what +
               " at sample " + std::to_string(sample) + ", value " + std::to_string(at);
      }
    return std::nullopt;
  };
  if (auto r = describe(b.x, numel(sample_shape), "inputs (" + shape_str(sample_shape) + " each)"))
    return r;
  const int64_t per_target = b.size > 0 ? static_cast<int64_t>(b.t.size()) / b.size : 0;
  return describe(b.t, per_target, "targets");
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool higher_is_better(const std::string& metric) {
  return metric == "accuracy" || metric == "r2" || metric == "macro_f1";
}

}  // namespace

Result<double> EvalResult::metric(const std::string& name) const {
  if (name == "loss") return loss;
  if (!regression && name == "accuracy") return accuracy;
  if (!regression && name == "macro_f1") return macro_f1;
  if (regression && name == "mae") return values.mae;
  if (regression && name == "rmse") return values.rmse;
  if (regression && name == "r2") return values.r2;
  return make_error("no validation metric '" + name + "' for a " +
                    (regression ? "regression model (loss, mae, rmse, r2)"
                                : "classification model (loss, accuracy, macro_f1)"));
}


Trainer::Trainer(Backend& backend, ModelBuilder build, TrainConfig config)
    : backend_(backend), build_(std::move(build)), config_(std::move(config)) {}

Trainer::~Trainer() = default;

Result<void> Trainer::init() {
  if (config_.batch_size < 1) return make_error("batch size must be >= 1");
  auto mg = build_(config_.batch_size, true);
  if (!mg) return mg.error();
  const Graph& g = mg->graph;
  const Shape& in = g.type_of(mg->input).shape;
  sample_shape_.assign(in.begin() + 1, in.end());
  const ValueType lt = g.type_of(mg->labels);
  target_shape_.clear();
  if (lt.dtype == DType::I64) {
    num_classes_ = g.type_of(mg->logits).shape.back();
  } else {
    num_classes_ = 0;
    target_shape_.assign(lt.shape.begin() + 1, lt.shape.end());
    if (target_shape_.empty()) target_shape_ = {1};
  }
  plans_.clear();  // plans bind the parameter tensors: they are rebuilt with the new ones
  params_.clear();
  param_names_.clear();
  trainable_.clear();
  trainable_params_.clear();
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Value& v = g.value(g.params()[i]);
    Tensor t = Tensor::empty(backend_, v.type.dtype, v.type.shape, AllocTag::Parameter);
    if (auto r = initialise(t, v.init, mix_seed(config_.seed, i)); !r)
      return make_error("parameter '" + v.name + "': " + r.error().message);
    if (v.trainable) {
      trainable_.push_back(i);
      trainable_params_.push_back(t);
    }
    params_.push_back(std::move(t));
    param_names_.push_back(v.name);
  }
  // The schedule first: opt_ set means "initialised", so nothing may fail after it.
  ScheduleConfig sc = config_.schedule;
  sc.lr = config_.opt.lr;
  if (sc.type == "cosine" && sc.total_epochs <= 1) sc.total_epochs = config_.epochs;
  // one_cycle over the whole run: its length in steps is known once fit sees the data.
  if (sc.type == "one_cycle" && sc.total_steps <= 0)
    sc.total_steps = 1000;  // a placeholder: fit sets the real length
  auto s = make_schedule(sc);
  if (!s) return s.error();
  auto opt = Optimizer::create(backend_, config_.opt);
  if (!opt) return opt.error();
  schedule_ = std::move(*s);
  opt_ = std::make_unique<Optimizer>(std::move(*opt));
  opt_->attach(trainable_params_);
  step_ = epochs_done_ = best_epoch_ = bad_epochs_ = batch_in_epoch_ = 0;
  best_metric_ = 0;
  scaler_ = LossScaler(config_.precision, config_.loss_scale);
  watch_.reset();
  init_host_.clear();
  if (config_.health.every > 0) init_host_ = trainable_to_host();  // distance from here
  return {};
}

Result<void> Trainer::set_param_values(const std::vector<Tensor>& values) {
  if (!opt_) return make_error("set_param_values before init()");
  if (values.size() != params_.size())
    return make_error("the model has " + std::to_string(params_.size()) + " parameters, " +
                      std::to_string(values.size()) + " values were given");
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].shape() != params_[i].shape() || values[i].dtype() != params_[i].dtype())
      return make_error("parameter '" + param_names_[i] + "' is " + shape_str(params_[i].shape()) +
                        ", the value " + shape_str(values[i].shape()));
  for (size_t i = 0; i < values.size(); ++i) {
    Tensor src = values[i].is_contiguous() ? values[i] : values[i].contiguous();
    std::vector<float> host = src.to_f32();
    params_[i].fill_from_host(host);
  }
  return {};
}

StepOptions step_options(const TrainConfig& c, bool training) {
  StepOptions o;
  o.training = training;
  o.precision = c.precision;
  o.loss_scale = c.loss_scale;
  o.checkpoint_budget_bytes = c.checkpoint_budget_bytes;
  // The debugger's reductions are part of the step it runs (and of what `graph` prints).
  const bool norms = c.breaks.grad_norm_max > 0 || c.breaks.grad_norm_min > 0;
  o.grad_check = !training ? StepOptions::GradCheck::None
                 : norms   ? StepOptions::GradCheck::Norms
                 : c.breaks.nan ? StepOptions::GradCheck::Finite
                                : StepOptions::GradCheck::None;
  o.unit_activity = training && (c.breaks.dead_relu > 0 || c.health.every > 0);
  return o;
}

Result<Trainer::StepPlan*> Trainer::plan_for(int64_t batch, bool training) {
  auto key = std::make_pair(batch, training);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  auto mg = build_(batch, training);
  if (!mg) return mg.error();
  {
    const Graph& g = mg->graph;
    bool same = g.params().size() == params_.size();
    for (size_t i = 0; same && i < params_.size(); ++i)
      same = g.type_of(g.params()[i]).shape == params_[i].shape();
    if (!same)
      return make_error("the model built for batch " + std::to_string(batch) +
                        " has other parameters");
  }
  auto step = build_step(std::move(*mg), backend_, step_options(config_, training));
  if (!step) return step.error();
  auto sp = std::make_unique<StepPlan>();
  sp->mg = step->model;
  sp->check = step->check;
  sp->grad_check = step->grad_check;
  sp->activity = step->activity;
  const size_t gradients = step->gradients;
  const Ref scale_in = step->loss_scale;
  // The training step's gradients (outputs 1..) are planned in the arena like any other
  // value: each lives from the node that writes it to the end of the step, where the
  // optimizer reads it, so the largest (the first layer's weights, written last) never
  // coexists with the forward activations. That brings a step's planned peak down to the
  // live tensors PyTorch holds (bench/step_memory.py). The arena outlives run(), so the
  // tensors stay valid until the next step of the same plan.
  sp->mg.graph = std::move(step->graph());
  const Graph& pg = sp->mg.graph;
  PlanOptions po;
  po.host_labels = config_.host_nodes;  // the project's per-node "device": "cpu"
  if (training && collective_) po.hooks = reduce_hooks(*sp, pg, gradients);
  auto plan = CompiledPlan::compile(pg, backend_, po);
  if (!plan) return plan.error();
  sp->plan.emplace(std::move(*plan));
  sp->plan->set_profiling(profiling_);
  const ValueType xt = pg.type_of(sp->mg.input), yt = pg.type_of(sp->mg.labels);
  sp->x = Tensor::empty(backend_, xt.dtype, xt.shape, AllocTag::Input);
  sp->y = Tensor::empty(backend_, yt.dtype, yt.shape, AllocTag::Input);
  auto check = [](Result<void> r) { MLS_CHECK(r.ok(), "binding a model input failed"); };
  check(sp->plan->bind(sp->mg.input, sp->x));
  check(sp->plan->bind(sp->mg.labels, sp->y));
  if (sp->mg.step_seed.valid()) {
    sp->seed = Tensor::empty(backend_, DType::I64, {1}, AllocTag::Input);
    check(sp->plan->bind(sp->mg.step_seed, sp->seed));
  }
  if (scale_in.valid()) {
    sp->scale = Tensor::empty(backend_, DType::F32, {}, AllocTag::Input);
    check(sp->plan->bind(scale_in, sp->scale));
  }
  for (size_t i = 0; i < params_.size(); ++i) check(sp->plan->bind(pg.params()[i], params_[i]));
  if (training)
    for (size_t i = 1; i <= gradients; ++i) sp->grads.push_back(sp->plan->tensor(pg.outputs()[i]));
  if (training && !watch_ && (config_.breaks.any() || config_.health.every > 0)) make_watch(*sp);
  StepPlan* raw = sp.get();
  plans_[key] = std::move(sp);
  return raw;
}

Result<const CompiledPlan*> Trainer::training_plan(int64_t batch) {
  auto p = plan_for(batch, true);
  if (!p) return p.error();
  return &*(*p)->plan;
}

Result<void> Trainer::check_batch(const HostBatch& b) const {
  const bool values = regression();
  const int64_t per_target = values ? numel(target_shape_) : 1;
  const size_t targets = values ? b.t.size() : b.y.size();
  if (static_cast<int64_t>(b.x.size()) != b.size * numel(sample_shape_) ||
      static_cast<int64_t>(targets) != b.size * per_target)
    return make_error("a batch of " + std::to_string(b.size) + " samples has " +
                      std::to_string(b.x.size()) + " features and " + std::to_string(targets) +
                      (values ? " target values" : " labels") + "; the model expects " +
                      shape_str(sample_shape_) + " per sample and " +
                      (values ? shape_str(target_shape_) + " target values" : "one class label"));
  if (!values)
    for (int64_t i = 0; i < b.size; ++i)
      if (b.y[static_cast<size_t>(i)] < 0 || b.y[static_cast<size_t>(i)] >= num_classes_)
        return make_error("label " + std::to_string(b.y[static_cast<size_t>(i)]) + " (sample " +
                          std::to_string(i) + " of the batch) is outside [0, " +
                          std::to_string(num_classes_) + ")");
  return {};
}

namespace {

void fill_targets(Tensor& y, const HostBatch& b) {
  if (y.dtype() == DType::I64)
    y.fill_raw(b.y.data(), y.nbytes());
  else
    y.fill_raw(b.t.data(), y.nbytes());
}

}  // namespace

namespace {

// Samples [begin, begin + count) of a batch: a rank's slice of the global batch.
void slice_batch(const HostBatch& from, int64_t begin, int64_t count, HostBatch& out) {
  auto part = [&](const auto& v, auto& dst) {
    if (v.empty()) {
      dst.clear();
      return;
    }
    const size_t per = v.size() / static_cast<size_t>(from.size);
    dst.assign(v.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(begin)),
               v.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(begin + count)));
  };
  part(from.x, out.x);
  part(from.y, out.y);
  part(from.t, out.t);
  out.size = count;
}

}  // namespace

int64_t Trainer::step_seed() const {
  // Data-parallel: each rank draws its own masks for its slice (the same seed on every rank
  // would drop the same positions of every slice).
  if (collective_ && collective_->rank() > 0)
    return training_step_seed(mix_seed(config_.seed, 0x7a4b0000ull + static_cast<uint64_t>(collective_->rank())), step_);
  return training_step_seed(config_.seed, step_);
}

bool Trainer::keep_scaled_step(const Tensor& check) {
  float sum = 0;
  backend_.copy_to_host(*check.buffer(), check.byte_offset(), &sum, sizeof sum);
  if (scaler_.update(std::isfinite(sum))) return true;
  ++step_;  // skipped: parameters and optimizer state untouched; schedules still count the batch
  return false;
}

void Trainer::apply_update(const std::vector<Tensor>& grads) {
  if (config_.clip_grad_value > 0) Optimizer::clip_grad_value(grads, config_.clip_grad_value);
  if (config_.clip_grad_norm > 0) Optimizer::clip_grad_norm(grads, config_.clip_grad_norm);
  lr_ = schedule_->lr_at(step_, steps_per_epoch_);
  opt_->set_lr(lr_);
  opt_->step(trainable_params_, grads);
  ++step_;
}

// On the CPU a step's kernels (the update's too) fill the cores: fit's source is told when they
// are done, so that a source with a thread of its own makes the next batch in the pause that
// follows (the metrics, the next batch's copy), not beside the next step's first kernels. On a
// GPU the host is free while the device computes, and the source makes batches when it can.
// 2-core VM, profiles alternated: LeNet-5's first convolution 0.25-0.28 -> 0.20-0.21 ms a step,
// the MLP's first layer 0.30 -> 0.25 ms.
void Trainer::step_done() {
  if (fit_in_ && backend_.kind() == DeviceKind::CPU) fit_in_->train.between_steps();
}

Result<double> Trainer::eager_step(const HostBatch& batch) {
  auto mg = build_(batch.size, true);  // the same graph the static path compiles, replayed op by op
  if (!mg) return mg.error();
  autocast_model(*mg, config_.precision);
  const Graph& g = mg->graph;
  EagerSession s(backend_);
  std::vector<Ref> map(g.values().size());
  for (size_t i = 0; i < params_.size(); ++i)
    map[static_cast<size_t>(g.params()[i].id)] =
        s.leaf(params_[i], g.value(g.params()[i]).trainable);
  const ValueType xt = g.type_of(mg->input), yt = g.type_of(mg->labels);
  Tensor x = Tensor::empty(backend_, xt.dtype, xt.shape, AllocTag::Input);
  x.fill_raw(batch.x.data(), x.nbytes());
  map[static_cast<size_t>(mg->input.id)] = s.leaf(x);
  Tensor y = Tensor::empty(backend_, yt.dtype, yt.shape, AllocTag::Input);
  fill_targets(y, batch);
  map[static_cast<size_t>(mg->labels.id)] = s.leaf(y);
  if (mg->step_seed.valid()) {
    const int64_t seed = step_seed();
    map[static_cast<size_t>(mg->step_seed.id)] =
        s.leaf(Tensor::from_i64(backend_, {1}, {seed}, AllocTag::Input));
  }
  MLS_CHECK(replay(s, g, map).ok(), "the eager step's replay failed");  // errors abort in the session
  Ref loss = map[static_cast<size_t>(mg->loss.id)];
  Refs wrt;
  for (size_t i : trainable_) wrt.push_back(map[static_cast<size_t>(g.params()[i].id)]);
  const Ref scale_leaf =
      scaler_.dynamic() ? s.leaf(Tensor::from_f32(
                              backend_, {}, {static_cast<float>(scaler_.scale())}, AllocTag::Input))
                        : Ref{};
  Refs grads = s.grad(scale_leaf.valid() ? mul(s, loss, scale_leaf) : loss, wrt);
  Ref check;
  if (scaler_.active()) grads = unscale_gradients(s, grads, scale_leaf, &check);
  std::vector<Tensor> gt;
  for (size_t i = 0; i < grads.size(); ++i)
    gt.push_back(grads[i].valid()
                     ? s.value(grads[i])
                     : Tensor::zeros(backend_, DType::F32, trainable_params_[i].shape(),
                                     AllocTag::Gradient));
  float l = 0;
  const Tensor& lt = s.value(loss);
  backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), &l, sizeof l);
  if (collective_)
    if (auto r = reduce_now(gt, l, check.valid() ? &s.value(check) : nullptr); !r) return r.error();
  if (check.valid() && !keep_scaled_step(s.value(check))) return static_cast<double>(l);
  if (config_.breaks.any()) {
    // The eager step has no reduction in its graph: the sums of squares on the host.
    std::vector<float> sq;
    if (config_.breaks.nan || config_.breaks.grad_norm_max > 0 || config_.breaks.grad_norm_min > 0)
      for (const Tensor& t : gt) {
        double acc = 0;
        for (double v : t.to_f64()) acc += v * v;
        sq.push_back(static_cast<float>(acc));
      }
    if (!watch_)
      watch_ = std::make_unique<StepWatch>(config_.breaks, std::vector<std::string>{},
                                           std::vector<std::string>{},
                                           std::vector<StepWatch::Units>{});
    if (breaks_here(l, sq, nullptr, batch)) return static_cast<double>(l);
  }
  apply_update(gt);
  step_done();
  return static_cast<double>(l);
}

Result<double> Trainer::train_step(const HostBatch& batch) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  if (auto c = check_batch(batch); !c) return c.error();
  if (config_.mode == ExecMode::Eager) return eager_step(batch);
  auto p = plan_for(batch.size, true);
  if (!p) return p.error();
  StepPlan& sp = **p;
  sp.x.fill_raw(batch.x.data(), sp.x.nbytes());
  fill_targets(sp.y, batch);
  if (sp.seed.defined()) {
    const int64_t seed = step_seed();
    sp.seed.fill_raw(&seed, sizeof seed);
  }
  if (sp.scale.defined()) {
    const auto s = static_cast<float>(scaler_.scale());
    sp.scale.fill_raw(&s, sizeof s);
  }
  const int64_t t0 = trace_ ? steady_now_ns() : 0;
  sp.plan->run();
  if (dist_error_) {
    Error e = std::move(*dist_error_);
    dist_error_.reset();
    return e;
  }
  float l = 0;
  const Tensor& lt = sp.plan->tensor(sp.mg.loss);
  backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), &l, sizeof l);
  const int64_t step = step_;
  const bool health = health_due();
  if (watch_) {
    // The debugger's reductions: a few floats per step (the per-unit maxima only when armed).
    std::vector<float> sq;  // sums (nan only) or sums of squares (grad-norm armed)
    if (sp.grad_check.valid()) sq = sp.plan->tensor(sp.grad_check).to_f32();
    std::vector<std::vector<float>> act;
    for (const UnitOutput& u : sp.activity) act.push_back(sp.plan->tensor(u.value).to_f32());
    if (breaks_here(l, sq, sp.activity.empty() ? nullptr : &act, batch)) return static_cast<double>(l);
  }
  std::vector<std::vector<float>> before, grads;
  if (health) {
    before = trainable_to_host();
    for (const Tensor& g : sp.grads) grads.push_back(g.to_f32());
  }
  const bool update = !sp.check.valid() || keep_scaled_step(sp.plan->tensor(sp.check));
  const int64_t t1 = trace_ ? steady_now_ns() : 0;
  if (update) apply_update(sp.grads);
  step_done();
  // The next step's kernels follow after a short pause (its batch, the metrics): a thread
  // woken when they start took 85-100 us to take its part on the 2-core VM (LeNet's first
  // convolution at 0.35 ms a step rather than 0.25), so the pool's threads stay up through
  // the pause. (A second wake right after the plan, to cover the optimizer too, made the
  // next step's first job later, not sooner: 437 of 469 took 50-200 us against 57 of 469.
  // A worker that spins longer is more often swapped out for the batch prefetcher's thread.)
  backend_.expect_work();
  if (health && update) measure_health(before, grads, l, batch);
  if (trace_) {
    if (!sp.timeline) sp.timeline = mls::memory_timeline(*sp.plan, held_bytes(batch.size));
    const int64_t t2 = steady_now_ns();
    trace_->plan_run(*sp.plan, step, &*sp.timeline);
    const int32_t thread = trace_thread_id();
    if (update) trace_->span("optimizer step", "optimizer", t1, t2, thread, {{"step", std::to_string(step)}});
    trace_->span("step " + std::to_string(step), "step", t0, t2, thread, {{"batch", std::to_string(batch.size)}});
  }
  return static_cast<double>(l);
}

void Trainer::set_trace(TraceRecorder* trace) {
  trace_ = trace;
  if (trace) profiling_ = true;
  for (auto& [key, sp] : plans_) sp->plan->set_profiling(profiling_);
}

void Trainer::drop_eval_plans() {
  std::erase_if(plans_, [](const auto& kv) { return !kv.first.second; });
}

HeldBytes Trainer::held_bytes(int64_t batch, bool training) const {
  HeldBytes h;
  for (const Tensor& t : params_) h.parameter += static_cast<int64_t>(t.nbytes());
  if (opt_)
    for (const auto& per_param : opt_->state())
      for (const Tensor& t : per_param) h.optimizer_state += static_cast<int64_t>(t.nbytes());
  for (const auto& [key, sp] : plans_) {
    const PlanStats& ps = sp->plan->stats();
    if (key == std::make_pair(batch, training)) {
      h.input += sp->input_bytes();
      h.gradient += static_cast<int64_t>(ps.own_buffer_bytes);
    } else {
      h.other += sp->input_bytes() + static_cast<int64_t>(ps.arena_bytes + ps.own_buffer_bytes) +
                 plan_constant_bytes(*sp->plan);
    }
  }
  return h;
}

Result<MemoryTimeline> Trainer::memory_timeline(int64_t batch) {
  auto p = plan_for(batch, true);
  if (!p) return p.error();
  return mls::memory_timeline(*(*p)->plan, held_bytes(batch));
}

Result<std::vector<float>> Trainer::predict(const HostBatch& batch, Shape* out_shape) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  if (static_cast<int64_t>(batch.x.size()) != batch.size * numel(sample_shape_))
    return make_error("an input of " + std::to_string(batch.x.size()) + " values for " +
                      std::to_string(batch.size) + " samples; the model expects " +
                      shape_str(sample_shape_) + " per sample");
  auto p = plan_for(batch.size, false);
  if (!p) return p.error();
  StepPlan& sp = **p;
  sp.x.fill_raw(batch.x.data(), sp.x.nbytes());
  std::vector<uint8_t> zero(sp.y.nbytes(),
                            0);  // the loss is computed too: give it harmless targets
  sp.y.fill_raw(zero.data(), zero.size());
  sp.plan->run();
  const Tensor& lt = sp.plan->tensor(sp.mg.logits);
  std::vector<float> out(static_cast<size_t>(lt.numel()));
  backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), out.data(), lt.nbytes());
  if (out_shape) *out_shape = lt.shape();
  return out;
}

Result<EvalResult> Trainer::evaluate(BatchSource& data) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  EvalResult r;
  r.regression = regression();
  HostBatch b;
  std::vector<float> out;
  data.start_epoch(0);
  double loss_sum = 0, top5_sum = 0;
  r.confusion = ConfusionMatrix(std::max<int64_t>(num_classes_, 1));
  RegressionAccumulator reg;
  // The plans built here are freed when the evaluation ends, however it ends.
  struct DropPlans {
    Trainer* t;
    ~DropPlans() { t->drop_eval_plans(); }
  } drop{this};
  const int64_t t_start = trace_ ? steady_now_ns() : 0;
  while (data.next(config_.eval_batch_size, b)) {
    if (auto c = check_batch(b); !c) return c.error();
    auto p = plan_for(b.size, false);
    if (!p) return p.error();
    StepPlan& sp = **p;
    sp.x.fill_raw(b.x.data(), sp.x.nbytes());
    fill_targets(sp.y, b);
    sp.plan->run();
    if (trace_) {
      // The evaluation's kernels and memory in the trace beside the training steps': its
      // plans live beside the training plan, so the run's peak is often here.
      if (!sp.timeline) sp.timeline = mls::memory_timeline(*sp.plan, held_bytes(b.size, false));
      trace_->plan_run(*sp.plan, step_, &*sp.timeline, "eval");
    }
    const Tensor& lt = sp.plan->tensor(sp.mg.logits);
    out.resize(static_cast<size_t>(lt.numel()));
    backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), out.data(), lt.nbytes());
    float l = 0;
    const Tensor& lo = sp.plan->tensor(sp.mg.loss);
    backend_.copy_to_host(*lo.buffer(), lo.byte_offset(), &l, sizeof l);
    loss_sum += static_cast<double>(l) * static_cast<double>(b.size);
    if (r.regression) {
      if (static_cast<size_t>(lt.numel()) != b.t.size())
        return make_error("the model predicts " + shape_str(lt.shape()) + " but the batch has " +
                          std::to_string(b.t.size()) + " target values");
      reg.add(out.data(), b.t.data(), static_cast<int64_t>(b.t.size()));
    } else {
      r.confusion.add_logits(out.data(), b.size, num_classes_, b.y.data());
      top5_sum += top_k_accuracy(out.data(), b.size, num_classes_, b.y.data(), 5) *
                  static_cast<double>(b.size);
    }
    r.samples += b.size;
  }
  if (trace_)
    trace_->span("evaluation", "evaluation", t_start, steady_now_ns(), trace_thread_id(),
                 {{"samples", std::to_string(r.samples)}, {"step", std::to_string(step_)}});
  if (r.samples == 0) return make_error("evaluation: the data set is empty");
  r.loss = loss_sum / static_cast<double>(r.samples);
  if (r.regression) {
    r.values = reg.result();
  } else {
    r.accuracy = r.confusion.accuracy();
    r.macro_f1 = r.confusion.macro_f1();
    r.top5 = top5_sum / static_cast<double>(r.samples);
  }
  return r;
}

// [SECTION] checkpoints

Result<Checkpoint> Trainer::state() const {
  if (!opt_) return make_error("the trainer has no state yet (nothing was trained)");
  Checkpoint c;
  c.step = step_;
  c.epoch = epochs_done_;
  c.ints["seed"] = static_cast<int64_t>(config_.seed);
  c.ints["optimizer.steps"] = opt_->steps();
  c.ints["best_epoch"] = best_epoch_;
  c.ints["bad_epochs"] = bad_epochs_;
  if (batch_in_epoch_ > 0) c.ints["batch_in_epoch"] = batch_in_epoch_;  // a break's mid-epoch state
  c.numbers["best_metric"] = best_metric_;
  if (scaler_.active()) {  // mixed precision only: f32 checkpoints stay as they were
    c.numbers["loss_scale"] = scaler_.scale();
    c.ints["loss_scale.good_steps"] = scaler_.good_steps();
    c.ints["skipped_steps"] = scaler_.skipped();
  }
  c.strings["optimizer.type"] = config_.opt.type;
  std::vector<double> ss = schedule_->state();
  for (size_t i = 0; i < ss.size(); ++i) c.numbers["schedule." + std::to_string(i)] = ss[i];
  for (size_t i = 0; i < params_.size(); ++i)
    c.tensors.push_back(snapshot("param/" + param_names_[i], params_[i]));
  const auto& os = opt_->state();
  for (size_t k = 0; k < os.size(); ++k)
    for (size_t j = 0; j < os[k].size(); ++j)
      c.tensors.push_back(
          snapshot("opt/" + param_names_[trainable_[k]] + "/" + std::to_string(j), os[k][j]));
  return c;
}

Result<void> Trainer::restore(const Checkpoint& c) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  if (auto t = c.strings.find("optimizer.type");
      t != c.strings.end() && t->second != config_.opt.type)
    return make_error("the checkpoint was trained with optimizer '" + t->second +
                      "', the project now uses '" + config_.opt.type + "'");
  size_t saved_params = 0;
  for (const CheckpointTensor& t : c.tensors) saved_params += t.name.rfind("param/", 0) == 0;
  if (saved_params != params_.size())
    return make_error("the checkpoint holds " + std::to_string(saved_params) +
                      " parameters, the model " + std::to_string(params_.size()) +
                      " (was the model changed?)");
  for (size_t i = 0; i < params_.size(); ++i) {
    const CheckpointTensor* t = c.find("param/" + param_names_[i]);
    if (!t)
      return make_error("the checkpoint has no parameter '" + param_names_[i] +
                        "' (was the model changed?)");
    if (auto r = mls::restore(*t, params_[i]); !r) return r.error();
  }
  const auto& os = opt_->state();
  for (size_t k = 0; k < os.size(); ++k)
    for (size_t j = 0; j < os[k].size(); ++j) {
      std::string name = "opt/" + param_names_[trainable_[k]] + "/" + std::to_string(j);
      const CheckpointTensor* t = c.find(name);
      if (!t) return make_error("the checkpoint has no optimizer state '" + name + "'");
      Tensor dst = os[k][j];
      if (auto r = mls::restore(*t, dst); !r) return r.error();
    }
  auto get_int = [&](const char* key) {
    auto it = c.ints.find(key);
    return it == c.ints.end() ? int64_t{0} : it->second;
  };
  opt_->set_steps(get_int("optimizer.steps"));
  best_epoch_ = get_int("best_epoch");
  bad_epochs_ = get_int("bad_epochs");
  if (auto it = c.numbers.find("best_metric"); it != c.numbers.end()) best_metric_ = it->second;
  if (auto it = c.numbers.find("loss_scale"); it != c.numbers.end())  // absent: a fresh scaler
    scaler_.restore(it->second, get_int("loss_scale.good_steps"), get_int("skipped_steps"));
  std::vector<double> ss;
  for (size_t i = 0;; ++i) {
    auto it = c.numbers.find("schedule." + std::to_string(i));
    if (it == c.numbers.end()) break;
    ss.push_back(it->second);
  }
  schedule_->set_state(ss);
  step_ = c.step;
  epochs_done_ = c.epoch;
  batch_in_epoch_ = get_int("batch_in_epoch");
  return {};
}

Result<Trainer::Transfer> Trainer::transfer(const Checkpoint& c) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  // Everything fits: the exact restore (schedule, early stopping, loss scale included).
  if (restore(c)) return Transfer{};
  Transfer out;
  auto t = c.strings.find("optimizer.type");
  out.optimizer_state = t != c.strings.end() && t->second == config_.opt.type;
  std::vector<bool> taken(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const CheckpointTensor* ct = c.find("param/" + param_names_[i]);
    if (ct && ct->dtype == params_[i].dtype() && ct->shape == params_[i].shape() &&
        mls::restore(*ct, params_[i]))
      taken[i] = true;
    else
      out.fresh_params.push_back(param_names_[i]);
  }
  for (const CheckpointTensor& ct : c.tensors)
    if (ct.name.rfind("param/", 0) == 0 &&
        std::find(param_names_.begin(), param_names_.end(), ct.name.substr(6)) == param_names_.end())
      out.dropped.push_back(ct.name.substr(6));
  if (out.optimizer_state) {
    const auto& os = opt_->state();
    for (size_t k = 0; k < os.size(); ++k) {
      if (!taken[trainable_[k]]) continue;  // a fresh parameter starts with fresh state
      for (size_t j = 0; j < os[k].size(); ++j) {
        const CheckpointTensor* ct = c.find("opt/" + param_names_[trainable_[k]] + "/" + std::to_string(j));
        Tensor dst = os[k][j];
        if (ct) (void)mls::restore(*ct, dst);
      }
    }
    if (auto it = c.ints.find("optimizer.steps"); it != c.ints.end()) opt_->set_steps(it->second);
  }
  step_ = c.step;
  epochs_done_ = c.epoch;
  auto bie = c.ints.find("batch_in_epoch");
  batch_in_epoch_ = bie == c.ints.end() ? 0 : bie->second;
  return out;
}

// [SECTION] fit

std::vector<std::pair<std::string, std::string>> config_params(const TrainConfig& c) {
  return {{"epochs", std::to_string(c.epochs)},
          {"batch_size", std::to_string(c.batch_size)},
          {"optimizer", c.opt.type},
          {"lr", std::to_string(c.opt.lr)},
          {"momentum", std::to_string(c.opt.momentum)},
          {"weight_decay", std::to_string(c.opt.weight_decay)},
          {"schedule", c.schedule.type},
          {"precision", std::string(precision_name(c.precision))}};
}

Result<TrainResult> Trainer::fit(BatchSource& train, BatchSource* test, MetricSink* sink,
                                 const ProgressFn& progress, const std::atomic<bool>* cancel) {
  return fit(FitInputs{
      .train = train, .test = test, .sink = sink, .progress = progress, .cancel = cancel});
}

Result<TrainResult> Trainer::fit(const FitInputs& in) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  BatchSource& train = in.train;
  MetricSink* sink = in.sink;
  if (train.sample_shape() != sample_shape_)
    return make_error("the data's samples are " + shape_str(train.sample_shape()) +
                      " but the model's input is " + shape_str(sample_shape_));
  const std::string& monitor = config_.early_stop.monitor;
  if (config_.early_stop.patience > 0 && !in.validation)
    return make_error(
        "early stopping needs a validation split (set the dataset's \"validation\" fraction)");
  if (config_.mode == ExecMode::Eager && (config_.breaks.dead_relu > 0 || config_.health.every > 0))
    return make_error(
        "dead-ReLU breakpoints and the health instruments need the static mode (mode \"static\")");
  struct FitScope {
    const FitInputs*& at;
    ~FitScope() { at = nullptr; }
  } scope{fit_in_ = &in};
  // Data-parallel: every rank starts from rank 0's state and trains on its slice of each
  // global batch of batch_size x world samples (one shuffle: the slices make up the epoch).
  const int world = collective_ ? collective_->size() : 1;
  const int rank = collective_ ? collective_->rank() : 0;
  dist_stop_ = false;
  dist_error_.reset();
  if (collective_) {
    if (config_.breaks.any() || config_.health.every > 0)
      return make_error(
          "the debugger's breakpoints and health instruments watch one process: run without "
          "mpirun (one rank) to use them");
    if (auto r = sync_from_rank0(); !r) return r.error();
  }
  const double comm_start = collective_ ? collective_->seconds() : 0;
  TrainResult res;
  res.first_epoch = epochs_done_ + 1;
  const double t_start = now_s();
  const int64_t n = train.num_samples();
  const int64_t bs = config_.batch_size * world;  // the global batch
  const int64_t batches = (n + bs - 1) / bs;
  steps_per_epoch_ = std::max<int64_t>(batches, 1);
  if (config_.schedule.type == "one_cycle" && config_.schedule.total_steps <= 0) {
    ScheduleConfig sc = config_.schedule;  // stateless: rebuilding it loses nothing
    sc.lr = config_.opt.lr;
    sc.total_steps = config_.epochs * steps_per_epoch_;
    auto s = make_schedule(sc);
    if (!s) return s.error();
    schedule_ = std::move(*s);
  }
  HostBatch b, global;
  // One rank reads its batch directly. A rank of many reads its part of each global batch from
  // a source that can shard (it then reads and transforms only its own samples), else reads
  // the global batch and keeps its part.
  const bool sharded = world > 1 && train.set_shard(rank, world);
  struct Unshard {
    BatchSource& src;
    bool on;
    ~Unshard() {
      if (on) src.set_shard(0, 1);
    }
  } unshard{train, sharded};
  auto next_batch = [&](HostBatch& out) {
    if (world == 1) return train.next(bs, out);
    for (;;) {
      int64_t g = 0, count = 0;
      if (sharded) {
        if (!train.next(bs, out)) return false;
        g = out.global_size;
        count = out.size;
      } else {
        if (!train.next(bs, global)) return false;
        g = global.size;
        count = g / world + (rank < g % world ? 1 : 0);
        if (g >= world) slice_batch(global, rank * (g / world) + std::min<int64_t>(rank, g % world), count, out);
      }
      if (g < world) continue;  // fewer samples than ranks (a tiny last batch): skipped by all
      out.global_size = g;
      dist_weight_ = static_cast<double>(count) / static_cast<double>(g);
      return true;
    }
  };
  auto global_size = [&](const HostBatch& mine) { return world == 1 ? mine.size : mine.global_size; };
  int64_t trained = 0;
  double train_time = 0;
  for (int64_t epoch = epochs_done_ + 1; epoch <= config_.epochs && !res.interrupted; ++epoch) {
    train.start_epoch(epoch - 1);
    const double t0 = now_s();
    double sum = 0, waited = 0;
    int64_t count = 0, bi = 0, seen = 0;
    // A breakpoint's state resumes mid-epoch: the batches before it were trained already.
    for (; bi < batch_in_epoch_ && next_batch(b); ++bi) {
    }
    batch_in_epoch_ = 0;
    const double comm_epoch = collective_ ? collective_->seconds() : 0;
    for (;;) {
      const double w0 = now_s();
      const bool more = next_batch(b);
      waited += now_s() - w0;
      if (!more) break;
      cur_epoch_ = epoch;
      cur_batch_ = bi;
      auto l = train_step(b);
      if (!l) return l.error();
      if (pending_break_) {
        // Stopped before this step's update: the state resumes at this very batch.
        res.breakpoint = std::move(pending_break_);
        pending_break_.reset();
        batch_in_epoch_ = bi;
        break;
      }
      if (!std::isfinite(*l)) {
        // Bad data first: a NaN in the inputs is not the learning rate's fault.
        if (auto bad = first_non_finite(b, sample_shape_))
          return make_error("the training data is not finite: the batch of step " +
                            std::to_string(step_) + " (epoch " + std::to_string(epoch) + ") " +
                            *bad + "; the loss became " + std::to_string(*l) +
                            " (fix or drop those samples in the dataset)");
        return make_error("the loss became " + std::to_string(*l) + " at step " +
                          std::to_string(step_) + " (epoch " + std::to_string(epoch) +
                          "); the data are finite, so try a smaller learning rate");
      }
      ++bi;
      trained += global_size(b);
      seen += global_size(b);
      sum += *l;
      ++count;
      res.step_losses.push_back(*l);
      if (sink) sink->log_metric("train/loss", step_, *l);
      if (in.progress) {
        double el = now_s() - t0;
        double sps = static_cast<double>(seen) / std::max(el, 1e-9);
        double left = static_cast<double>((config_.epochs - epoch) * n + (n - seen));
        const double comm = collective_ ? (collective_->seconds() - comm_epoch) / std::max(el, 1e-9) : 0;
        in.progress({epoch, config_.epochs, bi, batches, sum / static_cast<double>(count), sps,
                     left / sps, waited / std::max(el, 1e-9), false, scaler_.scale(),
                     scaler_.skipped(), lr_, step_, *l, comm});
      }
      // Many ranks stop together: the stop flag travels with the step's gradients.
      const bool stop = collective_ ? dist_stop_ : in.cancel && in.cancel->load();
      if (stop || (config_.max_steps > 0 && step_ >= config_.max_steps)) {
        res.interrupted = stop;
        break;
      }
    }
    double secs = now_s() - t0;
    train_time += secs;
    res.data_seconds += waited;
    if (res.breakpoint) break;  // a partial epoch: the checkpoint of the break resumes it
    if (count == 0) return make_error("the training set is empty");
    if (res.interrupted) break;  // a partial epoch is not an epoch: a resume redoes it
    epochs_done_ = epoch;
    res.epoch_seconds.push_back(secs);
    res.epoch_losses.push_back(sum / static_cast<double>(count));
    if (sink) {
      sink->log_metric("epoch/train_loss", epoch, res.epoch_losses.back());
      sink->log_metric("epoch/seconds", epoch, secs);
      sink->log_metric("epoch/samples_per_s", epoch, static_cast<double>(seen) / secs);
      sink->log_metric("epoch/data_wait_fraction", epoch, waited / std::max(secs, 1e-9));
      sink->log_metric("epoch/lr", epoch,
                       schedule_->lr_at(std::max<int64_t>(step_ - 1, 0), steps_per_epoch_));
      if (scaler_.active()) {
        sink->log_metric("epoch/loss_scale", epoch, scaler_.scale());
        sink->log_metric("epoch/skipped_steps", epoch, static_cast<double>(scaler_.skipped()));
      }
    }
    EpochReport rep{epoch, res.epoch_losses.back(), secs, false, {}, false, false, config_.epochs};
    double plateau_metric = rep.train_loss;
    // Running statistics are each rank's own: rank 0's go to all, so every rank evaluates and
    // checkpoints the same model.
    if (collective_)
      if (auto r = broadcast_buffers(); !r) return r.error();
    if (in.validation) {
      auto ev = evaluate(*in.validation);
      if (!ev) return make_error("validation: " + ev.error().message);
      auto m = ev->metric(monitor);
      if (!m) return m.error();
      rep.has_validation = true;
      rep.validation = *ev;
      res.validation = *ev;
      res.has_validation = true;
      plateau_metric = ev->loss;
      const bool up = higher_is_better(monitor);
      const double delta = up ? *m - best_metric_ : best_metric_ - *m;
      if (best_epoch_ == 0 || delta > config_.early_stop.min_delta) {
        best_metric_ = *m;
        best_epoch_ = epoch;
        bad_epochs_ = 0;
        rep.improved = true;
      } else {
        ++bad_epochs_;
      }
      rep.stopping = config_.early_stop.patience > 0 && bad_epochs_ >= config_.early_stop.patience;
      if (sink) {
        sink->log_metric("val/loss", epoch, ev->loss);
        if (ev->regression) {
          sink->log_metric("val/mae", epoch, ev->values.mae);
          sink->log_metric("val/rmse", epoch, ev->values.rmse);
          sink->log_metric("val/r2", epoch, ev->values.r2);
        } else {
          sink->log_metric("val/accuracy", epoch, ev->accuracy);
          sink->log_metric("val/macro_f1", epoch, ev->macro_f1);
        }
      }
    }
    schedule_->on_metric(plateau_metric);
    if (in.progress)
      in.progress({epoch, config_.epochs, bi, batches, res.epoch_losses.back(),
                   static_cast<double>(seen) / std::max(secs, 1e-9),
                   static_cast<double>(config_.epochs - epoch) * train_time /
                       static_cast<double>(epoch - res.first_epoch + 1),
                   waited / std::max(secs, 1e-9), true, scaler_.scale(), scaler_.skipped(), lr_, step_,
                   res.step_losses.empty() ? 0.0 : res.step_losses.back(),
                   collective_ ? (collective_->seconds() - comm_epoch) / std::max(secs, 1e-9) : 0});
    if (in.on_epoch_end)
      if (auto r = in.on_epoch_end(rep); !r) return r.error();
    if (rep.stopping) {
      res.stopped_early = true;
      break;
    }
    if (rep.halt && epoch < config_.epochs) {
      res.paused = true;
      break;
    }
    if (config_.stop_after_epochs > 0 && epoch >= config_.stop_after_epochs &&
        epoch < config_.epochs) {
      res.paused = true;
      break;
    }
    if (config_.max_steps > 0 && step_ >= config_.max_steps) break;
  }
  res.steps = step_;
  res.world_size = world;
  res.comm_seconds = collective_ ? collective_->seconds() - comm_start : 0;
  res.loss_scale = scaler_.scale();
  res.skipped_steps = scaler_.skipped();
  res.best_epoch = best_epoch_;
  res.best_metric = best_metric_;
  res.final_loss = res.epoch_losses.empty() ? 0 : res.epoch_losses.back();
  if (in.test && !res.interrupted && !res.paused && !res.breakpoint) {
    auto ev = evaluate(*in.test);
    if (!ev) return ev.error();
    res.test = *ev;
    res.has_test = true;
    if (sink) {
      sink->log_metric("test/loss", step_, ev->loss);
      if (ev->regression) {
        sink->log_metric("test/mae", step_, ev->values.mae);
        sink->log_metric("test/rmse", step_, ev->values.rmse);
        sink->log_metric("test/r2", step_, ev->values.r2);
      } else {
        sink->log_metric("test/accuracy", step_, ev->accuracy);
        sink->log_metric("test/macro_f1", step_, ev->macro_f1);
      }
    }
  }
  std::vector<double> es = res.epoch_seconds;
  std::sort(es.begin(), es.end());
  res.median_epoch_seconds = es.empty() ? 0 : es[es.size() / 2];
  if (es.size() % 2 == 0 && !es.empty())
    res.median_epoch_seconds = (es[es.size() / 2 - 1] + es[es.size() / 2]) / 2;
  res.samples_per_s = static_cast<double>(trained) / std::max(train_time, 1e-9);
  res.seconds = now_s() - t_start;
  res.peak_bytes = backend_.memory().stats().total_peak;
  if (auto p = plans_.find({config_.batch_size, true}); p != plans_.end()) {
    const PlanStats& ps = p->second->plan->stats();
    res.planned_arena_bytes = static_cast<int64_t>(ps.arena_bytes);
    res.planned_step_bytes = static_cast<int64_t>(ps.arena_bytes + ps.own_buffer_bytes);
  }
  return res;
}

}  // namespace mls
