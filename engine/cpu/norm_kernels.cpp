// CPU kernels: softmax, normalisation, dropout, embedding and losses.
#include "engine/cpu/kernels.h"

namespace mls::cpu {

void register_norm_kernels(OpRegistry& reg) { (void)reg; }

}  // namespace mls::cpu
