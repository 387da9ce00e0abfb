// The mixed precision kernels of each GPU backend this build has, against the CPU's: cast
// between every pair of element types bit for bit (rounding ties, subnormals, overflow,
// NaN, saturation, integers past f32's 24 bits), written into a slice at an odd element
// offset whose neighbours must survive (16-bit and bool elements share words on Vulkan), and
// matmul_lowp in bf16 and f16 on shapes past the tile edges, transposed and batched. The
// conformance suite covers the casts to f32 only; this covers the rest.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/core/dtype.h"
#include "engine/exec/eager.h"
#include "engine/ops/precision.h"
#include "engine/train/rng.h"
#include "tests/engine/test_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

constexpr DType kFrom[] = {DType::F32, DType::F16, DType::BF16, DType::I64,
                           DType::I32, DType::U8,  DType::I8,   DType::Bool};
constexpr DType kTo[] = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};

constexpr float kInf = std::numeric_limits<float>::infinity();

// Floats where conversions go wrong: ties (1 + 2^-8 rounds to even in bf16, 1 + 3 2^-8 up;
// 1 + 2^-11 in f16), f16's largest finite and the first value that overflows it, f16
// subnormals and below, f32 subnormals, integer saturation edges, infinities and NaN.
const float kSpecial[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 2.5f, -2.5f, 1.00390625f, 1.01171875f, 1.00048828125f,
                          65504.f, 65519.f, 65520.f, -65520.f, 6e-8f, 3e-8f, -2.9e-8f, 1e-45f, -1.2e-38f,
                          1e30f, -1e30f, 3e9f, -3e9f, 2147483520.f, 2147483648.f, -2147483904.f, -2147483648.f,
                          9.3e18f, -9.3e18f, 9.2233715e18f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                          -123.75f, 0.999f, 255.9f, -128.5f,
                          // signaling and payload-carrying NaNs: every backend must quiet them
                          // the same way (engine/core/dtype.h), whatever instructions it uses
                          std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0xFFA00001u),
                          std::bit_cast<float>(0x7FC12345u), std::bit_cast<float>(0xFFBFFFFFu)};

// 16-bit patterns that no f32 rounds to: signaling NaNs with payloads, both signs.
const uint16_t kSpecialF16[] = {0x7C01, 0xFC01, 0x7D55, 0x7E01, 0xFFFF, 0x7C00, 0x0001, 0x83FF};
const uint16_t kSpecialBF16[] = {0x7F81, 0xFF81, 0x7FA5, 0x7FC1, 0xFFFF, 0x7F80, 0x0001, 0x807F};

const int64_t kSpecialInt[] = {0, 1, -1, 2, 127, -128, 255, 16777216, 16777217, -16777217, 16777219,
                               (int64_t{1} << 31), -(int64_t{1} << 31) - 1, (int64_t{1} << 53) + 1,
                               -(int64_t{1} << 40) - 3, std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min(), 9007199791611905, -1099511627775};

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t i, T v) {
  std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
}

// n elements of dtype t, as bytes: the special values first, then random ones (for the
// 16-bit floats, random bit patterns: every exponent, subnormals and NaNs among them).
std::vector<uint8_t> values_of(DType t, size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(n * dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    const bool special_f = i < std::size(kSpecial), special_i = i < std::size(kSpecialInt);
    const size_t i16 = i - std::size(kSpecial);  // past the floats: the 16-bit patterns
    const bool special_16 = !special_f && i16 < std::size(kSpecialF16);
    const float f = special_f ? kSpecial[i] : static_cast<float>(rng.uniform(-3e3, 3e3) * (i % 3 == 0 ? 1e-3 : 1.0));
    const int64_t k = special_i ? kSpecialInt[i] : static_cast<int64_t>(rng.next() >> (rng.next() % 64));
    switch (t) {
      case DType::F32: put(bytes, i, f); break;
      case DType::F16:
        put(bytes, i, special_f ? f32_to_f16(f) : special_16 ? kSpecialF16[i16] : static_cast<uint16_t>(rng.next()));
        break;
      case DType::BF16:
        put(bytes, i, special_f ? f32_to_bf16(f) : special_16 ? kSpecialBF16[i16] : static_cast<uint16_t>(rng.next()));
        break;
      case DType::I64: put(bytes, i, (i % 2 ? -k : k)); break;
      case DType::I32: put(bytes, i, static_cast<int32_t>(i % 2 ? -k : k)); break;
      case DType::U8: put(bytes, i, static_cast<uint8_t>(k)); break;
      case DType::I8: put(bytes, i, static_cast<int8_t>(k)); break;
      default: put(bytes, i, static_cast<uint8_t>(k & 1)); break;  // bool: 0 or 1
    }
  }
  return bytes;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  t.backend().copy_to_host(*t.buffer(), t.byte_offset(), out.data(), out.size());
  return out;
}

void run_cast(Backend& be, const Tensor& x, Tensor& y) {
  const OpDef* op = op_registry().find("cast");
  REQUIRE(op);
  KernelFn fn = op->kernel(be.kind(), x.dtype());
  REQUIRE(fn);
  const Attrs a{{"dtype", std::string(dtype_name(y.dtype()))}};
  const Tensor* ins[] = {&x};
  Tensor* outs[] = {&y};
  be.launch(fn, KernelCall{a, ins, outs, be});
  be.synchronize();
}

