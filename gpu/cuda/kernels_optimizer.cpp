// The optimizers' in-place updates (device/optimizer.cu): the step-dependent scalars are
// computed here in double, as the CPU kernels do, and the device runs their float formula.
#include <cmath>

#include "engine/ops/optimizer_scalars.h"
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
  const AdamScalars s = adam_scalars(a);
  run(c, {.mode = dev::kAdam,
          .flag = a.get_int("decoupled") != 0 ? 1 : 0,
          .lr = s.decay,
          .a = f(a, "beta1"),
          .b = f(a, "beta2"),
          .c = f(a, "eps"),
          .d = f(a, "weight_decay"),
          .e = s.step,
          .f = s.vcorr});
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
  run(c, {.mode = dev::kAdagrad,
          .lr = adagrad_rate(a),
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
