// Parameter initialisers.
//
//   Tensor w = Tensor::empty(cpu, DType::F32, {784, 256}, AllocTag::Parameter);
//   initialise(w, {"kaiming_uniform", 784, 256}, seed);
//
// Schemes: kaiming_uniform U(+-sqrt(6/fan_in)) (He, for ReLU nets); xavier_uniform
// U(+-sqrt(6/(fan_in+fan_out))); uniform_fan_in U(+-1/sqrt(fan_in)) (PyTorch's default for
// Linear weights and biases); normal N(0, 0.01); zeros; ones.
#pragma once

#include <cstdint>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/ir/graph.h"

namespace mls {

Result<void> initialise(Tensor& t, const ParamInit& init, uint64_t seed);

}  // namespace mls
