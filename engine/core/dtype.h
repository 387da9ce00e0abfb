// Element types of tensors.
//
//   DType t = DType::F32;  dtype_size(t) == 4;  dtype_name(t) == "f32";
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mls {

enum class DType : uint8_t { F32, F16, BF16, I64, I32, U8, I8, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I64,
                                       DType::I32, DType::U8,  DType::I8,   DType::Bool};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::I32: return 4;
    case DType::U8: return 1;
    case DType::I8: return 1;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I64: return "i64";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::Bool: return "bool";
  }
  return "?";
}

constexpr bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

std::optional<DType> parse_dtype(std::string_view name);

// Conversions for the 16-bit float formats: the one definition every backend and every build
// of the CPU kernels agrees with, bit for bit (tests/engine/dtype_test.cpp, and the GPU cast
// tests against these):
// - finite values round to nearest, ties to even; past the range they become infinity, and
//   f32 -> f16 keeps subnormal halves (no flush to zero);
// - infinities and signed zeros keep their sign;
// - a NaN keeps its sign and the top of its payload and comes out QUIET (IEEE 754: an
//   operation on a signaling NaN delivers a quiet one), as x86's F16C/AVX-512 conversion
//   instructions and ARM's FCVT do, so a hardware path and the scalar code agree.
// Float to integer (the cast kernels): truncate toward zero, saturate, NaN -> 0.
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace mls
