#version 450
// Strided copy of 32-bit words (offsets in elements of wpe words): y[off + sum(i_d * ys_d)] = x[off + sum(i_d * xs_d)] over dims
// (transpose, expand, slice, concat's pieces, pad's interior; 64-bit elements are two words).
//   table: rank, dims[rank], x strides[rank], y strides[rank]
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { uint y[]; };
layout(std430, binding = 1) readonly buffer T { uint t[]; };
layout(std430, binding = 2) readonly buffer X { uint x[]; };
layout(push_constant) uniform P { uint off[3]; uint n, wpe; } pc;  // wpe: words per element

void main() {
  const uint tb = pc.off[1];
  const uint rank = t[tb];
  GRID_LOOP(i, pc.n) {
    uint rest = i, xe = 0, ye = 0;
    for (uint d = rank; d-- > 0u;) {
      const uint dim = t[tb + 1 + d];
      const uint k = rest % dim;
      rest /= dim;
      xe += k * t[tb + 1 + rank + d];
      ye += k * t[tb + 1 + 2 * rank + d];
    }
    y[pc.off[0] * pc.wpe + ye] = x[pc.off[2] * pc.wpe + xe];
  }
}
