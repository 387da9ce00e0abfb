#version 450
// fused_elementwise (and the elementwise ops) with the program compiled in: each instruction
// is a specialization constant (code, operands, two parameters), so the driver's compiler
// sees a straight line of known ops over registers it can keep in registers. A pipeline is
// made per distinct program (VulkanBackend::dispatch_specialized); programs longer than 48
// instructions run on elementwise.comp's interpreter instead. Inputs are read as there: in
// place, a scalar, or gathered through broadcast strides (the table: rank, dims[rank], per
// input {mode, strides[rank]}).
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

layout(constant_id = 0) const uint NINSTR = 1;
// Instruction k: constants 1 + 5k (code), 2 + 5k (a), 3 + 5k (b), 4 + 5k (p0), 5 + 5k (p1).
#define INSTR(k, id) \
  layout(constant_id = id) const uint CODE##k = 0; \
  layout(constant_id = id + 1) const uint A##k = 0; \
  layout(constant_id = id + 2) const uint B##k = 0; \
  layout(constant_id = id + 3) const float P0##k = 0.0; \
  layout(constant_id = id + 4) const float P1##k = 0.0;
INSTR(0, 1)
INSTR(1, 6)
INSTR(2, 11)
INSTR(3, 16)
INSTR(4, 21)
INSTR(5, 26)
INSTR(6, 31)
INSTR(7, 36)
INSTR(8, 41)
INSTR(9, 46)
INSTR(10, 51)
INSTR(11, 56)
INSTR(12, 61)
INSTR(13, 66)
INSTR(14, 71)
INSTR(15, 76)
INSTR(16, 81)
INSTR(17, 86)
INSTR(18, 91)
INSTR(19, 96)
INSTR(20, 101)
INSTR(21, 106)
INSTR(22, 111)
INSTR(23, 116)
INSTR(24, 121)
INSTR(25, 126)
INSTR(26, 131)
INSTR(27, 136)
INSTR(28, 141)
INSTR(29, 146)
INSTR(30, 151)
INSTR(31, 156)
INSTR(32, 161)
INSTR(33, 166)
INSTR(34, 171)
INSTR(35, 176)
INSTR(36, 181)
INSTR(37, 186)
INSTR(38, 191)
INSTR(39, 196)
INSTR(40, 201)
INSTR(41, 206)
INSTR(42, 211)
INSTR(43, 216)
INSTR(44, 221)
INSTR(45, 226)
INSTR(46, 231)
INSTR(47, 236)

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

// Input `src` at output element i.
float input_at(uint src, uint i) {
  const uint tb = pc.off[1];
  const uint rank = t[tb];
  const uint s = tb + 2 + rank + src * (1 + rank);
  const uint mode = t[s];
  uint e = i;
  if (mode == 1u) {
    e = 0u;
  } else if (mode == 2u) {
    e = 0u;
    uint rest = i;
    for (uint d = rank; d-- > 0u;) {
      const uint dim = t[tb + 2 + d];
      e += (rest % dim) * t[s + 1 + d];
      rest /= dim;
    }
  }
  return load(src, e);
}

#define STEP(k) \
  if (k < NINSTR) \
    r[k] = CODE##k == FC_Input ? input_at(uint(P0##k), i) : CODE##k == FC_Const ? P0##k : ew_apply(CODE##k, r[A##k], r[B##k], P0##k, P1##k);

void main() {
  float r[48];
  GRID_LOOP(i, pc.n) {
    STEP(0)
    STEP(1)
    STEP(2)
    STEP(3)
    STEP(4)
    STEP(5)
    STEP(6)
    STEP(7)
    STEP(8)
    STEP(9)
    STEP(10)
    STEP(11)
    STEP(12)
    STEP(13)
    STEP(14)
    STEP(15)
    STEP(16)
    STEP(17)
    STEP(18)
    STEP(19)
    STEP(20)
    STEP(21)
    STEP(22)
    STEP(23)
    STEP(24)
    STEP(25)
    STEP(26)
    STEP(27)
    STEP(28)
    STEP(29)
    STEP(30)
    STEP(31)
    STEP(32)
    STEP(33)
    STEP(34)
    STEP(35)
    STEP(36)
    STEP(37)
    STEP(38)
    STEP(39)
    STEP(40)
    STEP(41)
    STEP(42)
    STEP(43)
    STEP(44)
    STEP(45)
    STEP(46)
    STEP(47)
    y[pc.off[0] + i] = r[NINSTR - 1u];
  }
}
