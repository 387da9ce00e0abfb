#include "engine/onnx/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace mls::onnx {

namespace {

// The weight's output-channel axis: Conv [O, I, kh, kw] -> 0; Gemm/MatMul [in, out] -> 1
// (Gemm with transB: [out, in] -> 0).
int64_t channel_axis(const Node& n) {
  if (n.op_type == "Conv") return 0;
  if (n.op_type == "Gemm" && n.int_or("transB", 0) != 0) return 0;
  return 1;
}

bool quantizable(const Model& m, const Node& n) {
  if (n.op_type != "Conv" && n.op_type != "Gemm" && n.op_type != "MatMul") return false;
  if (n.inputs.size() < 2) return false;
  const CheckpointTensor* w = m.initializer(n.inputs[1]);
  return w && w->dtype == DType::F32 && (w->shape.size() == 4 || w->shape.size() == 2) &&
         (n.op_type != "Conv" || w->shape.size() == 4);
}

}  // namespace

void Range::add(const float* v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
}

std::vector<std::string> calibration_values(const Model& m) {
  std::vector<std::string> r;
  for (const Node& n : m.nodes)
    if (quantizable(m, n) && std::find(r.begin(), r.end(), n.inputs[0]) == r.end()) r.push_back(n.inputs[0]);
  return r;
}

Result<Model> quantize_qdq(const Model& in, const std::map<std::string, Range>& ranges) {
  Model m = in;
  m.nodes.clear();
  std::map<std::string, std::string> dequantized;  // activation -> its QDQ value
  std::set<std::string> replaced;                  // f32 weights now stored as int8
  for (const Node& original : in.nodes) {
    if (!quantizable(in, original)) {
      m.nodes.push_back(original);
      continue;
    }
    Node n = original;
    // The activation: uint8 with a zero point, over the calibrated range (0 included, so
    // that zero is exact, as padding needs).
    const std::string& x = n.inputs[0];
    auto dq = dequantized.find(x);
    if (dq == dequantized.end()) {
      auto r = ranges.find(x);
      if (r == ranges.end()) return make_error("no calibration range for '" + x + "'");
      const double lo = std::min(0.0f, r->second.lo), hi = std::max(0.0f, r->second.hi);
      const double scale = hi > lo ? (hi - lo) / 255.0 : 1.0;
      const auto zp = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / scale), 0.0, 255.0));
      std::string s = m.add_scalar(x + ".act_scale", static_cast<float>(scale));
      CheckpointTensor z;
      z.dtype = DType::U8;
      z.bytes = {zp};
      std::string zn = m.add_initializer(x + ".act_zero_point", std::move(z));
      std::string q = m.add("QuantizeLinear", {x, s, zn}, {}, m.fresh(x + "/quantized"));
      dq = dequantized.emplace(x, m.add("DequantizeLinear", {q, s, zn}, {}, m.fresh(x + "/dequantized"))).first;
    }
    n.inputs[0] = dq->second;

    // The weight: int8, symmetric (zero point 0), one scale per output channel.
    const CheckpointTensor& w = *in.initializer(n.inputs[1]);
    const int64_t axis = channel_axis(n);
    const int64_t channels = w.shape[static_cast<size_t>(axis)];
    const int64_t inner = axis == 0 ? numel(w.shape) / channels : 1;
    const int64_t stride = axis == 0 ? 1 : channels;  // [in, out] walks columns
    const int64_t count = numel(w.shape) / channels;
    const auto* wv = reinterpret_cast<const float*>(w.bytes.data());
    std::vector<float> scales(static_cast<size_t>(channels));
    CheckpointTensor q;
    q.dtype = DType::I8;
    q.shape = w.shape;
    q.bytes.resize(static_cast<size_t>(numel(w.shape)));
    for (int64_t c = 0; c < channels; ++c) {
      auto at = [&](int64_t k) { return axis == 0 ? c * inner + k : k * stride + c; };
      float mx = 0;
      for (int64_t k = 0; k < count; ++k) mx = std::max(mx, std::abs(wv[at(k)]));
      const float s = mx > 0 ? mx / 127.0f : 1.0f;
      scales[static_cast<size_t>(c)] = s;
      for (int64_t k = 0; k < count; ++k) {
        auto v = static_cast<int8_t>(std::clamp(std::nearbyint(wv[at(k)] / s), -127.0f, 127.0f));
        std::memcpy(&q.bytes[static_cast<size_t>(at(k))], &v, 1);
      }
    }
    const std::string wn = n.inputs[1];  // a copy: the input is replaced below
    std::string qn = m.add_initializer(wn + ".int8", std::move(q));
    std::string sn = m.add_initializer(wn + ".scale", make_f32("", {channels}, scales));
    CheckpointTensor zeros;
    zeros.dtype = DType::I8;
    zeros.shape = {channels};
    zeros.bytes.assign(static_cast<size_t>(channels), 0);
    std::string zn = m.add_initializer(wn + ".zero_point", std::move(zeros));
    n.inputs[1] = m.add("DequantizeLinear", {qn, sn, zn}, {Attribute::i("axis", axis)}, m.fresh(wn + "/dequantized"));
    replaced.insert(wn);
    m.nodes.push_back(std::move(n));
  }
  // Drop the f32 weights nothing reads any more.
  std::erase_if(m.initializers, [&](const CheckpointTensor& t) {
    if (!replaced.count(t.name)) return false;
    for (const Node& n : m.nodes)
      if (std::find(n.inputs.begin(), n.inputs.end(), t.name) != n.inputs.end()) return false;
    return true;
  });
  return m;
}

}  // namespace mls::onnx
