// Optimizer steps (f32, in place).
#include <cmath>

#include "engine/ops/optimizer_scalars.h"
#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

void sgd_kernel(const KernelCall& c) {
  float* p = in_ptr<float>(c, 0);
  const float* g = in_ptr<float>(c, 1);
  float* v = in_ptr<float>(c, 2);
  auto lr = static_cast<float>(c.attrs.get_float("lr"));
  auto m = static_cast<float>(c.attrs.get_float("momentum"));
  auto wd = static_cast<float>(c.attrs.get_float("weight_decay"));
  bool nesterov = c.attrs.get_int("nesterov") != 0;
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    if (nesterov) {
      for (int64_t i = lo; i < hi; ++i) {
        float gi = g[i] + wd * p[i];
        v[i] = m * v[i] + gi;
        p[i] -= lr * (gi + m * v[i]);
      }
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        float gi = g[i] + wd * p[i];
        v[i] = m * v[i] + gi;
        p[i] -= lr * v[i];
      }
    }
  });
}

void ema_kernel(const KernelCall& c) {
  float* s = in_ptr<float>(c, 0);
  const float* v = in_ptr<float>(c, 1);
  auto m = static_cast<float>(c.attrs.get_float("momentum"));
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) s[i] += m * (v[i] - s[i]);
  });
}

void adam_kernel(const KernelCall& c) {
  float* p = in_ptr<float>(c, 0);
  const float* g = in_ptr<float>(c, 1);
  float* m = in_ptr<float>(c, 2);
  float* v = in_ptr<float>(c, 3);
  auto eps = static_cast<float>(c.attrs.get_float("eps"));
  auto wd = static_cast<float>(c.attrs.get_float("weight_decay"));
  bool decoupled = c.attrs.get_int("decoupled") != 0;
  // Bias corrections folded into two scalars, computed in double once per step.
  const AdamScalars sc = adam_scalars(c.attrs);
  const float step = sc.step, vcorr = sc.vcorr, decay = sc.decay;
  auto fb1 = static_cast<float>(c.attrs.get_float("beta1")), fb2 = static_cast<float>(c.attrs.get_float("beta2"));
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float gi = g[i];
      if (decoupled)
        p[i] *= decay;
      else
        gi += wd * p[i];
      m[i] = fb1 * m[i] + (1 - fb1) * gi;
      v[i] = fb2 * v[i] + (1 - fb2) * gi * gi;
      p[i] -= step * m[i] / (std::sqrt(v[i]) * vcorr + eps);
    }
  });
}

void rmsprop_kernel(const KernelCall& c) {
  float* p = in_ptr<float>(c, 0);
  const float* g = in_ptr<float>(c, 1);
  float* s = in_ptr<float>(c, 2);
  auto lr = static_cast<float>(c.attrs.get_float("lr"));
  auto alpha = static_cast<float>(c.attrs.get_float("alpha"));
  auto eps = static_cast<float>(c.attrs.get_float("eps"));
  auto wd = static_cast<float>(c.attrs.get_float("weight_decay"));
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float gi = g[i] + wd * p[i];
      s[i] = alpha * s[i] + (1 - alpha) * gi * gi;
      p[i] -= lr * gi / (std::sqrt(s[i]) + eps);
    }
  });
}

void adagrad_kernel(const KernelCall& c) {
  float* p = in_ptr<float>(c, 0);
  const float* g = in_ptr<float>(c, 1);
  float* s = in_ptr<float>(c, 2);
  const float clr = adagrad_rate(c.attrs);  // computed in double once per step
  auto eps = static_cast<float>(c.attrs.get_float("eps"));
  auto wd = static_cast<float>(c.attrs.get_float("weight_decay"));
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float gi = g[i] + wd * p[i];
      s[i] += gi * gi;
      p[i] -= clr * gi / (std::sqrt(s[i]) + eps);
    }
  });
}

}  // namespace

void register_optimizer_kernels(OpRegistry& reg) {
  reg.register_kernel("sgd_update", DeviceKind::CPU, DType::F32, sgd_kernel);
  reg.register_kernel("adam_update", DeviceKind::CPU, DType::F32, adam_kernel);
  reg.register_kernel("ema_update", DeviceKind::CPU, DType::F32, ema_kernel);
  reg.register_kernel("rmsprop_update", DeviceKind::CPU, DType::F32, rmsprop_kernel);
  reg.register_kernel("adagrad_update", DeviceKind::CPU, DType::F32, adagrad_kernel);
}

}  // namespace mls::cpu
