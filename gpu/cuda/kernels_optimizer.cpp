// The optimizers' in-place updates (device/optimizer.cu): the step-dependent scalars are
// computed here in double, as the CPU kernels do, and the device runs their float formula.
#include <cmath>

#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

void run(const KernelCall& c, dev::UpdateArgs u) {
  for (const Tensor* t : c.inputs)
    MLS_CHECK(t->is_contiguous(), "cuda: optimizer operands must be contiguous");
  u.p = dptr<float>(*c.inputs[0]);
  u.g = dptr<float>(*c.inputs[1]);
  u.s1 = c.inputs.size() > 2 ? dptr<float>(*c.inputs[2]) : nullptr;
  u.s2 = c.inputs.size() > 3 ? dptr<float>(*c.inputs[3]) : nullptr;
  u.n = c.inputs[0]->numel();
  dev::optimizer_update(u, cu(c).stream());
}

float f(const Attrs& a, const char* name) {
  return static_cast<float>(a.get_float(name));
}

void sgd_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  run(c, {.mode = dev::kSgd,
          .flag = a.get_int("nesterov") != 0 ? 1 : 0,
          .lr = f(a, "lr"),
          .a = f(a, "momentum"),
          .b = f(a, "weight_decay")});
}

void adam_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  const double lr = a.get_float("lr"), b1 = a.get_float("beta1"), b2 = a.get_float("beta2");
  const auto t = static_cast<double>(a.get_int("step"));
  run(c, {.mode = dev::kAdam,
          .flag = a.get_int("decoupled") != 0 ? 1 : 0,
          .lr = static_cast<float>(1.0 - lr * a.get_float("weight_decay")),
          .a = static_cast<float>(b1),
          .b = static_cast<float>(b2),
          .c = f(a, "eps"),
          .d = f(a, "weight_decay"),
          .e = static_cast<float>(lr / (1.0 - std::pow(b1, t))),
          .f = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, t)))});
}

void rmsprop_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  run(c, {.mode = dev::kRmsprop,
          .lr = f(a, "lr"),
          .a = f(a, "alpha"),
          .b = f(a, "eps"),
          .c = f(a, "weight_decay")});
}

void adagrad_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  const auto t = static_cast<double>(a.get_int("step"));
  run(c, {.mode = dev::kAdagrad,
          .lr = static_cast<float>(a.get_float("lr") / (1 + (t - 1) * a.get_float("lr_decay"))),
          .a = f(a, "eps"),
          .b = f(a, "weight_decay")});
}

void ema_kernel(const KernelCall& c) {
  run(c, {.mode = dev::kEma, .a = f(c.attrs, "momentum")});
}

}  // namespace

void register_optimizer_kernels(OpRegistry& reg) {
  add_kernel(reg, "sgd_update", DType::F32, sgd_kernel);
  add_kernel(reg, "adam_update", DType::F32, adam_kernel);
  add_kernel(reg, "rmsprop_update", DType::F32, rmsprop_kernel);
  add_kernel(reg, "adagrad_update", DType::F32, adagrad_kernel);
  add_kernel(reg, "ema_update", DType::F32, ema_kernel);
}

}  // namespace mls::cuda
