// Data-parallel training (Trainer::set_collective): rank 0's state to every rank, and the
// gradient all-reduce as steps of the training plan.
//
// Each rank trains on its slice of every global batch; the gradient each rank computes is the
// mean over its slice, so it is weighted by its share of the global batch (dist_weight_) before
// the sum over the ranks: the result is the gradient of the global batch's mean loss, the same
// as one rank training on the whole batch, up to the order of the summation. The step's loss
// and its finiteness check are summed the same way (the loss every rank reports is the global
// batch's), with a "stop" flag so a Ctrl-C on any rank stops every rank after the same step.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine/train/collective.h"
#include "engine/train/step_watch.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_step_plan.h"

namespace mls {

namespace {

// PyTorch DDP's bucket sizes: a small first bucket, so the first all-reduce starts early in the
// backward pass, then larger ones (fewer messages).
constexpr size_t kFirstBucketBytes = size_t{1} << 20;
constexpr size_t kBucketBytes = size_t{25} << 20;

void to_host(const Tensor& t, float* dst) {
  t.backend().copy_to_host(*t.buffer(), t.byte_offset(), dst, t.nbytes());
}

void from_host(const Tensor& t, const float* src) {
  t.backend().copy_to_device(*t.buffer(), t.byte_offset(), src, t.nbytes());
}

}  // namespace

void Trainer::set_collective(Collective* c) {
  collective_ = c && c->size() > 1 ? c : nullptr;
  // A train_step called outside fit averages full batches of every rank.
  dist_weight_ = collective_ ? 1.0 / collective_->size() : 1.0;
  plans_.clear();  // the training plans gain (or lose) their all-reduce steps
  watch_.reset();
}

Result<void> Trainer::sync_from_rank0() {
  Collective& c = *collective_;
  auto st = state();
  if (!st) return st.error();
  // The counters and settings as text (their keys may differ: a resumed state has more).
  std::string text;
  if (c.rank() == 0) {
    std::ostringstream os;
    os << st->step << ' ' << st->epoch << '\n';
    for (const auto& [k, v] : st->ints) os << "i " << k << ' ' << v << '\n';
    for (const auto& [k, v] : st->numbers) {
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      os << "n " << k << ' ' << bits << '\n';
    }
    text = os.str();
  }
  double sizes[2] = {static_cast<double>(text.size()), 0};
  for (const CheckpointTensor& t : st->tensors) sizes[1] += static_cast<double>(t.bytes.size());
  const double mine = sizes[1];
  if (auto r = c.broadcast(sizes, sizeof sizes); !r) return r.error();
  if (sizes[1] != mine)
    return make_error("rank " + std::to_string(c.rank()) + " holds " + std::to_string(mine) +
                      " bytes of parameters and optimizer state, rank 0 " +
                      std::to_string(sizes[1]) + ": every rank must train the same model");
  text.resize(static_cast<size_t>(sizes[0]));
  if (auto r = c.broadcast(text.data(), text.size()); !r) return r.error();
  for (CheckpointTensor& t : st->tensors)
    if (auto r = c.broadcast(t.bytes.data(), t.bytes.size()); !r) return r.error();
  if (c.rank() == 0) return {};
  std::istringstream is(text);
  is >> st->step >> st->epoch;
  st->ints.clear();
  st->numbers.clear();
  std::string kind, key;
  while (is >> kind >> key) {
    if (kind == "i") {
      is >> st->ints[key];
    } else {
      uint64_t bits = 0;
      is >> bits;
      double v = 0;
      std::memcpy(&v, &bits, sizeof v);
      st->numbers[key] = v;
    }
  }
  batch_in_epoch_ = 0;  // restore() reads it from the ints when rank 0 has one
  return restore(*st);
}

Result<void> Trainer::broadcast_buffers() {
  std::vector<float> host;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (std::find(trainable_.begin(), trainable_.end(), i) != trainable_.end()) continue;
    const Tensor& p = params_[i];
    if (p.dtype() != DType::F32) continue;
    host.resize(static_cast<size_t>(p.numel()));
    to_host(p, host.data());
    if (auto r = collective_->broadcast(host.data(), host.size() * sizeof(float)); !r) return r.error();
    from_host(p, host.data());
  }
  return {};
}

