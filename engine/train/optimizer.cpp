#include "engine/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "engine/core/op.h"

namespace mls {

Result<Optimizer> Optimizer::create(Backend& backend, const OptimizerConfig& c) {
  if (!(c.lr >= 0))
    return make_error("optimizer: lr must be >= 0, got " +
                      std::to_string(c.lr));  // 0: frozen (as PyTorch allows)
  if (c.weight_decay < 0)
    return make_error("optimizer: weight_decay must be >= 0, got " +
                      std::to_string(c.weight_decay));
  Optimizer o(backend, c);
  const char* op = nullptr;
  if (c.type == "sgd") {
    if (c.momentum < 0 || c.momentum >= 1)
      return make_error("optimizer: momentum must be in [0, 1)");
    op = "sgd_update";
    o.attrs_ = {{"lr", c.lr},
                {"momentum", c.momentum},
                {"weight_decay", c.weight_decay},
                {"nesterov", int64_t{c.nesterov}}};
  } else if (c.type == "adam" || c.type == "adamw") {
    op = "adam_update";
    o.state_per_param_ = 2;
    o.counts_steps_ = true;
    o.attrs_ = {{"lr", c.lr},
                {"beta1", c.beta1},
                {"beta2", c.beta2},
                {"eps", c.eps},
                {"weight_decay", c.weight_decay},
                {"step", int64_t{0}},
                {"decoupled", int64_t{c.type == "adamw"}}};
  } else if (c.type == "rmsprop") {
    if (c.alpha < 0 || c.alpha >= 1)
      return make_error("optimizer: rmsprop alpha must be in [0, 1), got " +
                        std::to_string(c.alpha));
    if (c.momentum != 0)
      return make_error("optimizer: rmsprop does not support momentum yet (set momentum = 0)");
    if (c.eps < 0) return make_error("optimizer: eps must be >= 0");
    op = "rmsprop_update";
    o.attrs_ = {{"lr", c.lr}, {"alpha", c.alpha}, {"eps", c.eps}, {"weight_decay", c.weight_decay}};
  } else if (c.type == "adagrad") {
    if (c.lr_decay < 0)
      return make_error("optimizer: adagrad lr_decay must be >= 0, got " +
                        std::to_string(c.lr_decay));
    if (c.eps < 0) return make_error("optimizer: eps must be >= 0");
    op = "adagrad_update";
    o.counts_steps_ = true;
    o.attrs_ = {{"lr", c.lr},
                {"eps", c.eps},
                {"weight_decay", c.weight_decay},
                {"lr_decay", c.lr_decay},
                {"step", int64_t{0}}};
  } else {
    return make_error("optimizer: unknown type '" + c.type +
                      "' (use sgd, adam, adamw, rmsprop or adagrad)");
  }
  const OpDef* def = op_registry().find(op);
  MLS_CHECK(def != nullptr, "optimizer op not registered (engine_init not called?)");
  o.kernel_ = def->kernel(backend.kind(), DType::F32);
  if (!o.kernel_)
    return make_error("optimizer: the " + std::string(backend.name()) + " backend has no '" + op +
                      "' kernel");
  return o;
}

void Optimizer::attach(const std::vector<Tensor>& params) {
  state_.clear();
  for (const Tensor& p : params) {
    std::vector<Tensor> s;
    for (size_t k = 0; k < state_per_param_; ++k)
      s.push_back(Tensor::zeros(*backend_, DType::F32, p.shape(), AllocTag::OptimizerState));
    state_.push_back(std::move(s));
  }
  cut_into_pieces(params);
}

// Every update is elementwise. Where the backend runs independent kernels side by side (the
// CPU's pool), the parameters are cut into pieces of about equal size, handed out as one
// group: one parallel job a step, evenly shared, instead of one per parameter, of which only
// the few largest were split across threads. LeNet-5 on 2 cores: 35 -> 22-25 us a step.
// Pieces are whole cache lines, about four a thread, so that a thread that starts late or is
// slowed by another process leaves its share to the others.
void Optimizer::cut_into_pieces(const std::vector<Tensor>& params) {
  pieces_.clear();
  views_.clear();
  calls_.clear();
  launches_.clear();
  const int threads = backend_->num_threads();
  if (threads <= 1) return;
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  constexpr int64_t kLine = 16, kMinPiece = 2048;
  int64_t piece = std::max(kMinPiece, (total + 4 * threads - 1) / (4 * threads));
  piece = (piece + kLine - 1) / kLine * kLine;
  for (size_t i = 0; i < params.size(); ++i)
    for (int64_t lo = 0; lo < params[i].numel(); lo += piece)
      pieces_.push_back({i, lo, std::min(piece, params[i].numel() - lo)});
  // The views are pointed at the step's tensors by step() and let go of after it: only their
  // shapes stay, so that a step allocates nothing and holds no buffer of a plan.
  const size_t n = 2 + state_per_param_;
  views_.resize(pieces_.size() * n);
  for (size_t j = 0; j < pieces_.size(); ++j)
    for (size_t t = 0; t < n; ++t)
      views_[j * n + t] = Tensor(nullptr, 0, DType::F32, Shape{pieces_[j].count});
  inputs_.resize(views_.size());
}

void Optimizer::set_lr(double lr) {
  attrs_.set("lr", lr);
}

void Optimizer::step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  MLS_CHECK(params.size() == grads.size() && params.size() == state_.size(),
            "Optimizer::step: params, grads and state differ in number");
  ++steps_;
  if (counts_steps_) attrs_.set("step", steps_);
  const size_t n = 2 + state_per_param_;
  MLS_CHECK(n <= 4, "Optimizer::step: too many state tensors");
  bool pieces = !pieces_.empty();
  for (size_t i = 0; i < params.size() && pieces; ++i)
    pieces = params[i].is_contiguous() && grads[i].is_contiguous();
  if (!pieces) {
    const Tensor* ins[4] = {};
    for (size_t i = 0; i < params.size(); ++i) {
      ins[0] = &params[i];
      ins[1] = &grads[i];
      for (size_t k = 0; k < state_per_param_; ++k) ins[2 + k] = &state_[i][k];
      backend_->launch(kernel_,
                       KernelCall{attrs_, std::span<const Tensor* const>(ins, n), {}, *backend_});
    }
    return;
  }
  for (size_t j = 0; j < pieces_.size(); ++j) {
    const Piece& pc = pieces_[j];
    MLS_CHECK(pc.lo + pc.count <= params[pc.param].numel(),
              "Optimizer::step: a parameter is smaller than the one attached");
    auto point = [&](Tensor& view, const Tensor& t) {
      const size_t at = t.byte_offset() + static_cast<size_t>(pc.lo) * dtype_size(t.dtype());
      view.reset_contiguous(t.buffer_ptr(), at, t.dtype(), view.shape());
    };
    point(views_[j * n], params[pc.param]);
    point(views_[j * n + 1], grads[pc.param]);
    for (size_t k = 0; k < state_per_param_; ++k) point(views_[j * n + 2 + k], state_[pc.param][k]);
  }
  // The calls are made here, not kept: they point at this object, which may have moved.
  calls_.clear();
  calls_.reserve(pieces_.size());  // launches_ point into calls_
  launches_.clear();
  for (size_t j = 0; j < pieces_.size(); ++j) {
    for (size_t t = 0; t < n; ++t) inputs_[j * n + t] = &views_[j * n + t];
    calls_.push_back(
        KernelCall{attrs_, std::span<const Tensor* const>(&inputs_[j * n], n), {}, *backend_});
    launches_.push_back(KernelLaunch{kernel_, &calls_.back(), nullptr});
  }
  backend_->launch_concurrent(launches_);
  for (Tensor& v : views_) v.release_buffer();
}

double Optimizer::clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  std::vector<std::vector<double>> host;
  double sq = 0;
  for (const Tensor& g : grads) {
    host.push_back(g.to_f64());
    for (double x : host.back()) sq += x * x;
  }
  double norm = std::sqrt(sq);
  double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    for (size_t i = 0; i < grads.size(); ++i) {
      std::vector<float> scaled(host[i].size());
      for (size_t j = 0; j < scaled.size(); ++j) scaled[j] = static_cast<float>(host[i][j] * coef);
      Tensor t = grads[i];  // a handle: writes reach the caller's buffer
      t.fill_from_host(scaled);
    }
  }
  return norm;
}

void Optimizer::clip_grad_value(const std::vector<Tensor>& grads, double clip) {
  MLS_CHECK(clip >= 0, "clip_grad_value: clip must be >= 0");
  for (const Tensor& g : grads) {
    std::vector<float> v = g.to_f32();
    auto c = static_cast<float>(clip);
    for (float& x : v) x = std::clamp(x, -c, c);
    Tensor t = g;
    t.fill_from_host(v);
  }
}

}  // namespace mls
