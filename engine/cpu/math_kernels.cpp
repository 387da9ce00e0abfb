// CPU kernels: more elementwise math: unary and binary ops, comparisons, where, cast.
#include "engine/cpu/kernels.h"

namespace mls::cpu {

void register_math_kernels(OpRegistry& reg) { (void)reg; }

}  // namespace mls::cpu
