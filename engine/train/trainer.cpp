#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/eager.h"
#include "engine/passes/passes.h"
#include "engine/train/init.h"
#include "engine/train/rng.h"

namespace mls {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

struct Trainer::StepPlan {
  ModelGraph mg;
  std::optional<CompiledPlan> plan;
  Tensor x, y;
  std::vector<Tensor> grads;
};

Trainer::Trainer(Backend& backend, ModelBuilder build, TrainConfig config)
    : backend_(backend), build_(std::move(build)), config_(std::move(config)) {}

Trainer::~Trainer() = default;

Result<void> Trainer::init() {
  if (config_.batch_size < 1) return make_error("batch size must be >= 1");
  auto mg = build_(config_.batch_size);
  if (!mg) return mg.error();
  const Graph& g = mg->graph;
  const Shape& in = g.type_of(mg->input).shape;
  sample_shape_.assign(in.begin() + 1, in.end());
  num_classes_ = g.type_of(mg->logits).shape.back();
  plans_.clear();  // plans bind the parameter tensors: they are rebuilt with the new ones
  params_.clear();
  param_names_.clear();
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Value& v = g.value(g.params()[i]);
    Tensor t = Tensor::empty(backend_, v.type.dtype, v.type.shape, AllocTag::Parameter);
    if (auto r = initialise(t, v.init, mix_seed(config_.seed, i)); !r)
      return make_error("parameter '" + v.name + "': " + r.error().message);
    params_.push_back(std::move(t));
    param_names_.push_back(v.name);
  }
  auto opt = Optimizer::create(backend_, config_.opt);
  if (!opt) return opt.error();
  opt_ = std::make_unique<Optimizer>(std::move(*opt));
  opt_->attach(params_);
  return {};
}

Result<Trainer::StepPlan*> Trainer::plan_for(int64_t batch, bool training) {
  auto key = std::make_pair(batch, training);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  auto mg = build_(batch);
  if (!mg) return mg.error();
  Graph& g = mg->graph;
  bool same = g.params().size() == params_.size();
  for (size_t i = 0; same && i < params_.size(); ++i) same = g.type_of(g.params()[i]).shape == params_[i].shape();
  if (!same) return make_error("the model built for batch " + std::to_string(batch) + " has other parameters");
  Refs outs;
  if (training) {
    auto grads = append_backward(g, mg->loss, g.params());
    if (!grads) return grads.error();
    outs.push_back(mg->loss);
    outs.insert(outs.end(), grads->begin(), grads->end());
  } else {
    outs = {mg->logits, mg->loss};
  }
  g.set_outputs(outs);
  auto stages = run_passes(g, backend_, default_passes());
  if (!stages) return stages.error();
  // Passes keep the order of inputs, parameters and outputs: map the model's handles.
  auto sp = std::make_unique<StepPlan>();
  Graph& opt = stages->back().graph;
  auto input_index = [&](Ref r) {
    return static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), r) - g.inputs().begin());
  };
  sp->mg.input = opt.inputs()[input_index(mg->input)];
  sp->mg.labels = opt.inputs()[input_index(mg->labels)];
  sp->mg.loss = opt.outputs()[training ? 0 : 1];
  if (!training) sp->mg.logits = opt.outputs()[0];
  PlanOptions po;
  if (training)
    for (size_t i = 1; i < opt.outputs().size(); ++i)
      // A gradient can be a constant (the loss does not reach that parameter): it needs no buffer.
      if (opt.value(opt.outputs()[i]).kind == ValueKind::Node)
        po.own_buffers.emplace_back(opt.outputs()[i], AllocTag::Gradient);
  sp->mg.graph = std::move(opt);
  const Graph& pg = sp->mg.graph;
  auto plan = CompiledPlan::compile(pg, backend_, po);
  if (!plan) return plan.error();
  sp->plan.emplace(std::move(*plan));
  sp->plan->set_profiling(profiling_);
  const ValueType xt = pg.type_of(sp->mg.input);
  sp->x = Tensor::empty(backend_, xt.dtype, xt.shape, AllocTag::Input);
  sp->y = Tensor::empty(backend_, DType::I64, {batch}, AllocTag::Input);
  auto check = [](Result<void> r) { MLS_CHECK(r.ok(), "binding a model input failed"); };
  check(sp->plan->bind(sp->mg.input, sp->x));
  check(sp->plan->bind(sp->mg.labels, sp->y));
  for (size_t i = 0; i < params_.size(); ++i) check(sp->plan->bind(pg.params()[i], params_[i]));
  if (training)
    for (size_t i = 1; i < pg.outputs().size(); ++i) sp->grads.push_back(sp->plan->tensor(pg.outputs()[i]));
  StepPlan* raw = sp.get();
  plans_[key] = std::move(sp);
  return raw;
}

