// Softmax, normalisation, dropout, embedding and losses.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

void register_norm_ops(OpRegistry& reg) { (void)reg; }

}  // namespace mls::ops
