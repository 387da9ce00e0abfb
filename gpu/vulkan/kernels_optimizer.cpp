// The optimizers' in-place updates (shaders/optimizer.comp): the step-dependent scalars are
// computed here in double, as the CPU kernels do, and the shader runs their float formula.
#include <cmath>

#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

struct UpdateParams {
  uint32_t n, mode, flag;
  float lr, a, b, c, d, e, f;
};

void run(const KernelCall& c, UpdateParams p) {
  VulkanBackend& be = vk(c);
  const Tensor* t[4];
  for (size_t i = 0; i < 4; ++i) t[i] = i < c.inputs.size() ? c.inputs[i] : c.inputs[0];
  for (size_t i = 0; i < c.inputs.size(); ++i)
    MLS_CHECK(c.inputs[i]->is_contiguous(), "vulkan: optimizer operands must be contiguous");
  p.n = u32(c.inputs[0]->numel());
  be.dispatch(Shader::optimizer, {t[0], t[1], t[2], t[3]}, p, be.groups_for(p.n));
}

float f(const Attrs& a, const char* name) { return static_cast<float>(a.get_float(name)); }

void sgd_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  run(c, {.mode = 0, .flag = a.get_int("nesterov") != 0 ? 1u : 0u, .lr = f(a, "lr"), .a = f(a, "momentum"),
          .b = f(a, "weight_decay")});
}

void adam_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  const double lr = a.get_float("lr"), b1 = a.get_float("beta1"), b2 = a.get_float("beta2");
  const auto t = static_cast<double>(a.get_int("step"));
  run(c, {.mode = 1,
          .flag = a.get_int("decoupled") != 0 ? 1u : 0u,
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
  run(c, {.mode = 2, .lr = f(a, "lr"), .a = f(a, "alpha"), .b = f(a, "eps"), .c = f(a, "weight_decay")});
}

void adagrad_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  const auto t = static_cast<double>(a.get_int("step"));
  run(c, {.mode = 3,
          .lr = static_cast<float>(a.get_float("lr") / (1 + (t - 1) * a.get_float("lr_decay"))),
          .a = f(a, "eps"),
          .b = f(a, "weight_decay")});
}

void ema_kernel(const KernelCall& c) { run(c, {.mode = 4, .a = f(c.attrs, "momentum")}); }

}  // namespace

void register_optimizer_kernels(OpRegistry& reg) {
  add_kernel(reg, "sgd_update", DType::F32, sgd_kernel);
  add_kernel(reg, "adam_update", DType::F32, adam_kernel);
  add_kernel(reg, "rmsprop_update", DType::F32, rmsprop_kernel);
  add_kernel(reg, "adagrad_update", DType::F32, adagrad_kernel);
  add_kernel(reg, "ema_update", DType::F32, ema_kernel);
}

}  // namespace mls::vulkan