std::vector<PlanHook> Trainer::reduce_hooks(StepPlan& sp, const Graph& pg, size_t gradients) {
  // Buckets in reverse parameter order, the order the backward pass writes the gradients.
  sp.buckets.clear();
  const size_t first_cap = config_.bucket_bytes > 0 ? static_cast<size_t>(config_.bucket_bytes) : kFirstBucketBytes;
  const size_t cap = config_.bucket_bytes > 0 ? static_cast<size_t>(config_.bucket_bytes) : kBucketBytes;
  size_t bytes = 0;
  for (size_t k = gradients; k-- > 0;) {
    const ValueType t = pg.type_of(pg.outputs()[k + 1]);
    if (sp.buckets.empty() || bytes >= (sp.buckets.size() == 1 ? first_cap : cap)) {
      sp.buckets.emplace_back();
      bytes = 0;
    }
    sp.buckets.back().grads.push_back(k);
    bytes += static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype);
  }
  std::vector<PlanHook> hooks;
  for (size_t b = 0; b < sp.buckets.size(); ++b) {
    PlanHook h;
    h.name = "all_reduce_start";
    size_t floats = 0;
    std::string names;
    for (size_t k : sp.buckets[b].grads) {
      h.after.push_back(pg.outputs()[k + 1]);
      floats += static_cast<size_t>(numel(pg.type_of(pg.outputs()[k + 1]).shape));
      names += (names.empty() ? "" : ", ") + param_names_[trainable_[k]];
    }
    sp.buckets[b].host.assign(floats, 0.0f);
    h.label = "bucket " + std::to_string(b) + ": " + names;
    h.run = [this, &sp, b](std::span<const Tensor* const> grads) { start_bucket(sp, b, grads); };
    hooks.push_back(std::move(h));
  }
  // The wait: after every gradient, the loss and the mixed-precision check.
  PlanHook w;
  w.name = "all_reduce_wait";
  w.label = std::to_string(sp.buckets.size()) + (sp.buckets.size() == 1 ? " bucket" : " buckets");
  for (size_t k = 0; k < gradients; ++k) w.after.push_back(pg.outputs()[k + 1]);
  w.after.push_back(sp.mg.loss);
  if (sp.check.valid()) w.after.push_back(sp.check);
  w.run = [this, &sp](std::span<const Tensor* const> outs) { finish_buckets(sp, outs); };
  hooks.push_back(std::move(w));
  sp.extras.assign(3, 0.0f);
  return hooks;
}

void Trainer::start_bucket(StepPlan& sp, size_t bucket, std::span<const Tensor* const> grads) {
  if (dist_error_) return;
  StepPlan::Bucket& b = sp.buckets[bucket];
  size_t at = 0;
  for (const Tensor* g : grads) {
    MLS_CHECK(g->dtype() == DType::F32 && g->is_contiguous(), "data-parallel: a gradient is not contiguous f32");
    to_host(*g, b.host.data() + at);
    at += static_cast<size_t>(g->numel());
  }
  const auto w = static_cast<float>(dist_weight_);
  if (w != 1.0f)
    for (float& v : b.host) v *= w;
  if (auto r = collective_->start_sum(b.host.data(), b.host.size()); !r) {
    dist_error_ = r.error();
    return;
  }
  collective_->progress();
}

void Trainer::finish_buckets(StepPlan& sp, std::span<const Tensor* const> outs) {
  if (dist_error_) return;
  const size_t gradients = outs.size() - (sp.check.valid() ? 2 : 1);
  const Tensor& loss = *outs[gradients];
  float l = 0, check = 0;
  to_host(loss, &l);
  if (sp.check.valid()) to_host(*outs[gradients + 1], &check);
  const bool stop = fit_in_ && fit_in_->cancel && fit_in_->cancel->load();
  sp.extras = {l * static_cast<float>(dist_weight_), check, stop ? 1.0f : 0.0f};
  if (auto r = collective_->start_sum(sp.extras.data(), sp.extras.size()); !r) {
    dist_error_ = r.error();
    return;
  }
  if (auto r = collective_->wait_all(); !r) {
    dist_error_ = r.error();
    return;
  }
  for (const StepPlan::Bucket& b : sp.buckets) {
    size_t at = 0;
    for (size_t k : b.grads) {
      from_host(*outs[k], b.host.data() + at);
      at += static_cast<size_t>(outs[k]->numel());
    }
  }
  // Every rank reads the global batch's loss and one verdict on finiteness (a NaN anywhere
  // makes the sum NaN: every rank skips the step alike).
  from_host(loss, &sp.extras[0]);
  if (sp.check.valid()) from_host(*outs[gradients + 1], &sp.extras[1]);
  dist_stop_ = dist_stop_ || sp.extras[2] > 0;
}

Result<void> Trainer::reduce_now(std::vector<Tensor>& grads, float& loss, const Tensor* check) {
  size_t floats = 0;
  for (const Tensor& g : grads) floats += static_cast<size_t>(g.numel());
  std::vector<float> host(floats + 3);
  size_t at = 0;
  for (const Tensor& g : grads) {
    to_host(g, host.data() + at);
    at += static_cast<size_t>(g.numel());
  }
  host[floats] = loss;
  const bool stop = fit_in_ && fit_in_->cancel && fit_in_->cancel->load();
  host[floats + 1] = stop ? 1.0f : 0.0f;
  if (check) to_host(*check, &host[floats + 2]);
  const auto w = static_cast<float>(dist_weight_);
  for (size_t i = 0; i <= floats; ++i) host[i] *= w;
  if (auto r = collective_->start_sum(host.data(), host.size()); !r) return r.error();
  if (auto r = collective_->wait_all(); !r) return r.error();
  at = 0;
  for (Tensor& g : grads) {
    from_host(g, host.data() + at);
    at += static_cast<size_t>(g.numel());
  }
  loss = host[floats];
  if (check) from_host(*check, &host[floats + 2]);
  dist_stop_ = dist_stop_ || host[floats + 1] > 0;
  return {};
}

}  // namespace mls
