// Convolution and pooling.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

void register_conv_ops(OpRegistry& reg) { (void)reg; }

}  // namespace mls::ops
