// The registration of every CUDA kernel family and the stride helpers they share.
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& out) {
  const size_t r = out.size(), tr = t.shape().size();
  std::vector<int64_t> s(r, 0);
  for (size_t d = 0; d < r; ++d) {
    if (d + tr < r) continue;
    const size_t j = d + tr - r;
    if (t.shape()[j] == 1 && out[d] != 1) continue;
    s[d] = t.strides()[j];
  }
  return s;
}

Collapsed collapse(const Shape& shape, std::vector<std::vector<int64_t>>& strides) {
  Collapsed l;
  std::vector<std::vector<int64_t>> merged(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = l.rank > 0;
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = merged[k].back() == strides[k][d] * shape[d];
    if (merge) {
      l.dims[l.rank - 1] *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) merged[k].back() = strides[k][d];
    } else {
      MLS_CHECK(l.rank < dev::kMaxRank,
                "cuda: a strided operand of more than 8 dims that do not merge");
      l.dims[l.rank++] = shape[d];
      for (size_t k = 0; k < strides.size(); ++k) merged[k].push_back(strides[k][d]);
    }
  }
  strides = std::move(merged);
  return l;
}

void register_kernels(OpRegistry& reg) {
  register_elementwise_kernels(reg);
  register_linalg_kernels(reg);
  register_reduce_kernels(reg);
  register_layout_kernels(reg);
  register_optimizer_kernels(reg);
  register_conv_kernels(reg);
  register_norm_kernels(reg);
  register_precision_kernels(reg);
}

}  // namespace mls::cuda
