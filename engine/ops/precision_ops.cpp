// Mixed precision ops: cast (any element type to another; differentiable between float
// types) and matmul_lowp (bf16 or f16 operands, f32 result). Derivatives of 16-bit values
// are f32 (engine/ops/precision.h says why).
//
// [SECTION] Builders (engine/ops/precision.h)
// [SECTION] cast
// [SECTION] matmul_lowp
#include "engine/ops/precision.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/math.h"
#include "engine/ops/op_helpers.h"

// [SECTION] Builders (engine/ops/precision.h)
namespace mls {

Ref matmul_lowp(Emitter& e, Ref a, Ref b, bool transpose_a, bool transpose_b) {
  return e.emit1("matmul_lowp", {a, b},
                 {{"transpose_a", int64_t{transpose_a}}, {"transpose_b", int64_t{transpose_b}}});
}

}  // namespace mls

namespace mls::ops {

namespace {

// [SECTION] cast

constexpr DType kCastTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};

bool castable(DType t) {
  return std::find(std::begin(kCastTypes), std::end(kCastTypes), t) != std::end(kCastTypes);
}

// The value `x` takes in dtype `t`, the way the CPU kernels convert: floats round to nearest
// even (through f32), floats to integers truncate toward zero and saturate (NaN -> 0), to
// bool is x != 0. (Integer to narrower integer wraps in the kernels; not modelled here.)
double cast_ref(double x, DType t) {
  auto to_int = [x](double lo, double hi) { return std::isnan(x) ? 0.0 : std::clamp(std::trunc(x), lo, hi); };
  auto f = static_cast<float>(x);
  switch (t) {
    case DType::F32:
      return f;
    case DType::F16:
      return f16_to_f32(f32_to_f16(f));
    case DType::BF16:
      return bf16_to_f32(f32_to_bf16(f));
    case DType::I64:
      return to_int(static_cast<double>(std::numeric_limits<int64_t>::min()),
                    static_cast<double>(std::numeric_limits<int64_t>::max()));
    case DType::I32:
      return to_int(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    case DType::Bool:
      return x != 0.0 ? 1.0 : 0.0;
    default:
      return x;
  }
}

// Between float types the derivative is 1 (rounding is treated as the identity, as every
// framework's autocast does), carried in f32; through an integer or bool side there is none.
bool float_cast(const Emitter& e, Ref in, Ref out) {
  return dtype_is_float(e.type_of(in).dtype) && dtype_is_float(e.type_of(out).dtype);
}

void register_cast(OpRegistry& reg) {
  reg.define(
      {.name = "cast",
       .attrs = {{"dtype", AttrKind::String}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         auto t = parse_dtype(a.get_string("dtype"));
         if (!t || !castable(*t))
           return make_error("cannot cast to '" + a.get_string("dtype") + "' (f32, f16, bf16, i64, i32 or bool)");
         // Bytes cast from too: raw image pixels (u8) and int8 quantized weights (ONNX files).
         if (!castable(in[0].dtype) && in[0].dtype != DType::U8 && in[0].dtype != DType::I8)
           return make_error("cannot cast from " + type_str(in[0]));
         return Types{{*t, in[0].shape}};
       },
       .vjp =
           [](const GradContext& c) {
             if (!float_cast(c.e, c.in(0), c.out(0)) || !c.gout(0).valid()) return Refs{Ref{}};
             return Refs{cast(c.e, c.gout(0), DType::F32)};
           },
       .jvp =
           [](const JvpContext& c) {
             if (!float_cast(c.e, c.in(0), c.out(0)) || !c.tan(0).valid()) return Refs{Ref{}};
             return Refs{cast(c.e, c.tan(0), DType::F32)};
           },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             DType t = *parse_dtype(a.get_string("dtype"));
             return std::vector<RefArray>{ref_unary(in[0], [t](double x) { return cast_ref(x, t); })};
           },
       // The conformance suite checks gradients at f32's tolerance against f32 weights, so
       // its samples are the casts whose derivative it can check: float -> f32. Every other
       // pair (to 16-bit floats, integers, bool) is checked against this reference in
       // tests/engine/mixed_precision_test.cpp. Small inputs: the reference rounds x + h t
       // to f32, and f32's step must stay far below the finite difference's h t.
       .samples =
           [] {
             std::vector<OpSample> v;
             for (DType from : {DType::F32, DType::F16, DType::BF16}) {
               OpSample s = sample({{from, {3, 4}}}, {{"dtype", std::string("f32")}});
               s.lo = -1.0 / 64;
               s.hi = 1.0 / 64;
               v.push_back(std::move(s));
             }
             for (DType from : {DType::U8, DType::I8, DType::I64, DType::I32, DType::Bool}) {  // by value
               OpSample s = sample({{from, {3, 4}}}, {{"dtype", std::string("f32")}});
               s.int_high = 100;
               v.push_back(std::move(s));
             }
             return v;
           },
       .doc = "converts the element type (attr dtype: f32, f16, bf16, i64, i32, bool; u8 and i8 convert from only). Floats round to "
              "nearest even, float to integer truncates toward zero and saturates (NaN -> 0), to bool is "
              "x != 0. Differentiable between float types (derivative 1, carried in f32); no gradient "
              "through an integer or bool side"});
}

// [SECTION] matmul_lowp

bool transpose_a(const Attrs& a) { return a.get_int("transpose_a") != 0; }
bool transpose_b(const Attrs& a) { return a.get_int("transpose_b") != 0; }

// matmul's shape rule, with both operands bf16 or both f16 and an f32 result.
Result<Types> infer_matmul_lowp(InTypes in, const Attrs& a) {
  if (in[0].dtype != in[1].dtype || (in[0].dtype != DType::BF16 && in[0].dtype != DType::F16))
    return make_error("expects two bf16 or two f16 operands, got " + type_str(in[0]) + " and " + type_str(in[1]));
  const ValueType fa{DType::F32, in[0].shape}, fb{DType::F32, in[1].shape};
  return op_registry().find("matmul")->infer(std::vector<ValueType>{fa, fb}, a);
}

// matmul's rule with every product in the operands' precision: the output gradient is
// rounded once, and each product gives an f32 gradient. A batch of A times one matrix B
// gives B's gradient as one product over all the batch's rows.
Refs matmul_lowp_vjp(const GradContext& c) {
  Emitter& e = c.e;
  const bool ta = transpose_a(c.attrs), tb = transpose_b(c.attrs);
  const Ref a = c.in(0), b = c.in(1);
  const Ref g = cast(e, c.gout(0), e.type_of(a).dtype);
  const Shape as = e.shape_of(a), bs = e.shape_of(b), gs = e.shape_of(g);
  Refs r(2);
  const bool fold_b = bs.size() == 2 && as.size() > 2 && !ta;
  if (fold_b && c.needs(1)) {
    const int64_t rows = numel(as) / as.back();
    const Ref a2 = reshape(e, a, {rows, as.back()}), g2 = reshape(e, g, {rows, gs.back()});
    r[1] = tb ? matmul_lowp(e, g2, a2, true, false) : matmul_lowp(e, a2, g2, true, false);
  }
  if (!ta && !tb) {
    if (c.needs(0)) r[0] = matmul_lowp(e, g, b, false, true);
    if (c.needs(1) && !fold_b) r[1] = matmul_lowp(e, a, g, true, false);
  } else if (!ta && tb) {
    if (c.needs(0)) r[0] = matmul_lowp(e, g, b, false, false);
    if (c.needs(1) && !fold_b) r[1] = matmul_lowp(e, g, a, true, false);
  } else if (ta && !tb) {
    if (c.needs(0)) r[0] = matmul_lowp(e, b, g, false, true);
    if (c.needs(1)) r[1] = matmul_lowp(e, a, g, false, false);
  } else {
    if (c.needs(0)) r[0] = matmul_lowp(e, b, g, true, true);
    if (c.needs(1)) r[1] = matmul_lowp(e, g, a, true, true);
  }
  if (r[0].valid()) r[0] = unbroadcast(e, r[0], as);
  if (r[1].valid()) r[1] = unbroadcast(e, r[1], bs);
  return r;
}

Refs matmul_lowp_jvp(const JvpContext& c) {
  Emitter& e = c.e;
  const bool ta = transpose_a(c.attrs), tb = transpose_b(c.attrs);
  const DType t = e.type_of(c.in(0)).dtype;
  const Ref l = c.tan(0).valid() ? matmul_lowp(e, cast(e, c.tan(0), t), c.in(1), ta, tb) : Ref{};
  const Ref r = c.tan(1).valid() ? matmul_lowp(e, c.in(0), cast(e, c.tan(1), t), ta, tb) : Ref{};
  return {accumulate(e, l, r)};
}

void register_matmul_lowp(OpRegistry& reg) {
  reg.define(
      {.name = "matmul_lowp",
       .num_inputs = 2,
       .attrs = {{"transpose_a", AttrKind::Int}, {"transpose_b", AttrKind::Int}},
       .infer = infer_matmul_lowp,
       .vjp = matmul_lowp_vjp,
       .jvp = matmul_lowp_jvp,
       // The operands hold 16-bit values exactly, so matmul's float64 product is the reference.
       .reference = [](std::span<const RefArray> in,
                       const Attrs& a) { return op_registry().find("matmul")->reference(in, a); },
       .samples =
           [] {
             auto mm = [](int64_t ta, int64_t tb) { return Attrs{{"transpose_a", ta}, {"transpose_b", tb}}; };
             auto bf = [](Shape s) { return ValueType{DType::BF16, std::move(s)}; };
             auto hf = [](Shape s) { return ValueType{DType::F16, std::move(s)}; };
             std::vector<OpSample> v{
                 sample({bf({3, 4}), bf({4, 5})}, mm(0, 0), "bf16 NN"),
                 sample({bf({3, 4}), bf({5, 4})}, mm(0, 1), "bf16 NT"),
                 sample({bf({4, 3}), bf({4, 5})}, mm(1, 0), "bf16 TN"),
                 sample({bf({4, 3}), bf({5, 4})}, mm(1, 1), "bf16 TT"),
                 sample({bf({2, 3, 4}), bf({4, 5})}, mm(0, 0), "bf16 batch x matrix"),
                 sample({bf({2, 4, 3}), bf({2, 5, 4})}, mm(1, 1), "bf16 batched TT"),
                 sample({bf({2, 1, 3, 4}), bf({3, 4, 5})}, mm(0, 0), "bf16 broadcast batch dims"),
                 sample({hf({3, 4}), hf({4, 5})}, mm(0, 0), "f16 NN"),
                 sample({hf({4, 3}), hf({5, 4})}, mm(1, 1), "f16 TT"),
                 sample({hf({2, 3, 4}), hf({4, 5})}, mm(0, 0), "f16 batch x matrix")};
             // The rule rounds the output gradient (the suite's f32 weights, |w| < 1) to the
             // operands' precision, 2^-8 relative for bf16 and 2^-11 for f16; with inputs this
             // small that error, summed over at most 5 terms, stays under the suite's absolute
             // gradient tolerance (2e-4). tests/engine/mixed_precision_test.cpp checks the
             // products at full scale.
             for (OpSample& s : v) {
               const bool bf16 = s.inputs[0].dtype == DType::BF16;
               s.lo = bf16 ? -1.0 / 128 : -1.0 / 16;
               s.hi = -s.lo;
             }
             return v;
           },
       .doc = "matrix product op(A) op(B) of bf16 (or f16) operands with an f32 result: every product "
              "exact, sums in f32 (bf16: AVX-512 BF16 dot products where the CPU has them; f16: widened "
              "to f32). Batch dims broadcast as matmul's. The autocast pass (engine/passes) puts it in "
              "place of f32 matmuls",
              .flops = matmul_flops});
}

}  // namespace

// Called from register_math_ops (math_ops.cpp), where cast used to live.
void register_precision_ops(OpRegistry& reg) {
  register_cast(reg);
  register_matmul_lowp(reg);
}

}  // namespace mls::ops
