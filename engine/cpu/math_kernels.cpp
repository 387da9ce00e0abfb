// CPU kernels for the math ops outside the elementwise list (elementwise_kernels.cpp has
// those): sign and round (f32), comparisons (f32, i64, i32, bool inputs), where (any
// element type) and cast.
//
// [SECTION] Comparisons and where
// [SECTION] cast
// [SECTION] Registration
#include <cmath>
#include <functional>
#include <limits>

#include "engine/cpu/elementwise.h"
#include "engine/cpu/lowp.h"

namespace mls::cpu {

namespace {

// [SECTION] Comparisons and where

template <typename T, typename Cmp>
void compare_kernel(const KernelCall& c) {
  binary_kernel<T, uint8_t>(c, [](T a, T b) { return static_cast<uint8_t>(Cmp{}(a, b) ? 1 : 0); });
}

template <typename Cmp>
void register_compare(OpRegistry& reg, const char* op) {
  reg.register_kernel(op, DeviceKind::CPU, DType::F32, compare_kernel<float, Cmp>);
  reg.register_kernel(op, DeviceKind::CPU, DType::I64, compare_kernel<int64_t, Cmp>);
  reg.register_kernel(op, DeviceKind::CPU, DType::I32, compare_kernel<int32_t, Cmp>);
  reg.register_kernel(op, DeviceKind::CPU, DType::Bool, compare_kernel<uint8_t, Cmp>);
}

template <typename T>
void where_loop(const KernelCall& c) {
  const uint8_t* cond = in_ptr<uint8_t>(c, 0);
  const T* a = in_ptr<T>(c, 1);
  const T* b = in_ptr<T>(c, 2);
  T* o = out_ptr<T>(c, 0);
  const Shape& out = c.outputs[0]->shape();
  int64_t n = numel(out);
  if (c.inputs[0]->shape() == out && c.inputs[1]->shape() == out && c.inputs[2]->shape() == out) {
    pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = cond[i] ? a[i] : b[i];
    });
    return;
  }
  Strides sc = strides_over(c.inputs[0]->shape(), out),
          sa = strides_over(c.inputs[1]->shape(), out),
          sb = strides_over(c.inputs[2]->shape(), out);
  size_t r = out.size();
  int64_t inner = r == 0 ? 1 : out.back(), rows = r == 0 ? 1 : n / std::max<int64_t>(inner, 1);
  int64_t ic = r == 0 ? 0 : sc[r - 1], ia = r == 0 ? 0 : sa[r - 1], ib = r == 0 ? 0 : sb[r - 1];
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  pool_of(c).parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, oc = 0, oa = 0, ob = 0;
      if (r > 0)
        for (size_t d = r - 1; d-- > 0;) {  // the outer axes of this row
          int64_t k = rem % out[d];
          rem /= out[d];
          oc += k * sc[d];
          oa += k * sa[d];
          ob += k * sb[d];
        }
      T* po = o + row * inner;
      for (int64_t i = 0; i < inner; ++i)
        po[i] = cond[oc + i * ic] ? a[oa + i * ia] : b[ob + i * ib];
    }
  });
}

void where_kernel(const KernelCall& c) {
  switch (c.inputs[1]->dtype()) {
    case DType::F32:
      where_loop<float>(c);
      return;
    case DType::F16:
    case DType::BF16:
      where_loop<uint16_t>(c);
      return;
    case DType::I64:
      where_loop<int64_t>(c);
      return;
    case DType::I32:
      where_loop<int32_t>(c);
      return;
    case DType::U8:
    case DType::Bool:
      where_loop<uint8_t>(c);
      return;
    case DType::I8:
      where_loop<int8_t>(c);
      return;
  }
  MLS_CHECK(false, "where: unknown dtype");
}

// [SECTION] cast

// How each dtype is stored (the 16-bit floats as their bits).
template <DType D>
struct Storage;
template <>
struct Storage<DType::F32> {
  using type = float;
};
template <>
struct Storage<DType::F16> {
  using type = uint16_t;
};
template <>
struct Storage<DType::BF16> {
  using type = uint16_t;
};
template <>
struct Storage<DType::I64> {
  using type = int64_t;
};
template <>
struct Storage<DType::I32> {
  using type = int32_t;
};
template <>
struct Storage<DType::Bool> {
  using type = uint8_t;
};
template <>
struct Storage<DType::U8> {
  using type = uint8_t;
};
template <>
struct Storage<DType::I8> {
  using type = int8_t;
};
template <DType D>
using StorageT = typename Storage<D>::type;

template <DType D>
float widen(StorageT<D> x) {
  if constexpr (D == DType::F32)
    return x;
  else if constexpr (D == DType::F16)
    return f16_to_f32(x);
  else
    return bf16_to_f32(x);
}

