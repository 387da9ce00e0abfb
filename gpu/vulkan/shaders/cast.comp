#version 450
// y = cast(x) between the engine's element types, as the CPU's cast kernels convert
// (engine/cpu/math_kernels.cpp): floats round to nearest even, float to integer truncates
// toward zero and saturates (NaN -> 0), integer to float rounds once to nearest even,
// narrowing integers wrap, to bool is x != 0. Elements narrower than a word are packed;
// each invocation owns one output word (or one 64-bit element), so none write the same word.
#include "common.glsl"
#include "lowp.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Y { uint y[]; };
layout(std430, binding = 1) readonly buffer X { uint x[]; };
layout(push_constant) uniform P {
  uint off[2];
  uint n, from, to, units;  // units: output words (or 64-bit elements) to write
} pc;

// engine/core/dtype.h's DType order.
const uint F32 = 0u, F16 = 1u, BF16 = 2u, I64 = 3u, I32 = 4u, U8 = 5u, I8 = 6u, BOOL = 7u;

uint esize(uint t) { return t == I64 ? 8u : (t == F32 || t == I32) ? 4u : (t == F16 || t == BF16) ? 2u : 1u; }

// A value read from x: a float (its f32 bits) or a 64-bit integer (hi:lo, two's complement).
struct Value {
  bool is_float;
  uint fbits;
  int hi;
  uint lo;
};

Value read_x(uint i) {
  const uint e = pc.off[1] + i;
  Value v = Value(false, 0u, 0, 0u);
  switch (pc.from) {
    case F32: v.is_float = true; v.fbits = x[e]; break;
    case F16: v.is_float = true; v.fbits = f16_to_f32_bits(PACKED_READ(x, e, 2u)); break;
    case BF16: v.is_float = true; v.fbits = bf16_to_f32_bits(PACKED_READ(x, e, 2u)); break;
    case I64: v.lo = x[2u * e]; v.hi = int(x[2u * e + 1u]); break;
    case I32: v.lo = x[e]; v.hi = int(v.lo) >> 31; break;
    case U8: v.lo = PACKED_READ(x, e, 1u); break;
    case I8: { const int s = int(PACKED_READ(x, e, 1u) << 24) >> 24; v.lo = uint(s); v.hi = s >> 31; break; }
    default: v.lo = PACKED_READ(x, e, 1u) != 0u ? 1u : 0u; break;  // bool
  }
  return v;
}

// The float nearest (ties to even) to the integer hi:lo, as one rounding.
uint int_to_f32_bits(int hi, uint lo) {
  const bool neg = hi < 0;
  uint mh = uint(hi), ml = lo;
  if (neg) {  // the magnitude (2^63 stays 0x80000000:0, read as unsigned)
    ml = ~ml + 1u;
    mh = ~mh + (ml == 0u ? 1u : 0u);
  }
  const uint sign = neg ? 0x80000000u : 0u;
  if (mh == 0u && ml < 0x1000000u) return ml == 0u ? 0u : sign | floatBitsToUint(float(ml));  // exact
  const int p = mh != 0u ? 32 + findMSB(mh) : findMSB(ml);  // the top bit, >= 24
  const int s = p - 23;                                    // bits below the 24 kept
  uint mant = s >= 32 ? mh >> uint(s - 32) : (ml >> uint(s)) | (s == 0 ? 0u : mh << uint(32 - s));
  mant &= 0xffffffu;
  const int g = s - 1;  // the guard bit; below it, the sticky bits
  const uint guard = g >= 32 ? (mh >> uint(g - 32)) & 1u : (ml >> uint(g)) & 1u;
  const bool sticky = g >= 32 ? (ml != 0u || (mh & ((1u << uint(g - 32)) - 1u)) != 0u)
                              : (ml & ((1u << uint(g)) - 1u)) != 0u;
  int exponent = p;
  if (guard != 0u && (sticky || (mant & 1u) != 0u)) {
    ++mant;
    if (mant == 0x1000000u) {
      mant >>= 1;
      ++exponent;
    }
  }
  return sign | (uint(exponent + 127) << 23) | (mant & 0x7fffffu);
}

uint to_f32_bits(Value v) { return v.is_float ? v.fbits : int_to_f32_bits(v.hi, v.lo); }

bool is_nan_bits(uint u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u; }

// Float to a 64-bit integer: toward zero, saturating, NaN -> 0.
void f32_to_i64(uint u, out int hi, out uint lo) {
  const float f = uintBitsToFloat(u);
  hi = 0;
  lo = 0u;
  if (is_nan_bits(u)) return;
  if (f >= 9.2233720368547758e18) { hi = 0x7fffffff; lo = 0xffffffffu; return; }
  if (f <= -9.2233720368547758e18) { hi = int(0x80000000u); return; }
  const float t = trunc(f);
  if (abs(t) < 2147483648.0) {
    const int s = int(t);
    hi = s >> 31;
    lo = uint(s);
    return;
  }
  // |t| >= 2^31 is a multiple of 256: both parts are exact in f32.
  const float h = floor(t / 4294967296.0);
  hi = int(h);
  lo = uint(t - h * 4294967296.0);
}

int f32_to_i32(uint u) {
  const float f = uintBitsToFloat(u);
  if (is_nan_bits(u)) return 0;
  if (f <= -2147483648.0) return int(0x80000000u);
  if (f >= 2147483647.0) return 0x7fffffff;
  return int(f);
}

bool nonzero(Value v) { return v.is_float ? (v.fbits & 0x7fffffffu) != 0u : (v.lo | uint(v.hi)) != 0u; }

// Element i of y in the output type, as the low bits of a word (types of 4 bytes or less).
uint convert(Value v) {
  switch (pc.to) {
    case F32: return to_f32_bits(v);
    case F16: return f32_bits_to_f16(to_f32_bits(v));
    case BF16: return f32_bits_to_bf16(to_f32_bits(v));
    case I32: return v.is_float ? uint(f32_to_i32(v.fbits)) : v.lo;
    case U8:
    case I8: return v.is_float ? uint(f32_to_i32(v.fbits)) & 0xffu : v.lo & 0xffu;
    default: return nonzero(v) ? 1u : 0u;  // bool
  }
}

void main() {
  const uint out_size = esize(pc.to), n = pc.n, o = pc.off[0];
  GRID_LOOP(u, pc.units) {
    if (out_size == 8u) {
      const Value v = read_x(u);
      int hi = v.hi;
      uint lo = v.lo;
      if (v.is_float) f32_to_i64(v.fbits, hi, lo);
      y[2u * (o + u)] = lo;
      y[2u * (o + u) + 1u] = uint(hi);
      continue;
    }
    if (out_size == 4u) {
      y[o + u] = pc.from == pc.to ? x[pc.off[1] + u] : convert(read_x(u));
      continue;
    }
    // A word of 2 or 4 narrow elements: those of this tensor replaced, the rest kept.
    const uint per = 4u / out_size, mask = out_size == 2u ? 0xffffu : 0xffu;
    const uint w = o / per + u;
    const bool whole = w * per >= o && w * per + per <= o + n;
    uint word = whole ? 0u : y[w];
    for (uint j = 0u; j < per; ++j) {
      const uint e = w * per + j;
      if (e < o || e >= o + n) continue;
      const uint shift = j * out_size * 8u;
      // The same type: the bits as they are (a 16-bit NaN keeps its payload, as on the CPU).
      const uint bits = pc.from == pc.to ? PACKED_READ(x, pc.off[1] + e - o, out_size) : convert(read_x(e - o));
      word = (word & ~(mask << shift)) | ((bits & mask) << shift);
    }
    y[w] = word;
  }
}