Result<const CompiledPlan*> Trainer::training_plan(int64_t batch) {
  auto p = plan_for(batch, true);
  if (!p) return p.error();
  return &*(*p)->plan;
}

namespace {

Result<void> check_batch(const HostBatch& b, const Shape& sample, int64_t classes) {
  if (static_cast<int64_t>(b.x.size()) != b.size * numel(sample) ||
      static_cast<int64_t>(b.y.size()) != b.size)
    return make_error("a batch of " + std::to_string(b.size) + " samples has " +
                      std::to_string(b.x.size()) + " features and " + std::to_string(b.y.size()) +
                      " labels; the model expects " + shape_str(sample) + " per sample");
  for (int64_t i = 0; i < b.size; ++i)
    if (b.y[static_cast<size_t>(i)] < 0 || b.y[static_cast<size_t>(i)] >= classes)
      return make_error("label " + std::to_string(b.y[static_cast<size_t>(i)]) + " (sample " +
                        std::to_string(i) + " of the batch) is outside [0, " + std::to_string(classes) + ")");
  return {};
}

}  // namespace

Result<double> Trainer::eager_step(const HostBatch& batch) {
  auto mg = build_(batch.size);  // the same graph the static path compiles, replayed op by op
  if (!mg) return mg.error();
  const Graph& g = mg->graph;
  EagerSession s(backend_);
  std::vector<Ref> map(g.values().size());
  for (size_t i = 0; i < params_.size(); ++i) map[static_cast<size_t>(g.params()[i].id)] = s.leaf(params_[i], true);
  const ValueType xt = g.type_of(mg->input);
  Tensor x = Tensor::empty(backend_, xt.dtype, xt.shape, AllocTag::Input);
  x.fill_raw(batch.x.data(), x.nbytes());
  map[static_cast<size_t>(mg->input.id)] = s.leaf(x);
  map[static_cast<size_t>(mg->labels.id)] = s.leaf(Tensor::from_i64(backend_, {batch.size}, batch.y, AllocTag::Input));
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].kind == ValueKind::Const) map[i] = s.leaf(g.values()[i].constant);
  for (const Node& n : g.nodes()) {
    Refs ins;
    for (Ref r : n.inputs) ins.push_back(map[static_cast<size_t>(r.id)]);
    Refs outs = s.emit(n.op->name, ins, n.attrs);
    for (size_t k = 0; k < outs.size(); ++k) map[static_cast<size_t>(n.outputs[k].id)] = outs[k];
  }
  Ref loss = map[static_cast<size_t>(mg->loss.id)];
  Refs wrt;
  for (Ref p : g.params()) wrt.push_back(map[static_cast<size_t>(p.id)]);
  Refs grads = s.grad(loss, wrt);
  std::vector<Tensor> gt;
  for (size_t i = 0; i < grads.size(); ++i)
    gt.push_back(grads[i].valid() ? s.value(grads[i])
                                  : Tensor::zeros(backend_, DType::F32, params_[i].shape(), AllocTag::Gradient));
  float l = 0;
  const Tensor& lt = s.value(loss);
  backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), &l, sizeof l);
  opt_->step(params_, gt);
  return static_cast<double>(l);
}

Result<double> Trainer::train_step(const HostBatch& batch) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  if (auto c = check_batch(batch, sample_shape_, num_classes_); !c) return c.error();
  if (config_.mode == ExecMode::Eager) return eager_step(batch);
  auto p = plan_for(batch.size, true);
  if (!p) return p.error();
  StepPlan& sp = **p;
  sp.x.fill_raw(batch.x.data(), sp.x.nbytes());
  sp.y.fill_raw(batch.y.data(), sp.y.nbytes());
  sp.plan->run();
  float l = 0;
  const Tensor& lt = sp.plan->tensor(sp.mg.loss);
  backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), &l, sizeof l);
  opt_->step(params_, sp.grads);
  return static_cast<double>(l);
}

Result<EvalResult> Trainer::evaluate(BatchSource& data) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  EvalResult r;
  HostBatch b;
  std::vector<float> logits;
  data.start_epoch(0);
  double loss_sum = 0;
  r.confusion = ConfusionMatrix(num_classes_);
  while (data.next(config_.eval_batch_size, b)) {
    auto p = plan_for(b.size, false);
    if (!p) return p.error();
    StepPlan& sp = **p;
    int64_t classes = sp.mg.graph.type_of(sp.mg.logits).shape.back();
    if (auto c = check_batch(b, sample_shape_, classes); !c) return c.error();
    sp.x.fill_raw(b.x.data(), sp.x.nbytes());
    sp.y.fill_raw(b.y.data(), sp.y.nbytes());
    sp.plan->run();
    const Tensor& lt = sp.plan->tensor(sp.mg.logits);
    logits.resize(static_cast<size_t>(lt.numel()));
    backend_.copy_to_host(*lt.buffer(), lt.byte_offset(), logits.data(), lt.nbytes());
    float l = 0;
    const Tensor& lo = sp.plan->tensor(sp.mg.loss);
    backend_.copy_to_host(*lo.buffer(), lo.byte_offset(), &l, sizeof l);
    loss_sum += static_cast<double>(l) * static_cast<double>(b.size);
    r.confusion.add_logits(logits.data(), b.size, classes, b.y.data());
    r.samples += b.size;
  }
  if (r.samples == 0) return make_error("evaluation: the data set is empty");
  r.loss = loss_sum / static_cast<double>(r.samples);
  r.accuracy = r.confusion.accuracy();
  r.macro_f1 = r.confusion.macro_f1();
  return r;
}

