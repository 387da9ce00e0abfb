// The 16-bit float conversions against their definition (engine/core/dtype.h): every f16 and
// bf16 bit pattern widened, special and random f32 patterns narrowed, NaNs quiet with their
// sign and payload's top, finite values exact or nearest-even. Then the CPU's bulk
// conversions (engine/cpu/lowp.h), which use AVX-512 instructions where the build has them,
// against the scalar ones bit for bit: a hardware instruction must not change a result.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/core/dtype.h"
#include "engine/cpu/lowp.h"
#include "engine/train/rng.h"

using namespace mls;

namespace {

bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// f32 patterns where conversions go wrong, and random ones (every exponent, NaNs among them).
std::vector<uint32_t> f32_patterns() {
  std::vector<uint32_t> v = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7F800001, 0xFF800001,
                             0x7FA00000, 0x7FBFFFFF, 0x7FC00000, 0xFFC00001, 0x7FFFFFFF, 0x7F802000,
                             0x00000001, 0x807FFFFF, 0x33800000, 0x33000000, 0x33000001, 0x477FEFFF,
                             0x477FF000, 0x477FE000, 0x3F808000, 0x3F818000, 0x3F801000, 0x387FC000};
  Rng rng(2024);
  while (v.size() < 200000) v.push_back(static_cast<uint32_t>(rng.next()));
  return v;
}

// The nearest-even check of a narrowing: r is the result's value, x the input; no other
// representable value (r's neighbours, via widen) is nearer, and a tie goes to the even one.
template <typename Widen>
void check_nearest_even(float x, uint16_t h, Widen widen) {
  const double xv = x, r = widen(h);
  if (std::isinf(r)) {
    const uint16_t below = static_cast<uint16_t>(h - 1);  // the largest finite of that sign
    const double last = widen(below), ulp = last - widen(static_cast<uint16_t>(below - 1));
    CHECK(std::fabs(xv) >= std::fabs(last) + std::fabs(ulp) / 2);  // past the midpoint to infinity
    return;
  }
  for (int d : {-1, 1}) {
    const uint16_t n = static_cast<uint16_t>(h + d);
    const double nv = widen(n);
    if (std::isnan(nv) || std::signbit(nv) != std::signbit(r) || (r == 0 && d < 0)) continue;
    const double er = std::fabs(xv - r), en = std::fabs(xv - nv);
    INFO("x = " << x << " -> " << r << ", neighbour " << nv);
    CHECK(er <= en);
    if (er == en) CHECK((h & 1) == 0);
  }
}

}  // namespace

TEST_CASE("dtype: every f16 and bf16 pattern widens exactly, NaNs quiet with sign and payload", "[dtype]") {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    INFO("bits 0x" << std::hex << h);
    const uint16_t b = static_cast<uint16_t>(h);
    const uint32_t f16 = std::bit_cast<uint32_t>(f16_to_f32(b)), bf = std::bit_cast<uint32_t>(bf16_to_f32(b));
    // bf16: the top half of an f32, a NaN's quiet bit set.
    const uint32_t top = h << 16;
    CHECK(bf == (is_nan_bits(top) ? top | 0x400000u : top));
    // f16: a NaN keeps sign and payload and is quiet; the rest is the exact value.
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF, sign = (h & 0x8000u) << 16;
    if (e == 31 && m != 0) {
      CHECK(f16 == (sign | 0x7F800000u | 0x400000u | (m << 13)));
    } else {
      const double mag = e == 31 ? INFINITY : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, int(e) - 25);
      CHECK(static_cast<double>(f16_to_f32(b)) == (sign ? -mag : mag));
      CHECK(std::signbit(f16_to_f32(b)) == (sign != 0));
    }
  }
}

TEST_CASE("dtype: f32 narrows to f16 and bf16 nearest-even, NaNs quiet with the payload's top", "[dtype]") {
  for (uint32_t u : f32_patterns()) {
    INFO("f32 bits 0x" << std::hex << u);
    const float x = std::bit_cast<float>(u);
    const uint16_t h = f32_to_f16(x), b = f32_to_bf16(x);
    if (is_nan_bits(u)) {
      CHECK(h == (((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu)));
      CHECK(b == ((u >> 16) | 0x40u));
      continue;
    }
    CHECK(std::signbit(f16_to_f32(h)) == std::signbit(x));
    CHECK(std::signbit(bf16_to_f32(b)) == std::signbit(x));
    check_nearest_even(x, h, [](uint16_t v) { return static_cast<double>(f16_to_f32(v)); });
    check_nearest_even(x, b, [](uint16_t v) { return static_cast<double>(bf16_to_f32(v)); });
  }
}

TEST_CASE("dtype: the CPU's bulk conversions give the scalar ones' bits on this build", "[dtype]") {
#ifdef __AVX512F__
  WARN("bulk conversions use AVX-512 instructions on this build: checked against the scalar code");
#else
  WARN("this build has no AVX-512: the bulk conversions are the scalar loops here; the AVX-512 "
       "paths are checked by this test on a machine that has it (scripts/device-check engine)");
#endif
  // Every 16-bit pattern, offset by one so the vector loops see unaligned data and a tail.
  std::vector<uint16_t> all(65536 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u + 1);
  for (uint32_t h = 0; h <= 0xFFFF; ++h) all[h + 1] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  cpu::f16_to_f32_n(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  size_t wrong = 0;
  for (size_t i = 0; i < all.size(); ++i)
    wrong += std::bit_cast<uint32_t>(wide[i]) != std::bit_cast<uint32_t>(f16_to_f32(all[i]));
  CHECK(wrong == 0);
  cpu::bf16_to_f32_n(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  wrong = 0;
  for (size_t i = 0; i < all.size(); ++i)
    wrong += std::bit_cast<uint32_t>(wide[i]) != std::bit_cast<uint32_t>(bf16_to_f32(all[i]));
  CHECK(wrong == 0);

  const std::vector<uint32_t> pat = f32_patterns();
  std::vector<float> xs(pat.size());
  for (size_t i = 0; i < pat.size(); ++i) xs[i] = std::bit_cast<float>(pat[i]);
  std::vector<uint16_t> out(xs.size());
  cpu::f32_to_f16_n(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
  wrong = 0;
  for (size_t i = 0; i < xs.size(); ++i) wrong += out[i] != f32_to_f16(xs[i]);
  CHECK(wrong == 0);
  cpu::f32_to_bf16_n(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
  wrong = 0;
  for (size_t i = 0; i < xs.size(); ++i) wrong += out[i] != f32_to_bf16(xs[i]);
  CHECK(wrong == 0);
}
