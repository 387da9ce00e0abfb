// More elementwise math: unary and binary ops, comparisons, where, cast.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

void register_math_ops(OpRegistry& reg) { (void)reg; }

}  // namespace mls::ops
