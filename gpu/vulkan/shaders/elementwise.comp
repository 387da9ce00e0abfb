#version 450
// Every f32 elementwise op and fused_elementwise: a program of instructions (FusedCode
// numbering, engine/ops/fused.h) run per output element. The table holds the program and
// how each input is read: in place (its index is the output's), a scalar, or gathered
// through broadcast strides over the output's (collapsed) dims.
//   table: ninstr, rank, ninputs, dims[rank], per input {mode, strides[rank]},
//          per instruction {code, a, b, p0 bits, p1 bits}
// Programs up to 48 instructions run specialised instead (fused.comp).
#include "common.glsl"
#include "ew_apply.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer T { uint t[]; };
layout(std430, binding = 2) readonly buffer X0 { float x0[]; };
layout(std430, binding = 3) readonly buffer X1 { float x1[]; };
layout(std430, binding = 4) readonly buffer X2 { float x2[]; };
layout(std430, binding = 5) readonly buffer X3 { float x3[]; };
layout(std430, binding = 6) readonly buffer X4 { float x4[]; };
layout(std430, binding = 7) readonly buffer X5 { float x5[]; };
layout(std430, binding = 8) readonly buffer X6 { float x6[]; };
layout(std430, binding = 9) readonly buffer X7 { float x7[]; };
layout(push_constant) uniform P { uint off[10]; uint n; } pc;

const uint kMaxInstr = 96;

float load(uint k, uint e) {
  switch (k) {
    case 0u: return x0[pc.off[2] + e];
    case 1u: return x1[pc.off[3] + e];
    case 2u: return x2[pc.off[4] + e];
    case 3u: return x3[pc.off[5] + e];
    case 4u: return x4[pc.off[6] + e];
    case 5u: return x5[pc.off[7] + e];
    case 6u: return x6[pc.off[8] + e];
    default: return x7[pc.off[9] + e];
  }
}

void main() {
  const uint tb = pc.off[1];
  const uint ninstr = t[tb], rank = t[tb + 1], ninputs = t[tb + 2];
  const uint dims = tb + 3, inputs = dims + rank, code = inputs + ninputs * (1 + rank);
  float r[kMaxInstr];
  GRID_LOOP(i, pc.n) {
    for (uint k = 0; k < ninstr; ++k) {
      const uint c = code + 5 * k;
      const uint op = t[c];
      const float p0 = uintBitsToFloat(t[c + 3]), p1 = uintBitsToFloat(t[c + 4]);
      float v;
      if (op == FC_Input) {
        const uint src = uint(p0);
        const uint s = inputs + src * (1 + rank);
        const uint mode = t[s];
        uint e = i;
        if (mode == 1u) {
          e = 0u;
        } else if (mode == 2u) {
          e = 0u;
          uint rest = i;
          for (uint d = rank; d-- > 0u;) {
            const uint dim = t[dims + d];
            e += (rest % dim) * t[s + 1 + d];
            rest /= dim;
          }
        }
        v = load(src, e);
      } else if (op == FC_Const) {
        v = p0;
      } else {
        // Operands are earlier instructions (the host writes 0 for an absent b: r[0] has run).
        v = ew_apply(op, r[t[c + 1]], r[t[c + 2]], p0, p1);
      }
      r[k] = v;
    }
    y[pc.off[0] + i] = r[ninstr - 1];
  }
}
