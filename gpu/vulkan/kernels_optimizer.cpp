// The optimizers' in-place updates (shaders/optimizer.comp): the step-dependent scalars come
// from engine/ops/optimizer_scalars.h, as the CPU kernels', and the shader runs their float
// formula.
#include <cmath>

#include "engine/ops/optimizer_scalars.h"
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
  const AdamScalars s = adam_scalars(a);
  run(c, {.mode = 1,
          .flag = a.get_int("decoupled") != 0 ? 1u : 0u,
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
  run(c, {.mode = 2, .lr = f(a, "lr"), .a = f(a, "alpha"), .b = f(a, "eps"), .c = f(a, "weight_decay")});
}

void adagrad_kernel(const KernelCall& c) {
  const Attrs& a = c.attrs;
  run(c, {.mode = 3,
          .lr = adagrad_rate(a),
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
