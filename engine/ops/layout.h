// Builders for the layout family: reductions max/min/var and slice, concat, split,
// index_select, pad, squeeze, unsqueeze. Each emits one op (squeeze and unsqueeze emit a
// reshape, a view), so gradients and every backend come with the ops.
//
//   Ref m = max(e, x, {-1}, true);                     // [N, C] -> [N, 1]
//   Ref v = var(e, x, {0}, false, 1);                   // unbiased, as torch.var
//   Ref h = slice(e, x, 1, 0, 4);                       // x[:, 0:4]
//   Refs parts = split(e, qkv, -1, {64, 64, 64});       // three [.., 64] outputs
//   Ref y = concat(e, {a, b}, 0);
//   Ref rows = index_select(e, table, ids, 0);          // ids: i64 [K]
//   Ref p = pad(e, img, {0, 0, 0, 0, 1, 1, 1, 1}, 0.0);  // [N,C,H,W] -> [N,C,H+2,W+2]
//   Ref s = unsqueeze(e, squeeze(e, x, {}), 0);
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/emitter.h"

namespace mls {

// Reductions over `axes` (empty: all), like sum.
Ref max(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims);
Ref min(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims);
// correction 1: unbiased (divides by n - 1), 0: population variance.
Ref var(Emitter& e, Ref x, std::vector<int64_t> axes, bool keepdims, int64_t correction = 1);

// Elements start, start + step, ... < end along `axis` (a copy). Negative start and end
// count from the end; both are clamped to the axis, as in Python.
Ref slice(Emitter& e, Ref x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
Ref concat(Emitter& e, std::vector<Ref> xs, int64_t axis);
Refs split(Emitter& e, Ref x, int64_t axis, std::vector<int64_t> sizes);
// index: i64 [K]; out-of-range indices give zeros.
Ref index_select(Emitter& e, Ref x, Ref index, int64_t axis);
// pads: {before0, after0, before1, after1, ...}, one pair per axis of x.
Ref pad(Emitter& e, Ref x, std::vector<int64_t> pads, double value = 0.0);
// Drops size-1 axes (empty: all of them); inserts a size-1 axis at `axis` (-1: last).
Ref squeeze(Emitter& e, Ref x, std::vector<int64_t> axes = {});
Ref unsqueeze(Emitter& e, Ref x, int64_t axis);

// Shared by the ops' inference and references and by their CPU kernels.
// The elements a slice takes.
struct SliceRange {
  int64_t start = 0, step = 1, len = 0;
};
// Python's slice.indices for a positive step.
SliceRange slice_range(int64_t dim, int64_t start, int64_t end, int64_t step);
// A shape seen as [outer, len, inner] around `axis`: element (o, i, j) at (o*len + i)*inner + j.
struct AxisLines {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisLines axis_lines(const Shape& s, int64_t axis);

}  // namespace mls
