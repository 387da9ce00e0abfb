// Reductions (max, min, var) and layout ops: slice, concat, split, gather, pad, squeeze.
#include "engine/ops/op_helpers.h"

namespace mls::ops {

void register_layout_ops(OpRegistry& reg) { (void)reg; }

}  // namespace mls::ops
