// What a tensor looks like, computed in double on the host: what the step-through view, the
// debugger's fault report and the health instruments show of a wire.
//
//   TensorStats s = tensor_stats(t);          // any backend, any dtype
//   if (s.non_finite) ... s.first_non_finite ...;  s.histogram[k] ...;
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace mls {

struct TensorStats {
  Shape shape;
  DType dtype = DType::F32;
  int64_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0;  // std: population (divides by count)
  double zero_fraction = 0;                    // share of elements exactly 0
  int64_t non_finite = 0;                      // NaN and infinities (left out of the rest)
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;   // non_finite, by kind
  int64_t first_non_finite = -1;               // flat index of the first one (-1: none)
  // `bins` equal bins from min to max (one bin when min == max).
  std::vector<int64_t> histogram;
};
TensorStats tensor_stats(const Tensor& t, int bins = 32);
TensorStats tensor_stats(const std::vector<double>& values, const Shape& shape, int bins = 32);

}  // namespace mls
