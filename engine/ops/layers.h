// Parametrised layers, declared once: each layer's parameters (names, shapes, fans and
// initialisation) from its configuration. The node types (nodes/types/*.cpp) and Lua's mls.nn
// (through mls.layer_params, scripting/nn_lib.cpp) both build their layers from here, so a
// Conv2d drawn as a node and nn.Conv2d in a script get the same tensors, which the same seed
// fills with the same values.
//
//   LayerConfig c;  c.in = 3;  c.out = 16;  c.kernel = 3;
//   Result<std::vector<LayerParam>> ps = layer_params("conv2d", c);
//   ps->at(0).shape == Shape{16, 3, 3, 3};  ps->at(0).init.fan_in == 27
//   ps->at(1).name == "bias";  ps->at(1).init.scheme == "uniform_fan_in"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/graph.h"

namespace mls {

struct LayerConfig {
  int64_t in = 0;   // input features or channels (embedding: the vocabulary size; norms: the size)
  int64_t out = 0;  // output features or channels (embedding: the vector size)
  int64_t kernel = 1;  // convolutions: kernel height and width
  int64_t groups = 1;  // convolutions: channel groups
  bool bias = true;
  std::string init =
      "kaiming_uniform";  // the weight's scheme; a bias starts at zero with a zeros weight
};

struct LayerParam {
  std::string name;  // "weight", "bias", "running_mean", ...
  Shape shape;
  ParamInit init;
  bool trainable = true;  // false: state kept and saved but not trained (running statistics)
};

// The layers declared: linear, conv2d, conv_transpose2d, batch_norm, layer_norm, embedding.
const std::vector<std::string>& layer_names();

// The layer's parameters in the order they are made (and numbered for initialisation).
// Errors name the layer ("conv2d: groups 3 must divide in (4) and out (6)"); sizes below 0 are
// refused where the tensors are made, with the shape.
Result<std::vector<LayerParam>> layer_params(std::string_view layer, const LayerConfig& c);

}  // namespace mls
