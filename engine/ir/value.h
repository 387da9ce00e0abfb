// Ref and ValueType moved to engine/core/value.h (ops infer ValueTypes, and core must not
// include ir); this header keeps the old path working for code above ir.
//
//   #include "engine/core/value.h"   // new code includes it directly
#pragma once

#include "engine/core/value.h"
