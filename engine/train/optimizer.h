// Optimizers: SGD with momentum (and Nesterov, weight decay), Adam/AdamW, RMSprop and
// Adagrad, with PyTorch's formulas. State lives on the parameters' device, tagged
// OptimizerState; a step launches one update kernel per parameter (per piece of one, where
// the backend runs kernels side by side) and allocates nothing once warm.
//
//   Optimizer opt(backend, {.type = "sgd", .lr = 0.05, .momentum = 0.9});
//   opt.attach(params);              // allocates the state once
//   Optimizer::clip_grad_norm(grads, 1.0);  // optional, before the step
//   opt.step(params, grads);         // in place
#pragma once

#include <string>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/core/tensor.h"

namespace mls {

struct OptimizerConfig {
  std::string type = "sgd";  // "sgd", "adam", "adamw", "rmsprop", "adagrad"
  double lr = 0.01;
  double momentum = 0.0;  // sgd only (rmsprop has no momentum here)
  bool nesterov = false;
  double weight_decay = 0.0;
  // eps serves adam, rmsprop and adagrad; PyTorch's Adagrad default is 1e-10: set it to match.
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double alpha = 0.99;    // rmsprop: smoothing of the square average
  double lr_decay = 0.0;  // adagrad: lr / (1 + (step - 1) lr_decay)
};

class Optimizer {
 public:
  static Result<Optimizer> create(Backend& backend, const OptimizerConfig& config);
  void attach(const std::vector<Tensor>& params);
  void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads);
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }  // when restoring a checkpoint
  const OptimizerConfig& config() const { return config_; }
  void set_lr(double lr);
  // State tensors per parameter (velocity; m and v; square_avg; sum), for checkpoints.
  const std::vector<std::vector<Tensor>>& state() const { return state_; }
  // The bytes of state attach() allocates for a parameter of `elements` values (f32).
  int64_t state_bytes(int64_t elements) const {
    return static_cast<int64_t>(state_per_param_) * elements * 4;
  }

  // As torch.nn.utils.clip_grad_norm_: scales all grads by max_norm / (norm + 1e-6) when
  // that is below 1; returns the total L2 norm before clipping. For now the grads are
  // copied to the host and back (in double); a device kernel comes later.
  static double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);
  // As torch.nn.utils.clip_grad_value_: clamps every element to [-clip, clip] (host copy).
  static void clip_grad_value(const std::vector<Tensor>& grads, double clip);

 private:
  Optimizer(Backend& b, OptimizerConfig c) : backend_(&b), config_(std::move(c)) {}
  Backend* backend_;
  OptimizerConfig config_;
  Attrs attrs_;  // built once; only "step" and "lr" change
  KernelFn kernel_ = nullptr;
  size_t state_per_param_ = 1;
  bool counts_steps_ = false;  // the op takes a "step" attribute
  std::vector<std::vector<Tensor>> state_;
  int64_t steps_ = 0;
  // Where the backend runs kernels side by side: pieces of the parameters, each launched
  // with views of the step's tensors (see cut_into_pieces).
  struct Piece {
    size_t param;
    int64_t lo, count;
  };
  void cut_into_pieces(const std::vector<Tensor>& params);
  std::vector<Piece> pieces_;
  std::vector<Tensor> views_;
  std::vector<const Tensor*> inputs_;
  std::vector<KernelCall> calls_;
  std::vector<KernelLaunch> launches_;
};

}  // namespace mls
