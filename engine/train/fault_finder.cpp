#include "engine/train/fault_finder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/eager.h"
#include "engine/exec/replay.h"

namespace mls {

namespace {

// A backward node's label is its forward node's, sometimes with a suffix ("fc1.grad"):
// the document node is the part before it.
std::string document_label(const Node& n) {
  std::string l = n.label;
  if (n.backward && l.ends_with(".grad")) l.resize(l.size() - 5);
  return l;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// "max |x| 3.1e+37" and the non-finite counts: "2 nan, 1 +inf".
std::string range_text(const TensorStats& s) {
  std::string t;
  if (s.count > s.non_finite)
    t = "max |x| " + num(std::max(std::abs(s.min), std::abs(s.max)));
  else if (s.count == 0)
    t = "empty";
  auto add = [&](int64_t n, const char* kind) {
    if (n > 0) t += (t.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  };
  add(s.nan, "nan");
  add(s.pos_inf, "+inf");
  add(s.neg_inf, "-inf");
  return t;
}

// Non-finite values only exist in floating types; integers are never at fault.
bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Where a value came from, for a person: an input's or parameter's name, a node's label
// and op ("fc1 (matmul)"), a constant's name.
std::string origin(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  if (v.kind != ValueKind::Node) return v.name.empty() ? g.value_name(r) : v.name;
  const Node& n = g.nodes()[static_cast<size_t>(v.node)];
  const std::string l = document_label(n);
  return (l.empty() ? g.value_name(r) : l) + " (" + n.op->name + (n.backward ? ", backward" : "") +
         ")";
}

}  // namespace

Result<std::optional<FaultSite>> find_first_fault(const FaultQuery& q) {
  if (!q.backend || !q.build || !q.batch)
    return make_error("find_first_fault: the query needs a backend, a model builder and a batch");
  Backend& backend = *q.backend;
  const HostBatch& batch = *q.batch;
  auto built = (*q.build)(batch.size, true);
  if (!built) return built.error();
  ModelGraph& mg = *built;
  autocast_model(mg, q.precision);
  Graph& g = mg.graph;
  if (q.params.size() != g.params().size())
    return make_error("find_first_fault: graph '" + g.name() + "' has " +
                      std::to_string(g.params().size()) + " parameters, the query " +
                      std::to_string(q.params.size()));

  // 1. The batch: its inputs, then f32 targets.
  const ValueType xt = g.type_of(mg.input), yt = g.type_of(mg.labels);
  const bool values = yt.dtype != DType::I64;
  static const std::vector<float> kNone;
  const std::vector<float>& targets = values ? batch.t : kNone;
  if (static_cast<int64_t>(batch.x.size()) != numel(xt.shape) ||
      (values ? static_cast<int64_t>(batch.t.size()) : static_cast<int64_t>(batch.y.size())) !=
          numel(yt.shape))
    return make_error("find_first_fault: a batch of " + std::to_string(batch.size) +
                      " samples does not fit graph '" + g.name() + "' (inputs " +
                      shape_str(xt.shape) + ", targets " + shape_str(yt.shape) + ")");
  for (auto [ref, host] : {std::pair{mg.input, &batch.x}, std::pair{mg.labels, &targets}}) {
    std::vector<double> v(host->begin(), host->end());
    if (all_finite(v)) continue;
    FaultSite f;
    f.phase = FaultSite::Phase::Input;
    f.label = g.value(ref).name;
    f.value = ref.id;
    f.stats = tensor_stats(v, g.type_of(ref).shape);
    f.stats.dtype = DType::F32;
    return std::optional<FaultSite>(std::move(f));
  }

  // 2. The trainable parameters as the step started. Running statistics (BatchNorm's) are
  // not read by a training step's forward: one that went non-finite is a symptom, reported
  // only when no node of the step is at fault (4.).
  auto bad_param = [&](bool trainable) -> std::optional<FaultSite> {
    for (size_t i = 0; i < q.params.size(); ++i) {
      if (!dtype_is_float(q.params[i].dtype()) || g.value(g.params()[i]).trainable != trainable)
        continue;
      TensorStats s = tensor_stats(q.params[i]);
      if (s.non_finite == 0) continue;
      FaultSite f;
      f.phase = FaultSite::Phase::Parameter;
      f.label = g.value(g.params()[i]).name;
      f.value = g.params()[i].id;
      f.stats = std::move(s);
      return f;
    }
    return std::nullopt;
  };
  if (auto f = bad_param(true)) return f;

  // 3. The step: the model's nodes, then the backward that append_backward writes.
  const size_t forward_nodes = g.nodes().size();
  Refs wrt;
  for (Ref r : g.params())
    if (g.value(r).trainable) wrt.push_back(r);
  auto grads = append_backward(g, mg.loss, wrt);
  if (!grads) return grads.error();

  EagerSession s(backend);
  s.set_recording(false);  // the backward is in the graph already
  s.set_deferred_errors(true);
  std::vector<Ref> map(g.values().size());
  for (size_t i = 0; i < q.params.size(); ++i)
    map[static_cast<size_t>(g.params()[i].id)] = s.leaf(q.params[i]);
  Tensor x = Tensor::empty(backend, xt.dtype, xt.shape, AllocTag::Input);
  x.fill_raw(batch.x.data(), x.nbytes());
  map[static_cast<size_t>(mg.input.id)] = s.leaf(x);
  Tensor y = Tensor::empty(backend, yt.dtype, yt.shape, AllocTag::Input);
  if (values)
    y.fill_raw(batch.t.data(), y.nbytes());
  else
    y.fill_raw(batch.y.data(), y.nbytes());
  map[static_cast<size_t>(mg.labels.id)] = s.leaf(y);
  if (mg.step_seed.valid())
    map[static_cast<size_t>(mg.step_seed.id)] =
        s.leaf(Tensor::from_i64(backend, {1}, {q.step_seed}, AllocTag::Input));
  std::optional<FaultSite> found;
  auto ran = replay(s, g, map, [&](size_t k, std::span<const Ref> outs) {
    const Node& n = g.nodes()[k];
    for (size_t j = 0; j < outs.size(); ++j) {
      const Tensor& t = s.value(outs[j]);
      if (!dtype_is_float(t.dtype())) continue;
      const std::vector<double> v = t.to_f64();
      if (all_finite(v)) continue;
      FaultSite f;
      f.phase = k < forward_nodes ? FaultSite::Phase::Forward : FaultSite::Phase::Backward;
      f.label = document_label(n);
      f.op = n.op->name;
      f.node = static_cast<int32_t>(k);
      f.value = n.outputs[j].id;
      f.stats = tensor_stats(v, t.shape());
      f.stats.dtype = t.dtype();
      for (Ref r : n.inputs) {
        const Tensor& in = s.value(map[static_cast<size_t>(r.id)]);
        std::string line = origin(g, r) + " " + shape_str(in.shape()) + ": ";
        if (dtype_is_float(in.dtype()))
          line += range_text(tensor_stats(in, 1));
        else
          line += dtype_name(in.dtype());
        f.inputs.push_back(std::move(line));
      }
      found = std::move(f);
      return false;  // the first: stop here
    }
    return true;
  });
  if (!ran) return make_error("find_first_fault: " + ran.error().message);
  if (found) return found;
  // 4. A running statistic, when nothing the step computed is at fault.
  return bad_param(false);
}

std::string describe_fault(const FaultSite& f, int64_t step) {
  const TensorStats& s = f.stats;
  std::string where;
  if (f.phase == FaultSite::Phase::Input)
    where = "the batch's " + std::string(f.label.empty() ? "inputs" : "input '" + f.label + "'");
  else if (f.phase == FaultSite::Phase::Parameter)
    where = "parameter '" + f.label + "' as the step started (an earlier step left it so)";
  else
    where = "the output of " +
            (f.label.empty() ? "node " + std::to_string(f.node) : "'" + f.label + "'") + " (" +
            f.op + ", " + phase_name(f.phase) + ")";
  std::string counts;
  auto add = [&](int64_t n, const char* kind) {
    if (n > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  };
  add(s.nan, "nan");
  add(s.pos_inf, "+inf");
  add(s.neg_inf, "-inf");
  std::string text = "The first non-finite value of step " + std::to_string(step) + " is in " +
                     where + ": " + counts;
  if (s.shape.empty())
    text += " (a scalar)";
  else
    text += " of " + std::to_string(s.count) + " values " + shape_str(s.shape) +
            ", the first at flat index " + std::to_string(s.first_non_finite);
  if (s.count > s.non_finite)
    text += "; the finite ones lie in [" + num(s.min) + ", " + num(s.max) + "]";
  text += ".";
  if (!f.inputs.empty()) {
    text += " Its inputs: ";
    for (size_t i = 0; i < f.inputs.size(); ++i) text += (i ? "; " : "") + f.inputs[i];
    text += ".";
  }
  return text;
}

}  // namespace mls
