// Shape ops: reshape (a view), expand (broadcast_to), transpose (permute), fill.
#include <algorithm>

#include "engine/ops/op_helpers.h"

namespace mls::ops {

namespace {

std::vector<int64_t> inverse_perm(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

RefArray ref_transpose(const RefArray& x, const std::vector<int64_t>& perm) {
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x.shape[static_cast<size_t>(perm[i])];
  Strides xs = contiguous_strides(x.shape);
  RefArray r{out, std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < numel(out); ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = out.size(); d-- > 0;) {
      src += (rem % out[d]) * xs[static_cast<size_t>(perm[d])];
      rem /= out[d];
    }
    r.v[static_cast<size_t>(i)] = x.v[static_cast<size_t>(src)];
  }
  return r;
}

}  // namespace

void register_shape_ops(OpRegistry& reg) {
  reg.define(
      {.name = "reshape",
       .attrs = {{"shape", AttrKind::Ints}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         const Shape& s = a.get_ints("shape");
         if (numel(s) != numel(in[0].shape) ||
             std::any_of(s.begin(), s.end(), [](int64_t d) { return d < 0; }))
           return make_error("cannot reshape " + shape_str(in[0].shape) + " to " + shape_str(s));
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             return Refs{reshape(c.e, c.gout(0), c.e.shape_of(c.in(0)))};
           },
       .jvp =
           [](const JvpContext& c) { return Refs{reshape(c.e, c.tan(0), c.e.shape_of(c.out(0)))}; },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             return std::vector<RefArray>{RefArray{a.get_ints("shape"), in[0].v}};
           },
       .samples =
           [] {
             return with_dtypes({sample({f32({2, 3, 4})}, {{"shape", std::vector<int64_t>{6, 4}}})},
                                kNonF32Dtypes);
           },
       .view = true,
       .doc = "same elements, new shape (a view: no copy)"});
  reg.define(
      {.name = "expand",
       .attrs = {{"shape", AttrKind::Ints}},
       .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
         const Shape& s = a.get_ints("shape");
         auto b = broadcast_shapes(in[0].shape, s);
         if (!b || *b != s)
           return make_error("cannot expand " + shape_str(in[0].shape) + " to " + shape_str(s));
         return Types{{in[0].dtype, s}};
       },
       .vjp =
           [](const GradContext& c) {
             return Refs{unbroadcast(c.e, c.gout(0), c.e.shape_of(c.in(0)))};
           },
       .jvp =
           [](const JvpContext& c) { return Refs{expand(c.e, c.tan(0), c.e.shape_of(c.out(0)))}; },
       .reference =
           [](std::span<const RefArray> in, const Attrs& a) {
             const Shape& s = a.get_ints("shape");
             RefArray r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
             for (int64_t i = 0; i < numel(s); ++i)
               r.v[static_cast<size_t>(i)] =
                   in[0].v[static_cast<size_t>(broadcast_index(in[0].shape, s, i))];
             return std::vector<RefArray>{r};
           },
       .samples =
           [] {
             return std::vector<OpSample>{
                 sample({f32({3, 1})}, {{"shape", std::vector<int64_t>{2, 3, 4}}}),
                 sample({f32({4})}, {{"shape", std::vector<int64_t>{3, 4}}})};
           },
       .doc = "broadcast to a larger shape"});
  reg.define({.name = "transpose",
              .attrs = {{"perm", AttrKind::Ints}},
              .infer = [](InTypes in, const Attrs& a) -> Result<Types> {
                const auto& p = a.get_ints("perm");
                std::vector<int64_t> sorted = p;
                std::sort(sorted.begin(), sorted.end());
                bool ok = p.size() == in[0].shape.size();
                for (size_t i = 0; ok && i < sorted.size(); ++i)
                  ok = sorted[i] == static_cast<int64_t>(i);
                if (!ok)
                  return make_error("perm is not a permutation of the axes of " +
                                    shape_str(in[0].shape));
                Shape s(p.size());
                for (size_t i = 0; i < p.size(); ++i) s[i] = in[0].shape[static_cast<size_t>(p[i])];
                return Types{{in[0].dtype, s}};
              },
              .vjp =
                  [](const GradContext& c) {
                    return Refs{transpose(c.e, c.gout(0), inverse_perm(c.attrs.get_ints("perm")))};
                  },
              .jvp =
                  [](const JvpContext& c) {
                    return Refs{transpose(c.e, c.tan(0), c.attrs.get_ints("perm"))};
                  },
              .reference =
                  [](std::span<const RefArray> in, const Attrs& a) {
                    return std::vector<RefArray>{ref_transpose(in[0], a.get_ints("perm"))};
                  },
              .samples =
                  [] {
                    return with_dtypes(
                        {sample({f32({3, 5})}, {{"perm", std::vector<int64_t>{1, 0}}}),
                         sample({f32({2, 3, 4})}, {{"perm", std::vector<int64_t>{2, 0, 1}}}),
                         // The CPU's two walks: whole rows (a head split), tiles past 32
                         // with a batch axis; size-1 axes dropped, neighbours merged.
                         sample({f32({2, 3, 4, 5})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                         sample({f32({2, 37, 33})}, {{"perm", std::vector<int64_t>{0, 2, 1}}}),
                         sample({f32({3, 1, 4, 2})}, {{"perm", std::vector<int64_t>{3, 1, 0, 2}}}),
                         sample({f32({2, 3, 4, 5})}, {{"perm", std::vector<int64_t>{2, 3, 0, 1}}})},
                        std::array{DType::I64});
                  },
              .doc = "permute axes (a contiguous copy)"});
  reg.define(
      {.name = "fill",
       .num_inputs = 0,
       .attrs = {{"shape", AttrKind::Ints},
                 {"value", AttrKind::Float},
                 {"dtype", AttrKind::String}},
       .infer = [](InTypes, const Attrs& a) -> Result<Types> {
         auto t = parse_dtype(a.get_string("dtype"));
         if (!t) return make_error("unknown dtype '" + a.get_string("dtype") + "'");
         return Types{{*t, a.get_ints("shape")}};
       },
       .reference =
           [](std::span<const RefArray>, const Attrs& a) {
             const Shape& s = a.get_ints("shape");
             return std::vector<RefArray>{RefArray{
                 s, std::vector<double>(static_cast<size_t>(numel(s)), a.get_float("value"))}};
           },
       .samples =
           [] {
             return std::vector<OpSample>{sample({}, {{"shape", std::vector<int64_t>{2, 3}},
                                                      {"value", 1.5},
                                                      {"dtype", std::string("f32")}}),
                                          sample({},
                                                 {{"shape", std::vector<int64_t>{4}},
                                                  {"value", 7.0},
                                                  {"dtype", std::string("i64")}},
                                                 "i64")};
           },
       .kind = OpKind::NonDiff,
       .doc = "a tensor of one value"});
}

}  // namespace mls::ops
