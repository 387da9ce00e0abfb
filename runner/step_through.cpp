#include "runner/step_through.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/replay.h"
#include "engine/train/mixed_precision.h"
#include "engine/train/rng.h"
#include "engine/train/trainer.h"

namespace mls::runner {

namespace {

Tensor clone(const Tensor& t, AllocTag tag) {
  Tensor out = Tensor::empty(t.backend(), t.dtype(), t.shape(), tag);
  Tensor src = t.is_contiguous() ? t : t.contiguous();
  std::vector<char> host(src.nbytes());
  if (!host.empty()) {
    src.backend().copy_to_host(*src.buffer(), src.byte_offset(), host.data(), host.size());
    out.fill_raw(host.data(), host.size());
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

}  // namespace

Result<std::unique_ptr<StepThrough>> StepThrough::open(Project project, Backend& backend) {
  std::unique_ptr<StepThrough> st(new StepThrough(std::move(project), backend));
  StepThrough& s = *st;
  s.config_ = s.project_.train_config();
  if (!s.project_.train) return make_error(s.project_.path + ": the project has no training data");
  // The parameters exactly as a run initialises them (the trainer's own init, its seed).
  Trainer t(backend, s.project_.builder(), s.config_);
  if (auto r = t.init(); !r) return make_error(s.project_.path + ": " + r.error().message);
  auto mg = s.project_.builder()(s.config_.batch_size, true);
  if (!mg) return mg.error();
  s.param_names_ = t.param_names();
  std::vector<Tensor> trainable;
  for (size_t i = 0; i < t.params().size(); ++i) {
    s.params_.push_back(clone(t.params()[i], AllocTag::Parameter));
    if (mg->graph.value(mg->graph.params()[i]).trainable) {
      s.trainable_.push_back(i);
      trainable.push_back(s.params_.back());
    }
  }
  s.start_params_ = s.params_;
  auto opt = Optimizer::create(backend, s.config_.opt);
  if (!opt) return make_error(s.project_.path + ": " + opt.error().message);
  s.opt_ = std::make_unique<Optimizer>(std::move(*opt));
  s.opt_->attach(trainable);
  for (const auto& per_param : s.opt_->state())
    for (const Tensor& x : per_param) s.start_opt_state_.push_back(x.to_f32());
  const int64_t n = s.project_.train->num_samples(), bs = s.config_.batch_size;
  s.batches_per_epoch_ = std::max<int64_t>((n + bs - 1) / bs, 1);
  // The schedule as the trainer makes it (Trainer::init and fit).
  ScheduleConfig sc = s.config_.schedule;
  sc.lr = s.config_.opt.lr;
  if (sc.type == "cosine" && sc.total_epochs <= 1) sc.total_epochs = s.config_.epochs;
  if (sc.type == "one_cycle" && sc.total_steps <= 0)
    sc.total_steps = s.config_.epochs * s.batches_per_epoch_;
  auto sched = make_schedule(sc);
  if (!sched) return make_error(s.project_.path + ": " + sched.error().message);
  s.schedule_ = std::move(*sched);
  return st;
}

Result<void> StepThrough::load_batch(int64_t batch) {
  if (batch < 0) return make_error("batch " + std::to_string(batch) + " does not exist");
  const int64_t epoch = batch / batches_per_epoch_, index = batch % batches_per_epoch_;
  BatchSource& src = *project_.train;
  if (loaded_epoch_ != epoch || loaded_next_ > index) {
    src.start_epoch(epoch);
    loaded_epoch_ = epoch;
    loaded_next_ = 0;
  }
  while (loaded_next_ <= index) {
    if (!src.next(config_.batch_size, host_batch_))
      return make_error(project_.path + ": the training split has no batch " +
                        std::to_string(batch));
    ++loaded_next_;
  }
  return {};
}

Result<void> StepThrough::evaluate(int64_t batch) {
  points_.clear();
  changes_.clear();
  cursor_ = -1;
  if (auto r = load_batch(batch); !r) return r;
  batch_ = batch;
  batch_size_ = host_batch_.size;
  // From the parameters and optimizer state at the start of this step.
  params_.clear();
  for (const Tensor& p : start_params_) params_.push_back(clone(p, AllocTag::Parameter));
  size_t k = 0;
  for (const auto& per_param : opt_->state())
    for (const Tensor& x : per_param) {
      Tensor t = x;
      t.fill_raw(start_opt_state_[k].data(), start_opt_state_[k].size() * sizeof(float));
      ++k;
    }

  auto mg = project_.builder()(batch_size_, true);
  if (!mg) return mg.error();
  autocast_model(*mg, config_.precision);
  Graph& g = mg->graph;
  const size_t forward_nodes = g.nodes().size();
  Refs wrt;
  for (size_t i : trainable_) wrt.push_back(g.params()[i]);
  // The loss unscaled: a scaled loss gives the same gradients after unscaling.
  auto grads = append_backward(g, mg->loss, wrt);
  if (!grads) return make_error(project_.path + ": " + grads.error().message);
  Refs outs{mg->loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  grad_values_.assign(params_.size(), -1);
  for (size_t i = 0; i < trainable_.size(); ++i) grad_values_[trainable_[i]] = (*grads)[i].id;

  // Replay op by op on the engine's kernels; every value is kept.
  EagerSession s(backend_);
  s.set_recording(false);  // the backward is part of the graph already
  s.set_deferred_errors(true);
  std::vector<Ref> map(g.values().size());
  values_.assign(g.values().size(), Tensor{});
  auto leaf = [&](Ref r, const Tensor& t) {
    map[static_cast<size_t>(r.id)] = s.leaf(t);
    values_[static_cast<size_t>(r.id)] = t;
  };
  for (size_t i = 0; i < params_.size(); ++i) leaf(g.params()[i], params_[i]);
  const ValueType xt = g.type_of(mg->input), yt = g.type_of(mg->labels);
  Tensor x = Tensor::empty(backend_, xt.dtype, xt.shape, AllocTag::Input);
  x.fill_raw(host_batch_.x.data(), x.nbytes());
  leaf(mg->input, x);
  Tensor y = Tensor::empty(backend_, yt.dtype, yt.shape, AllocTag::Input);
  if (yt.dtype == DType::I64)
    y.fill_raw(host_batch_.y.data(), y.nbytes());
  else
    y.fill_raw(host_batch_.t.data(), y.nbytes());
  leaf(mg->labels, y);
  if (mg->step_seed.valid()) {
    // As Trainer::step_seed: a fresh dropout mask per optimizer step.
    leaf(mg->step_seed,
         Tensor::from_i64(backend_, {1}, {training_step_seed(config_.seed, step_)}, AllocTag::Input));
  }
  if (auto r = replay(s, g, map); !r) return make_error(project_.path + ": " + r.error().message);
  for (size_t i = 0; i < map.size(); ++i)  // the constants and every node's outputs
    if (map[i].valid() && !values_[i].defined()) values_[i] = s.value(map[i]);
  loss_ = values_[static_cast<size_t>(mg->loss.id)].to_f64().at(0);
  graph_ = std::move(g);
  if (auto r = update(); !r) return r;
  build_points(forward_nodes, *mg);
  return {};
}

Result<void> StepThrough::update() {
  // The trainer's update (Trainer::apply_update) on copies of the gradients shown, so that
  // clipping leaves the shown gradients as the backward computed them.
  std::vector<Tensor> grads, trainable;
  for (size_t i : trainable_) {
    grads.push_back(clone(values_[static_cast<size_t>(grad_values_[i])], AllocTag::Gradient));
    trainable.push_back(params_[i]);
  }
  if (config_.clip_grad_value > 0) Optimizer::clip_grad_value(grads, config_.clip_grad_value);
  if (config_.clip_grad_norm > 0) Optimizer::clip_grad_norm(grads, config_.clip_grad_norm);
  lr_ = schedule_->lr_at(step_, batches_per_epoch_);
  opt_->set_lr(lr_);
  opt_->set_steps(step_);
  opt_->step(trainable, grads);
  changes_.clear();
  for (size_t i : trainable_) {
    ParamChange c;
    c.name = param_names_[i];
    c.before = start_params_[i];
    c.after = params_[i];
    const std::vector<double> b = c.before.to_f64(), a = c.after.to_f64();
    double d2 = 0, w2 = 0;
    for (size_t j = 0; j < b.size(); ++j) {
      const double d = a[j] - b[j];
      d2 += d * d;
      w2 += b[j] * b[j];
      c.max_abs_delta = std::max(c.max_abs_delta, std::abs(d));
    }
    c.delta_norm = std::sqrt(d2);
    c.weight_norm = std::sqrt(w2);
    c.relative = c.weight_norm > 0 ? c.delta_norm / c.weight_norm : 0;
    changes_.push_back(std::move(c));
  }
  return {};
}

Result<void> StepThrough::next_batch() {
  if (!evaluated()) return evaluate(0);
  // This step's result becomes the next one's start.
  start_params_ = params_;
  start_opt_state_.clear();
  for (const auto& per_param : opt_->state())
    for (const Tensor& x : per_param) start_opt_state_.push_back(x.to_f32());
  ++step_;
  return evaluate(batch_ + 1);
}

void StepThrough::build_points(size_t forward_nodes, const ModelGraph& mg) {
  const Graph& g = graph_;
  std::map<std::string, std::string> types;
  for (const nodes::NodeDoc& n : project_.doc.nodes) types[n.id] = n.type;
  auto type_of = [&](const std::string& id) {
    auto it = types.find(id);
    return it == types.end() ? std::string() : it->second;
  };
  // Consumers of each value, and where each value comes from.
  std::vector<std::vector<int32_t>> users(g.values().size());
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (Ref r : g.nodes()[i].inputs)
      users[static_cast<size_t>(r.id)].push_back(static_cast<int32_t>(i));
  std::vector<int> output_index(g.values().size(), -1);
  for (size_t i = 0; i < g.outputs().size(); ++i)
    output_index[static_cast<size_t>(g.outputs()[i].id)] = static_cast<int>(i);
  auto source_of = [&](Ref r) -> std::string {  // the document node a value comes from
    const Value& v = g.value(r);
    if (v.kind == ValueKind::Node) return g.nodes()[static_cast<size_t>(v.node)].label;
    return v.name;
  };

  // Where a point's kernels run: the device, or the host for ops the device has no kernel for
  // (views run nowhere: they alias).
  const DeviceKind kind = backend_.kind();
  const std::string device(backend_.name());
  auto place = [&](StepPoint& p) {
    size_t on_device = 0;
    for (int32_t ni : p.ir_nodes) {
      const Node& n = g.nodes()[static_cast<size_t>(ni)];
      if (n.op->view) continue;
      std::vector<ValueType> in, out;
      for (Ref r : n.inputs) in.push_back(g.type_of(r));
      for (Ref r : n.outputs) out.push_back(g.type_of(r));
      const DType kt = kernel_dtype(*n.op, in, out);
      if (kind != DeviceKind::CPU && n.op->kernel(kind, kt) == nullptr)
        p.host_ops.push_back(n.op->name + " at " + std::string(dtype_name(kt)));
      else
        ++on_device;
    }
    p.device = p.host_ops.empty() ? device : on_device == 0 ? "cpu" : device + " + cpu";
  };
  // Inputs first: the batch as it enters the model.
  for (Ref r : {mg.input, mg.labels}) {
    StepPoint p;
    p.phase = StepPhase::Forward;
    p.node = g.value(r).name;
    p.type = type_of(p.node);
    StepValue v{.role = StepValue::Role::Input, .caption = g.value(r).name, .value = r.id};
    std::vector<std::string> to;
    for (int32_t u : users[static_cast<size_t>(r.id)])
      if (static_cast<size_t>(u) < forward_nodes &&
          std::find(to.begin(), to.end(), g.nodes()[static_cast<size_t>(u)].label) == to.end())
        to.push_back(g.nodes()[static_cast<size_t>(u)].label);
    if (!to.empty()) v.caption += " → " + join(to, ", ");
    p.values.push_back(std::move(v));
    p.device = device;  // the batch is copied to the device
    points_.push_back(std::move(p));
  }

  // Consecutive IR nodes with one label (and one phase) are one point; the backward's seed
  // (no label) joins the point after it.
  struct Group {
    bool backward;
    std::string label;
    std::vector<int32_t> nodes;
  };
  std::vector<Group> groups;
  std::vector<int32_t> pending;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const bool bw = i >= forward_nodes;
    if (n.label.empty()) {
      pending.push_back(static_cast<int32_t>(i));
      continue;
    }
    if (groups.empty() || groups.back().backward != bw || groups.back().label != n.label ||
        !pending.empty())
      groups.push_back({bw, n.label, {}});
    Group& cur = groups.back();
    cur.nodes.insert(cur.nodes.end(), pending.begin(), pending.end());
    pending.clear();
    cur.nodes.push_back(static_cast<int32_t>(i));
  }
  if (!pending.empty()) groups.push_back({true, "", pending});
  // A forward group's values, by label: the gradients in backward name the wires they flow on.
  std::map<std::string, std::vector<int32_t>> forward_nodes_of;
  for (const Group& gr : groups)
    if (!gr.backward)
      forward_nodes_of[gr.label].insert(forward_nodes_of[gr.label].end(), gr.nodes.begin(),
                                        gr.nodes.end());

  for (const Group& gr : groups) {
    StepPoint p;
    p.phase = gr.backward ? StepPhase::Backward : StepPhase::Forward;
    p.node = gr.label;
    p.type = type_of(gr.label);
    p.ir_nodes = gr.nodes;
    const std::set<int32_t> in_group(gr.nodes.begin(), gr.nodes.end());
    // External (non-parameter) inputs of this node's forward: the wires whose gradients
    // its backward computes.
    std::vector<Ref> wires;
    std::set<int32_t> claimed;
    if (gr.backward) {
      auto it = forward_nodes_of.find(gr.label);
      if (it != forward_nodes_of.end()) {
        const std::set<int32_t> fw(it->second.begin(), it->second.end());
        for (int32_t ni : it->second)
          for (Ref r : g.nodes()[static_cast<size_t>(ni)].inputs) {
            const Value& v = g.value(r);
            const bool outside =
                v.kind == ValueKind::Input || (v.kind == ValueKind::Node && !fw.count(v.node));
            if (outside && std::find(wires.begin(), wires.end(), r) == wires.end())
              wires.push_back(r);
          }
      }
    }
    for (int32_t ni : gr.nodes) {
      for (Ref out : g.nodes()[static_cast<size_t>(ni)].outputs) {
        const size_t id = static_cast<size_t>(out.id);
        bool used_beyond = output_index[id] >= 0;
        for (int32_t u : users[id])
          if (!in_group.count(u) && (gr.backward || static_cast<size_t>(u) < forward_nodes))
            used_beyond = true;
        if (!used_beyond) continue;
        StepValue v;
        v.value = out.id;
        if (!gr.backward) {
          v.role = StepValue::Role::Activation;
          std::vector<std::string> to;
          for (int32_t u : users[id]) {
            const std::string& l = g.nodes()[static_cast<size_t>(u)].label;
            if (static_cast<size_t>(u) < forward_nodes && !in_group.count(u) &&
                std::find(to.begin(), to.end(), l) == to.end())
              to.push_back(l);
          }
          v.caption = out == mg.loss ? gr.label + " (the loss)" : gr.label + " → " + join(to, ", ");
          if (out == mg.logits && to.empty()) v.caption = gr.label + " (the model's output)";
        } else if (output_index[id] >= 1) {
          v.role = StepValue::Role::ParamGradient;
          for (size_t k = 0; k < trainable_.size(); ++k)
            if (grad_values_[trainable_[k]] == out.id)
              v.param = static_cast<int32_t>(trainable_[k]);
          v.caption = "∂loss/∂" + (v.param >= 0 ? param_names_[static_cast<size_t>(v.param)]
                                                : std::string("?"));
        } else {
          v.role = StepValue::Role::Gradient;
          // The wire into this node whose type it has (the first one not yet named).
          const ValueType t = g.type_of(out);
          std::string wire;
          for (Ref w : wires)
            if (!claimed.count(w.id) && g.type_of(w) == t) {
              claimed.insert(w.id);
              wire = source_of(w) + " → " + gr.label;
              break;
            }
          v.caption =
              wire.empty() ? "∂loss/∂ (a value of " + gr.label + ")" : "∂loss/∂(" + wire + ")";
        }
        p.values.push_back(std::move(v));
      }
    }
    place(p);
    // The wire's gradient first, then the parameters' in their order.
    std::stable_sort(p.values.begin(), p.values.end(), [](const StepValue& a, const StepValue& b) {
      return std::make_pair(a.role, a.param) < std::make_pair(b.role, b.param);
    });
    if (p.values.empty() && !gr.nodes.empty()) {
      const Node& last = g.nodes()[static_cast<size_t>(gr.nodes.back())];
      p.values.push_back(
          {.role = gr.backward ? StepValue::Role::Gradient : StepValue::Role::Activation,
           .caption = gr.label,
           .value = last.outputs.front().id});
    }
    points_.push_back(std::move(p));
  }

  // The update: one point per document node with trainable parameters, in forward order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> params_of;
  for (size_t k = 0; k < trainable_.size(); ++k) {
    const size_t i = trainable_[k];
    std::string node;
    for (int32_t u : users[static_cast<size_t>(g.params()[i].id)])
      if (static_cast<size_t>(u) < forward_nodes) {
        node = g.nodes()[static_cast<size_t>(u)].label;
        break;
      }
    if (node.empty()) node = param_names_[i].substr(0, param_names_[i].rfind('.'));
    changes_[k].node = node;
    if (!params_of.count(node)) order.push_back(node);
    params_of[node].push_back(i);
  }
  // Forward order of the nodes (the first use of their parameters).
  std::map<std::string, size_t> first_use;
  for (size_t i = 0; i < forward_nodes; ++i) first_use.emplace(g.nodes()[i].label, i);
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    auto fa = first_use.find(a), fb = first_use.find(b);
    return (fa == first_use.end() ? forward_nodes : fa->second) <
           (fb == first_use.end() ? forward_nodes : fb->second);
  });
  for (const std::string& node : order) {
    StepPoint p;
    p.device = device;  // optimizer kernels: every backend has them (parameters stay put)
    p.phase = StepPhase::Optimizer;
    p.node = node;
    p.type = type_of(node);
    for (size_t i : params_of[node])
      p.values.push_back({.role = StepValue::Role::Parameter,
                          .caption = param_names_[i] + " after the update",
                          .value = -1,
                          .param = static_cast<int32_t>(i)});
    points_.push_back(std::move(p));
  }
}

const Tensor& StepThrough::tensor(const StepValue& v) const {
  if (v.role == StepValue::Role::Parameter) return params_.at(static_cast<size_t>(v.param));
  return values_.at(static_cast<size_t>(v.value));
}

int32_t StepThrough::gradient_value(size_t param) const {
  return param < grad_values_.size() ? grad_values_[param] : -1;
}

bool StepThrough::step() {
  if (cursor_ + 1 >= static_cast<int>(points_.size())) return false;
  ++cursor_;
  return true;
}

bool StepThrough::step_back() {
  if (cursor_ < 0) return false;
  --cursor_;
  return true;
}

void StepThrough::seek(int cursor) {
  cursor_ = std::clamp(cursor, -1, static_cast<int>(points_.size()) - 1);
}

bool StepThrough::to_end_of_phase() {
  if (points_.empty()) return false;
  const int last = static_cast<int>(points_.size()) - 1;
  if (cursor_ >= last) return false;
  // From the last point of a phase: on to the end of the next one.
  int from = cursor_ + 1;
  const StepPhase ph = points_[static_cast<size_t>(from)].phase;
  if (cursor_ >= 0 && points_[static_cast<size_t>(cursor_)].phase == ph) from = cursor_;
  int end = from;
  while (end + 1 <= last && points_[static_cast<size_t>(end + 1)].phase == ph) ++end;
  cursor_ = end;
  return true;
}

int StepThrough::position_in_phase() const {
  if (cursor_ < 0) return 0;
  const StepPhase ph = current().phase;
  int n = 0;
  for (int i = 0; i <= cursor_; ++i) n += points_[static_cast<size_t>(i)].phase == ph;
  return n;
}

int StepThrough::phase_size(StepPhase p) const {
  return static_cast<int>(std::count_if(points_.begin(), points_.end(),
                                        [p](const StepPoint& x) { return x.phase == p; }));
}

}  // namespace mls::runner