void check_casts(Backend& dev) {
  constexpr int64_t n = 203, pad = 3;
  for (DType from : kFrom) {
    const std::vector<uint8_t> in = values_of(from, n, 7 + static_cast<uint64_t>(from));
    Tensor xh = Tensor::empty(host(), from, {n}, AllocTag::Other);
    Tensor xd = Tensor::empty(dev, from, {n}, AllocTag::Other);
    xh.fill_raw(in.data(), in.size());
    xd.fill_raw(in.data(), in.size());
    for (DType to : kTo) {
      INFO(dev.name() << ": cast " << dtype_name(from) << " -> " << dtype_name(to));
      Tensor want = Tensor::empty(host(), to, {n}, AllocTag::Other);
      run_cast(host(), xh, want);
      // Into elements [pad, pad + n) of a larger tensor filled with a pattern that must stay.
      Tensor whole = Tensor::empty(dev, to, {n + 2 * pad}, AllocTag::Other);
      const std::vector<uint8_t> pattern(whole.nbytes(), 0xA5);
      whole.fill_raw(pattern.data(), pattern.size());
      Tensor y = whole.slice(0, pad, pad + n);
      run_cast(dev, xd, y);
      const std::vector<uint8_t> got = bytes_of(whole), expect = bytes_of(want);
      const size_t es = dtype_size(to), lo = pad * es, hi = (pad + n) * es;
      size_t wrong = 0, first = 0;
      for (size_t b = 0; b < got.size(); ++b) {
        const uint8_t w = b < lo || b >= hi ? uint8_t{0xA5} : expect[b - lo];
        if (got[b] != w && wrong++ == 0) first = b;
      }
      if (wrong) {
        const size_t e = first < lo ? 0 : (first - lo) / es;
        UNSCOPED_INFO("first wrong byte " << first << " (element " << e << " of the slice; input bytes at "
                                          << e * dtype_size(from) << ")");
      }
      CHECK(wrong == 0);
    }
  }
}

std::vector<uint8_t> lowp_of(DType t, size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(rng.uniform(-2, 2));
    put(bytes, i, t == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f));
  }
  return bytes;
}

Tensor lowp_on(Backend& be, DType t, const Shape& s, const std::vector<uint8_t>& bytes) {
  Tensor x = Tensor::empty(be, t, s, AllocTag::Other);
  x.fill_raw(bytes.data(), bytes.size());
  return x;
}

void check_matmul_lowp(Backend& dev) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{{70, 131}, {131, 67}, false, false},
                        {{3, 129, 66}, {66, 65}, false, false},
                        {{2, 66, 70}, {2, 65, 66}, true, true},
                        {{2, 1, 17, 33}, {3, 19, 33}, false, true}};
  for (DType t : {DType::BF16, DType::F16}) {
    for (const Case& c : cases) {
      INFO(dev.name() << ": matmul_lowp " << dtype_name(t) << " " << shape_str(c.a) << " x " << shape_str(c.b));
      const auto va = lowp_of(t, static_cast<size_t>(numel(c.a)), 1), vb = lowp_of(t, static_cast<size_t>(numel(c.b)), 2);
      EagerSession s(dev), h(host());
      Ref y = matmul_lowp(s, s.leaf(lowp_on(dev, t, c.a, va)), s.leaf(lowp_on(dev, t, c.b, vb)), c.ta, c.tb);
      Ref yh = matmul_lowp(h, h.leaf(lowp_on(host(), t, c.a, va)), h.leaf(lowp_on(host(), t, c.b, vb)), c.ta, c.tb);
      const std::vector<double> got = s.value(y).to_f64(), want = h.value(yh).to_f64();
      REQUIRE(got.size() == want.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / (1 + std::abs(want[i])));
      // Exact products (f16's and bf16's significands fit f32's twice over) summed in f32 in
      // another order: K = 131 terms of |x| < 4 reorder to some 1e-5 of the sums, no more.
      CHECK(worst < 2e-5);
    }
  }
}

}  // namespace

#ifdef MLSTUDIO_HAVE_VULKAN
TEST_CASE("vulkan: cast between every pair of element types is the CPU's, bit for bit, into any offset", "[vulkan]") {
  if (Backend* b = open_or_skip("vulkan")) check_casts(*b);
}
TEST_CASE("vulkan: matmul_lowp in bf16 and f16 matches the CPU past tile edges, transposed and batched", "[vulkan]") {
  if (Backend* b = open_or_skip("vulkan")) check_matmul_lowp(*b);
}
#endif

#ifdef MLSTUDIO_HAVE_CUDA
TEST_CASE("cuda: cast between every pair of element types is the CPU's, bit for bit, into any offset", "[cuda]") {
  if (Backend* b = open_or_skip("cuda")) check_casts(*b);
}
TEST_CASE("cuda: matmul_lowp in bf16 and f16 matches the CPU past tile edges, transposed and batched", "[cuda]") {
  if (Backend* b = open_or_skip("cuda")) check_matmul_lowp(*b);
}
#endif
