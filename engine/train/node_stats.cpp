#include "engine/train/node_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace mls {

std::vector<LabelTime> time_by_label(const CompiledPlan& plan) {
  std::vector<LabelTime> out;
  std::map<std::string, size_t> index;
  for (const CompiledPlan::StepTime& s : plan.step_times()) {
    if (s.runs == 0) continue;
    std::string label = s.label;
    const bool recompute = label.size() > 12 && label.ends_with(" (recompute)");
    if (recompute) label.resize(label.size() - 12);
    if (label == "(recompute)") label.clear();
    auto [it, fresh] = index.try_emplace(label, out.size());
    if (fresh) out.push_back({label});
    const double per_step = s.seconds / static_cast<double>(s.runs);
    (s.backward || recompute ? out[it->second].backward_seconds
                             : out[it->second].forward_seconds) += per_step;
  }
  return out;
}

Result<std::vector<OutputStats>> output_stats(Backend& backend, ModelGraph model,
                                              std::span<const Tensor> params,
                                              const HostBatch& batch) {
  Graph& g = model.graph;
  if (params.size() != g.params().size())
    return make_error("output_stats: " + std::to_string(params.size()) +
                      " parameter values for a model with " + std::to_string(g.params().size()));
  // Each label's last f32 node: what the layer hands on (Linear's bias add, not its matmul).
  std::vector<std::string> labels;
  std::map<std::string, Ref> last;
  for (const Node& n : g.nodes()) {
    if (n.label.empty() || n.backward || n.outputs.empty()) continue;
    if (g.type_of(n.outputs[0]).dtype != DType::F32) continue;
    if (!last.count(n.label)) labels.push_back(n.label);
    last[n.label] = n.outputs[0];
  }
  Refs outs;
  for (const std::string& l : labels) outs.push_back(last[l]);
  g.set_outputs(outs);
  auto plan = CompiledPlan::compile(g, backend);
  if (!plan) return plan.error();
  const ValueType xt = g.type_of(model.input), yt = g.type_of(model.labels);
  if (static_cast<int64_t>(batch.x.size()) != numel(xt.shape))
    return make_error("output_stats: a batch of " + std::to_string(batch.x.size()) +
                      " values for an input " + shape_str(xt.shape));
  Tensor x = Tensor::empty(backend, DType::F32, xt.shape, AllocTag::Input);
  x.fill_raw(batch.x.data(), x.nbytes());
  Tensor y = Tensor::zeros(backend, yt.dtype, yt.shape,
                           AllocTag::Input);  // the loss's targets do not matter
  if (yt.dtype == DType::I64 && static_cast<int64_t>(batch.y.size()) == numel(yt.shape))
    y.fill_raw(batch.y.data(), y.nbytes());
  if (auto r = plan->bind(model.input, x); !r) return r.error();
  if (auto r = plan->bind(model.labels, y); !r) return r.error();
  Tensor seed;
  if (model.step_seed.valid()) {
    seed = Tensor::zeros(backend, DType::I64, {1}, AllocTag::Input);
    if (auto r = plan->bind(model.step_seed, seed); !r) return r.error();
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (auto r = plan->bind(g.params()[i], params[i]); !r) return r.error();
  plan->run();
  std::vector<OutputStats> stats;
  for (size_t k = 0; k < labels.size(); ++k) {
    const Tensor& t = plan->tensor(outs[k]);
    const std::vector<float> v = (t.is_contiguous() ? t : t.contiguous()).to_f32();
    OutputStats s{labels[k], t.shape()};
    if (!v.empty()) {
      double sum = 0, sq = 0;
      size_t zeros = 0;
      s.min = s.max = v[0];
      for (float f : v) {
        sum += f;
        sq += static_cast<double>(f) * f;
        zeros += f == 0.0f;
        s.min = std::min<double>(s.min, f);
        s.max = std::max<double>(s.max, f);
      }
      const double n = static_cast<double>(v.size());
      s.mean = sum / n;
      s.std = std::sqrt(std::max(0.0, sq / n - s.mean * s.mean));
      s.zero_fraction = static_cast<double>(zeros) / n;
    }
    stats.push_back(std::move(s));
  }
  return stats;
}

}  // namespace mls
