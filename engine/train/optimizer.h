// Optimizers: SGD with momentum (and Nesterov, weight decay) and Adam/AdamW. State lives
// on the parameters' device, tagged OptimizerState; a step launches one update kernel per
// parameter and allocates nothing.
//
//   Optimizer opt(backend, {.type = "sgd", .lr = 0.05, .momentum = 0.9});
//   opt.attach(params);              // allocates the state once
//   opt.step(params, grads);         // in place
#pragma once

#include <string>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/result.h"
#include "engine/core/tensor.h"

namespace mls {

struct OptimizerConfig {
  std::string type = "sgd";  // "sgd", "adam", "adamw"
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

class Optimizer {
 public:
  static Result<Optimizer> create(Backend& backend, const OptimizerConfig& config);
  void attach(const std::vector<Tensor>& params);
  void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads);
  int64_t steps() const { return steps_; }
  const OptimizerConfig& config() const { return config_; }
  void set_lr(double lr);
  // State tensors per parameter (velocity; or m and v), for checkpoints.
  const std::vector<std::vector<Tensor>>& state() const { return state_; }

 private:
  Optimizer(Backend& b, OptimizerConfig c) : backend_(&b), config_(std::move(c)) {}
  Backend* backend_;
  OptimizerConfig config_;
  Attrs attrs_;  // built once; only "step" changes
  KernelFn kernel_ = nullptr;
  std::vector<std::vector<Tensor>> state_;
  int64_t steps_ = 0;
};

}  // namespace mls
