// Helpers shared by the engine tests.
#pragma once

#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "engine/core/tensor.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/rng.h"

namespace mls::test {

inline Backend& host() {
  cpu::init();
  return cpu::backend();
}

inline RefArray random_array(const ValueType& t, Rng& rng, const OpSample& s) {
  RefArray a{t.shape, std::vector<double>(static_cast<size_t>(numel(t.shape)))};
  for (double& v : a.v) {
    if (dtype_is_float(t.dtype)) {
      v = static_cast<double>(static_cast<float>(rng.uniform(s.lo, s.hi)));  // representable in f32
      if (std::abs(v) < s.min_abs) v = v < 0 ? -s.min_abs - 0.01 : s.min_abs + 0.01;
      // The 16-bit floats: draw what the tensor will hold, so the reference sees it too.
      if (t.dtype == DType::F16) v = f16_to_f32(f32_to_f16(static_cast<float>(v)));
      if (t.dtype == DType::BF16) v = bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    } else if (t.dtype == DType::Bool) {
      v = static_cast<double>(rng.below(2));
    } else {
      v = static_cast<double>(rng.below(static_cast<uint64_t>(s.int_high)));
    }
  }
  return a;
}

inline Tensor to_tensor(const RefArray& a, DType t, Backend& backend) {
  Tensor x = Tensor::empty(backend, t, a.shape, AllocTag::Other);
  if (t == DType::I64) {
    std::vector<int64_t> v(a.v.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(a.v[i]);
    x.fill_from_host_i64(v);
  } else {
    x.fill_from_host(std::vector<float>(a.v.begin(), a.v.end()));
  }
  return x;
}
inline Tensor to_tensor(const RefArray& a, DType t) { return to_tensor(a, t, host()); }

// max |a - b| / (atol + rtol |b|) <= 1 for all elements.
inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                          double atol, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

}  // namespace mls::test
