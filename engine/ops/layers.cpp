#include "engine/ops/layers.h"

#include <functional>
#include <map>

namespace mls {

namespace {

using Declare = std::function<Result<std::vector<LayerParam>>(const LayerConfig&)>;

// PyTorch's bias init, U(+-1/sqrt(fan_in)); zeros when the weights start as zeros.
ParamInit bias_init(const LayerConfig& c, int64_t fan_in, int64_t fan_out) {
  return {c.init == "zeros" ? "zeros" : "uniform_fan_in", fan_in, fan_out};
}

std::vector<LayerParam> weight_and_bias(const LayerConfig& c, Shape w, int64_t fan_in,
                                        int64_t fan_out, int64_t bias_size) {
  std::vector<LayerParam> ps{{"weight", std::move(w), {c.init, fan_in, fan_out}, true}};
  if (c.bias) ps.push_back({"bias", {bias_size}, bias_init(c, fan_in, fan_out), true});
  return ps;
}

Result<std::vector<LayerParam>> conv(const LayerConfig& c, bool transposed) {
  const char* layer = transposed ? "conv_transpose2d" : "conv2d";
  // Sizes are checked where tensors are made (a negative one names the shape); groups divide.
  if (c.groups < 1 || c.in % c.groups != 0 || c.out % c.groups != 0)
    return make_error(std::string(layer) + ": groups " + std::to_string(c.groups) +
                      " must divide in (" + std::to_string(c.in) + ") and out (" +
                      std::to_string(c.out) + ")");
  const int64_t k2 = c.kernel * c.kernel;
  if (transposed)  // [Cin, Cout/groups, k, k]; PyTorch takes the fans from dims 1 and 0
    return weight_and_bias(c, {c.in, c.out / c.groups, c.kernel, c.kernel}, c.out / c.groups * k2,
                           c.in * k2, c.out);
  return weight_and_bias(c, {c.out, c.in / c.groups, c.kernel, c.kernel}, c.in / c.groups * k2,
                         c.out / c.groups * k2, c.out);
}

// A scale of ones and a shift of zeros over `n` values.
std::vector<LayerParam> affine(int64_t n) {
  return {{"weight", {n}, {"ones", n, n}, true}, {"bias", {n}, {"zeros", n, n}, true}};
}

const std::map<std::string, Declare, std::less<>>& declarations() {
  static const std::map<std::string, Declare, std::less<>> d = {
      {"linear",
       [](const LayerConfig& c) -> Result<std::vector<LayerParam>> {
         return weight_and_bias(c, {c.in, c.out}, c.in, c.out,
                                c.out);  // [in, out]: the engine's layout
       }},
      {"conv2d", [](const LayerConfig& c) { return conv(c, false); }},
      {"conv_transpose2d", [](const LayerConfig& c) { return conv(c, true); }},
      {"batch_norm",
       [](const LayerConfig& c) -> Result<std::vector<LayerParam>> {
         std::vector<LayerParam> ps = affine(c.in);
         ps.push_back({"running_mean", {c.in}, {"zeros", c.in, c.in}, false});
         ps.push_back({"running_var", {c.in}, {"ones", c.in, c.in}, false});
         return ps;
       }},
      {"layer_norm",
       [](const LayerConfig& c) -> Result<std::vector<LayerParam>> { return affine(c.in); }},
      {"embedding",
       [](const LayerConfig& c) -> Result<std::vector<LayerParam>> {
         // [vocabulary, dim]; fans as PyTorch reads them (a normal init ignores them).
         return std::vector<LayerParam>{{"weight", {c.in, c.out}, {c.init, c.out, c.in}, true}};
       }},
  };
  return d;
}

}  // namespace

const std::vector<std::string>& layer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, fn] : declarations()) v.push_back(name);
    return v;
  }();
  return names;
}

Result<std::vector<LayerParam>> layer_params(std::string_view layer, const LayerConfig& c) {
  auto it = declarations().find(layer);
  if (it == declarations().end()) {
    std::string known;
    for (const std::string& n : layer_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error("no layer '" + std::string(layer) + "' (declared: " + known + ")");
  }
  return it->second(c);
}

}  // namespace mls
