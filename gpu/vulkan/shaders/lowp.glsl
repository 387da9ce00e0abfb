// Shared by the shaders that read or write 16-bit floats: conversions done on the bits, so
// they round exactly as the CPU's (engine/core/dtype.cpp: to nearest even, overflow to
// infinity, a NaN comes out quiet with its sign and payload's top) and no device's handling of subnormals can change them. 16-bit
// and 8-bit elements live packed in 32-bit words, low half first.

// Element `e` (counted in elements of `size` bytes, 1 or 2) of a word array, as the low bits.
#define PACKED_READ(arr, e, size) \
  ((arr[((e) * (size)) >> 2] >> ((((e) * (size)) & 3u) * 8u)) & ((size) == 2u ? 0xffffu : 0xffu))

// f32 bits of an f16 (exact; subnormal halves become normal floats).
uint f16_to_f32_bits(uint h) {
  const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) {
    if (m == 0u) return sign;
    const int p = findMSB(m);  // m * 2^-24 = 1.f * 2^(p - 24)
    return sign | (uint(p - 24 + 127) << 23) | ((m << uint(23 - p)) & 0x7fffffu);
  }
  if (e == 31u) return sign | 0x7f800000u | (m != 0u ? 0x400000u | (m << 13) : 0u);  // NaN: quiet
  return sign | ((e - 15u + 127u) << 23) | (m << 13);
}

// f32 bits of a bf16 (exact; a NaN comes out quiet).
uint bf16_to_f32_bits(uint h) {
  const uint u = h << 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u;
}

// The f16 nearest (ties to even) to the float with bits u.
uint f32_bits_to_f16(uint u) {
  const uint sign = (u >> 16) & 0x8000u, ebits = (u >> 23) & 0xffu;
  uint mant = u & 0x7fffffu;
  if (ebits == 0xffu) return sign | 0x7c00u | (mant != 0u ? 0x200u | (mant >> 13) : 0u);  // NaN: quiet
  const int e = int(ebits) - 127 + 15;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    const uint shift = uint(14 - e);
    uint h16 = mant >> shift;
    const uint rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (h16 & 1u) != 0u)) ++h16;
    return sign | h16;
  }
  uint h16 = sign | (uint(e) << 10) | (mant >> 13);
  const uint rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h16 & 1u) != 0u)) ++h16;  // may carry into the exponent: right
  return h16;
}

// The bf16 nearest (ties to even) to the float with bits u.
uint f32_bits_to_bf16(uint u) {
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u) return (u >> 16) | 0x40u;  // quiet NaN
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
