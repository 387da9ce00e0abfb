// The elementwise ops' dispatch, generated from the list (engine/ops/elementwise_list.h):
// one case per entry, numbered by fused_codes.glsl (gpu/vulkan/fused_codes.cmake), calling
// the entry's formula from common.glsl (include that first). An entry without a formula
// fails glslc here ("'frobnicate_' : no matching overloaded function found").
// elementwise.comp, ew_simple.comp and fused.comp all run ops through ew_apply.
#include "engine/ops/elementwise_list.h"
#include "gpu/vulkan/fused_codes.glsl"

// Op `op` (a FusedCode other than Input and Const) on operands a, b and attributes p0, p1.
float ew_apply(uint op, float a, float b, float p0, float p1) {
#define EW_CASE(Name, text, opname, operands, params) \
  case FC_##Name: return MLS_EW_CALL(operands, params, text##_, a, b, p0, p1);
  switch (op) {
    MLS_ELEMENTWISE(EW_CASE)
  }
#undef EW_CASE
  return 0.0 / 0.0;
}

// How many operands op takes (1 or 2; 0 for Input and Const).
uint ew_operands(uint op) {
#define EW_OPERANDS(Name, text, opname, operands, params) \
  case FC_##Name: return uint(operands);
  switch (op) {
    MLS_ELEMENTWISE(EW_OPERANDS)
  }
#undef EW_OPERANDS
  return 0u;
}
