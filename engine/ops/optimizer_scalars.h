// The step-dependent scalars of the optimizers' in-place updates, computed in double once
// per step from the op's attributes: every backend's kernel (engine/cpu, gpu/vulkan,
// gpu/cuda) then runs the same float formula with the same scalars.
//
//   AdamScalars s = adam_scalars(call.attrs);   // p -= s.step * m / (sqrt(v) * s.vcorr + eps)
#pragma once

#include "engine/core/attrs.h"

namespace mls {

struct AdamScalars {
  float step;   // lr / (1 - beta1^t): the bias-corrected rate
  float vcorr;  // 1 / sqrt(1 - beta2^t)
  float decay;  // 1 - lr * weight_decay (AdamW's decoupled decay)
};
AdamScalars adam_scalars(const Attrs& a);

// Adagrad's decayed rate: lr / (1 + (t - 1) lr_decay), t counting from 1.
float adagrad_rate(const Attrs& a);

}  // namespace mls