// Float to integer: truncates toward zero and saturates; NaN -> 0 (no undefined behaviour).
template <typename I>
I saturate(float f) {
  if (std::isnan(f)) return 0;
  double d = f;
  if (d <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (d >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(d);
}

template <DType From, DType To>
StorageT<To> convert(StorageT<From> x) {
  using T = StorageT<To>;
  if constexpr (From == To) {
    return x;
  } else if constexpr (dtype_is_float(From)) {
    float f = widen<From>(x);
    if constexpr (To == DType::F32)
      return f;
    else if constexpr (To == DType::F16)
      return f32_to_f16(f);
    else if constexpr (To == DType::BF16)
      return f32_to_bf16(f);
    else if constexpr (To == DType::Bool)
      return static_cast<T>(f != 0.f ? 1 : 0);
    else
      return saturate<T>(f);
  } else {  // integers and bool (stored as 0 or 1)
    if constexpr (To == DType::F32)
      return static_cast<float>(x);
    else if constexpr (To == DType::F16)
      return f32_to_f16(static_cast<float>(x));
    else if constexpr (To == DType::BF16)
      return f32_to_bf16(static_cast<float>(x));
    else if constexpr (To == DType::Bool)
      return static_cast<T>(x != 0 ? 1 : 0);
    else
      return static_cast<T>(x);  // narrowing wraps (two's complement, C++20)
  }
}

// The vector conversions run at a few elements per cycle, so a second thread pays for its
// wake-up only on large tensors (mixed precision casts every weight every step: a 784 x 256
// weight took 4x longer split across two threads than on one).
constexpr int64_t kVectorCastGrain = int64_t{1} << 20;

template <DType From, DType To>
void cast_loop(const KernelCall& c) {
  const StorageT<From>* x = in_ptr<StorageT<From>>(c, 0);
  StorageT<To>* y = out_ptr<StorageT<To>>(c, 0);
  constexpr bool vector = (From == DType::F32) != (To == DType::F32) &&
                          (From == DType::F32 || To == DType::F32) && dtype_is_float(From) &&
                          dtype_is_float(To);
  const int64_t grain = vector ? kVectorCastGrain : kParallelGrain;
  pool_of(c).parallel_for(0, c.inputs[0]->numel(), grain, [&](int64_t lo, int64_t hi) {
    // f32 <-> bf16/f16, the casts of mixed precision: the vector conversions of lowp.h,
    // bit for bit the scalar ones.
    if constexpr (From == DType::F32 && To == DType::BF16)
      f32_to_bf16_n(x + lo, y + lo, hi - lo);
    else if constexpr (From == DType::BF16 && To == DType::F32)
      bf16_to_f32_n(x + lo, y + lo, hi - lo);
    else if constexpr (From == DType::F32 && To == DType::F16)
      f32_to_f16_n(x + lo, y + lo, hi - lo);
    else if constexpr (From == DType::F16 && To == DType::F32)
      f16_to_f32_n(x + lo, y + lo, hi - lo);
    else
      for (int64_t i = lo; i < hi; ++i) y[i] = convert<From, To>(x[i]);
  });
}

template <DType From>
void cast_kernel(const KernelCall& c) {
  switch (c.outputs[0]->dtype()) {
    case DType::F32:
      cast_loop<From, DType::F32>(c);
      return;
    case DType::F16:
      cast_loop<From, DType::F16>(c);
      return;
    case DType::BF16:
      cast_loop<From, DType::BF16>(c);
      return;
    case DType::I64:
      cast_loop<From, DType::I64>(c);
      return;
    case DType::I32:
      cast_loop<From, DType::I32>(c);
      return;
    case DType::Bool:
      cast_loop<From, DType::Bool>(c);
      return;
    default:
      break;
  }
  MLS_CHECK(false, "cast to a dtype without a CPU conversion");
}

}  // namespace

// [SECTION] Registration

void register_math_kernels(OpRegistry& reg) {
  auto R = [&](const char* op, KernelFn fn) {
    reg.register_kernel(op, DeviceKind::CPU, DType::F32, fn);
  };
  // The list's ops (abs, gelu, pow, maximum, ...) are elementwise_kernels.cpp's.
  R("sign", [](const KernelCall& c) {
    unary_kernel(c, [](float x) { return static_cast<float>((x > 0.f) - (x < 0.f)); });
  });
  // The default rounding mode rounds halves to even, as ONNX's QuantizeLinear.
  R("round",
    [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::nearbyint(x); }); });

  register_compare<std::equal_to<>>(reg, "equal");
  register_compare<std::not_equal_to<>>(reg, "not_equal");
  register_compare<std::less<>>(reg, "less");
  register_compare<std::less_equal<>>(reg, "less_equal");
  register_compare<std::greater<>>(reg, "greater");
  register_compare<std::greater_equal<>>(reg, "greater_equal");

  reg.register_kernel("where", DeviceKind::CPU, DType::Bool, where_kernel);

  reg.register_kernel("cast", DeviceKind::CPU, DType::F32, cast_kernel<DType::F32>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::F16, cast_kernel<DType::F16>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::BF16, cast_kernel<DType::BF16>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::I64, cast_kernel<DType::I64>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::I32, cast_kernel<DType::I32>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::Bool, cast_kernel<DType::Bool>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::U8, cast_kernel<DType::U8>);
  reg.register_kernel("cast", DeviceKind::CPU, DType::I8, cast_kernel<DType::I8>);
}

}  // namespace mls::cpu
