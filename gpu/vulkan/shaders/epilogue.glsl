// The activation of a GEMM or convolution epilogue, generated from the epilogue list
// (MLS_EPILOGUE_ACTS in engine/ops/elementwise_list.h): one case per act, numbered by
// fused_codes.glsl (gpu/vulkan/fused_codes.cmake) as EpilogueAct, calling the formula of the
// act's elementwise entry from common.glsl (include that first). An act without a formula
// fails glslc here ("'frobnicate_' : no matching overloaded function found").
// matmul.comp, matmul_lowp.comp, matmul_rows.comp and conv2d.comp apply it before the store.
#include "engine/ops/elementwise_list.h"
#include "gpu/vulkan/fused_codes.glsl"

// v with act applied (act: an EpilogueAct; EA_None leaves v).
float epilogue(float v, uint act) {
#define EPILOGUE_CASE(Name, text) \
  case EA_##Name: return text##_(v);
  switch (act) {
    MLS_EPILOGUE_ACTS(EPILOGUE_CASE)
  }
#undef EPILOGUE_CASE
  return v;
}
