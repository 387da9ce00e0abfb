#include "engine/train/optimizer.h"

#include "engine/core/op.h"

namespace mls {

Result<Optimizer> Optimizer::create(Backend& backend, const OptimizerConfig& c) {
  if (c.lr <= 0) return make_error("optimizer: lr must be > 0, got " + std::to_string(c.lr));
  Optimizer o(backend, c);
  const char* op = nullptr;
  if (c.type == "sgd") {
    if (c.momentum < 0 || c.momentum >= 1) return make_error("optimizer: momentum must be in [0, 1)");
    op = "sgd_update";
    o.attrs_ = {{"lr", c.lr}, {"momentum", c.momentum}, {"weight_decay", c.weight_decay},
                {"nesterov", int64_t{c.nesterov}}};
  } else if (c.type == "adam" || c.type == "adamw") {
    op = "adam_update";
    o.attrs_ = {{"lr", c.lr}, {"beta1", c.beta1}, {"beta2", c.beta2}, {"eps", c.eps},
                {"weight_decay", c.weight_decay}, {"step", int64_t{0}},
                {"decoupled", int64_t{c.type == "adamw"}}};
  } else {
    return make_error("optimizer: unknown type '" + c.type + "' (use sgd, adam or adamw)");
  }
  const OpDef* def = op_registry().find(op);
  MLS_CHECK(def != nullptr, "optimizer op not registered (engine_init not called?)");
  o.kernel_ = def->kernel(backend.kind(), DType::F32);
  if (!o.kernel_)
    return make_error("optimizer: the " + std::string(backend.name()) + " backend has no '" + op + "' kernel");
  return o;
}

void Optimizer::attach(const std::vector<Tensor>& params) {
  state_.clear();
  size_t per = config_.type == "sgd" ? 1 : 2;
  for (const Tensor& p : params) {
    std::vector<Tensor> s;
    for (size_t k = 0; k < per; ++k)
      s.push_back(Tensor::zeros(*backend_, DType::F32, p.shape(), AllocTag::OptimizerState));
    state_.push_back(std::move(s));
  }
}

void Optimizer::set_lr(double lr) { attrs_.set("lr", lr); }

void Optimizer::step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  MLS_CHECK(params.size() == grads.size() && params.size() == state_.size(),
            "Optimizer::step: params, grads and state differ in number");
  ++steps_;
  if (config_.type != "sgd") attrs_.set("step", steps_);
  for (size_t i = 0; i < params.size(); ++i) {
    if (config_.type == "sgd") {
      const Tensor* ins[3] = {&params[i], &grads[i], &state_[i][0]};
      backend_->launch(kernel_, KernelCall{attrs_, ins, {}, *backend_});
    } else {
      const Tensor* ins[4] = {&params[i], &grads[i], &state_[i][0], &state_[i][1]};
      backend_->launch(kernel_, KernelCall{attrs_, ins, {}, *backend_});
    }
  }
}

}  // namespace mls