Result<TrainResult> Trainer::fit(BatchSource& train, BatchSource* test, MetricSink* sink,
                                 const ProgressFn& progress, const std::atomic<bool>* cancel) {
  if (!opt_) {
    if (auto r = init(); !r) return r.error();
  }
  if (train.sample_shape() != sample_shape_)
    return make_error("the data's samples are " + shape_str(train.sample_shape()) +
                      " but the model's input is " + shape_str(sample_shape_));
  TrainResult res;
  const double t_start = now_s();
  const int64_t n = train.num_samples();
  const int64_t bs = config_.batch_size;
  const int64_t batches = (n + bs - 1) / bs;
  HostBatch b;
  int64_t step = 0, trained = 0;
  double train_time = 0;
  for (int64_t epoch = 1; epoch <= config_.epochs && !res.interrupted; ++epoch) {
    train.start_epoch(epoch - 1);
    const double t0 = now_s();
    double sum = 0;
    int64_t count = 0, bi = 0, seen = 0;
    while (train.next(bs, b)) {
      auto l = train_step(b);
      if (!l) return l.error();
      if (!std::isfinite(*l))
        return make_error("the loss became " + std::to_string(*l) + " at step " + std::to_string(step + 1) +
                          " (epoch " + std::to_string(epoch) + "); try a smaller learning rate");
      ++step;
      ++bi;
      trained += b.size;
      seen += b.size;
      sum += *l;
      ++count;
      res.step_losses.push_back(*l);
      if (sink) sink->log_metric("train/loss", step, *l);
      if (progress) {
        double el = now_s() - t0;
        double sps = static_cast<double>(seen) / std::max(el, 1e-9);
        double left = static_cast<double>((config_.epochs - epoch) * n + (n - seen));
        progress({epoch, config_.epochs, bi, batches, sum / static_cast<double>(count), sps, left / sps, false});
      }
      if ((cancel && cancel->load()) || (config_.max_steps > 0 && step >= config_.max_steps)) {
        res.interrupted = cancel && cancel->load();
        break;
      }
    }
    double secs = now_s() - t0;
    train_time += secs;
    if (count == 0) return make_error("the training set is empty");
    res.epoch_seconds.push_back(secs);
    res.epoch_losses.push_back(sum / static_cast<double>(count));
    if (sink) {
      sink->log_metric("epoch/train_loss", epoch, res.epoch_losses.back());
      sink->log_metric("epoch/seconds", epoch, secs);
      sink->log_metric("epoch/samples_per_s", epoch, static_cast<double>(seen) / secs);
    }
    if (progress)
      progress({epoch, config_.epochs, bi, batches, res.epoch_losses.back(),
                static_cast<double>(seen) / std::max(secs, 1e-9),
                static_cast<double>(config_.epochs - epoch) * train_time / static_cast<double>(epoch), true});
    if (config_.max_steps > 0 && step >= config_.max_steps) break;
  }
  res.steps = step;
  res.final_loss = res.epoch_losses.empty() ? 0 : res.epoch_losses.back();
  if (test && !res.interrupted) {
    auto ev = evaluate(*test);
    if (!ev) return ev.error();
    res.test = *ev;
    res.has_test = true;
    if (sink) {
      sink->log_metric("test/loss", step, ev->loss);
      sink->log_metric("test/accuracy", step, ev->accuracy);
      sink->log_metric("test/macro_f1", step, ev->macro_f1);
    }
  }
  std::vector<double> es = res.epoch_seconds;
  std::sort(es.begin(), es.end());
  res.median_epoch_seconds = es.empty() ? 0 : es[es.size() / 2];
  if (es.size() % 2 == 0 && !es.empty()) res.median_epoch_seconds = (es[es.size() / 2 - 1] + es[es.size() / 2]) / 2;
  res.samples_per_s = static_cast<double>(trained) / std::max(train_time, 1e-9);
  res.seconds = now_s() - t_start;
  res.peak_bytes = backend_.memory().stats().total_peak;
  if (auto p = plans_.find({bs, true}); p != plans_.end())
    res.planned_arena_bytes = static_cast<int64_t>(p->second->plan->stats().arena_bytes);
  return res;
}

}  // namespace mls
