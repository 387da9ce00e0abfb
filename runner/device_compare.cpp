#include "runner/device_compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/autodiff/autodiff.h"
#include "engine/core/backend_registry.h"
#include "engine/core/op.h"
#include "engine/exec/eager.h"
#include "engine/train/rng.h"

namespace mls::runner {

namespace {

// The per-element figures of one tensor against its reference.
DiffStats diff(const std::vector<double>& got, const std::vector<double>& want, bool floating) {
  DiffStats s;
  s.elements = static_cast<int64_t>(want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  // The distance in f32 ulps: the difference of the values' positions on the f32 number line.
  auto ordered = [](float f) {
    const auto i = std::bit_cast<int32_t>(f);
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i : int64_t{i};
  };
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      s.finite = false;
      s.max_abs = s.max_rel = s.max_ulps = std::numeric_limits<double>::infinity();
      continue;
    }
    const double d = std::abs(got[i] - want[i]);
    s.max_abs = std::max(s.max_abs, d);
    if (floating) {
      const auto u = ordered(static_cast<float>(got[i])) - ordered(static_cast<float>(want[i]));
      s.max_ulps = std::max(s.max_ulps, static_cast<double>(u < 0 ? -u : u));
    }
  }
  if (got.size() != want.size()) s.finite = false;
  s.max_rel = std::isinf(s.max_abs) ? s.max_abs : scale > 0 ? s.max_abs / scale : s.max_abs;
  return s;
}

RefArray to_ref(const Tensor& t) {
  return {t.shape(), t.to_f64()};
}

// A device tensor holding `a` rounded to `dtype`.
Tensor from_ref(const RefArray& a, DType dtype, Backend& b) {
  Tensor x = Tensor::empty(b, dtype, a.shape, AllocTag::Other);
  if (dtype_is_float(dtype)) {
    x.fill_from_host(std::vector<float>(a.v.begin(), a.v.end()));
  } else {
    std::vector<int64_t> v(a.v.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(a.v[i]);
    x.fill_from_host_i64(v);
  }
  return x;
}

// A device copy of a host tensor (the same dtype and bytes).
Tensor copy_to(const Tensor& t, Backend& b, AllocTag tag) {
  Tensor src = t.is_contiguous() ? t : t.contiguous();
  Tensor out = Tensor::empty(b, t.dtype(), t.shape(), tag);
  std::vector<char> host(src.nbytes());
  if (!host.empty()) {
    src.backend().copy_to_host(*src.buffer(), src.byte_offset(), host.data(), host.size());
    out.fill_raw(host.data(), host.size());
  }
  return out;
}

struct Step {
  const Graph* graph = nullptr;
  size_t forward_nodes = 0;
  std::vector<Tensor> leaves;  // per value: the host tensor of a leaf (params, batch, consts)
  std::vector<int32_t> grad_of_param;  // per trainable param (in `params` order): its value
  std::vector<std::string> param_names;
};

std::string value_name(const Graph& g, size_t node, size_t k) {
  const Node& n = g.nodes()[node];
  return n.op->name + "#" + std::to_string(node) + " (" + (n.label.empty() ? "seed" : n.label) +
         ") out " + std::to_string(k);
}

// The device's run: chained (its own values) and, optionally, each node alone.
struct DeviceValues {
  std::vector<DiffStats> chained, alone;  // per IR value (node outputs only)
  double loss = 0;
};

Result<DeviceValues> run_on(const Step& st, const std::vector<RefArray>& ref, Backend& b,
                            bool kernel_alone, Ref loss) {
  const Graph& g = *st.graph;
  DeviceValues dv;
  dv.chained.assign(g.values().size(), DiffStats{});
  dv.alone.assign(g.values().size(), DiffStats{});
  EagerSession s(b);
  s.set_recording(false);  // the backward is in the graph already
  s.set_deferred_errors(true);
  std::vector<Ref> map(g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i)
    if (st.leaves[i].defined()) map[i] = s.leaf(copy_to(st.leaves[i], b, AllocTag::Input));
  for (size_t ni = 0; ni < g.nodes().size(); ++ni) {
    const Node& n = g.nodes()[ni];
    Refs ins;
    for (Ref r : n.inputs) ins.push_back(map[static_cast<size_t>(r.id)]);
    Refs o = s.emit(n.op->name, ins, n.attrs);
    if (s.failed())
      return make_error("node '" + n.label + "' (" + n.op->name + ") on " + std::string(b.name()) +
                        ": " + s.error());
    for (size_t k = 0; k < o.size(); ++k) {
      const size_t id = static_cast<size_t>(n.outputs[k].id);
      map[id] = o[k];
      const Tensor& t = s.value(o[k]);
      dv.chained[id] = diff(t.to_f64(), ref[id].v, dtype_is_float(t.dtype()));
      dv.chained[id].worst = value_name(g, ni, k);
    }
    if (!kernel_alone || n.outputs.empty()) continue;  // an Update op: nothing to compare
    // The same op fed the reference's inputs, rounded to the types the graph gives them.
    EagerSession a(b);
    a.set_recording(false);
    a.set_deferred_errors(true);
    Refs rin;
    for (Ref r : n.inputs)
      rin.push_back(a.leaf(from_ref(ref[static_cast<size_t>(r.id)], g.type_of(r).dtype, b)));
    Refs ao = a.emit(n.op->name, rin, n.attrs);
    if (a.failed())
      return make_error("node '" + n.label + "' (" + n.op->name + ") alone on " +
                        std::string(b.name()) + ": " + a.error());
    for (size_t k = 0; k < ao.size(); ++k) {
      const size_t id = static_cast<size_t>(n.outputs[k].id);
      const Tensor& t = a.value(ao[k]);
      dv.alone[id] = diff(t.to_f64(), ref[id].v, dtype_is_float(t.dtype()));
      dv.alone[id].worst = value_name(g, ni, k);
    }
  }
  const std::vector<double> l = s.value(map[static_cast<size_t>(loss.id)]).to_f64();
  dv.loss = l.empty() ? 0 : l[0];
  return dv;
}

Result<void> advance(Trainer& t, Project& project, const TrainConfig& config,
                     const CompareOptions& o) {
  if (o.start)
    return make_error("compare-devices: advance starts from the initialisation, not a checkpoint");
  // The run itself, stopped after `advance` steps (its schedule still spans its epochs).
  TrainConfig c = config;
  c.max_steps = o.advance;
  Trainer run(t.backend(), project.builder(), c);
  auto r = run.fit({.train = *project.train});
  if (!r) return make_error(project.path + ": " + r.error().message);
  if (run.steps_done() != o.advance)
    return make_error("compare-devices: the run took " + std::to_string(run.steps_done()) +
                      " steps, not " + std::to_string(o.advance));
  auto st = run.state();
  if (!st) return st.error();
  return t.restore(*st);
}

bool known_device(const std::string& name) {
  return name == "cpu" || name == "vulkan" || name == "cuda";
}

}  // namespace

void DiffStats::merge(const DiffStats& o) {
  if (o.max_rel > max_rel || (worst.empty() && !o.worst.empty())) worst = o.worst;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  max_ulps = std::max(max_ulps, o.max_ulps);
  elements += o.elements;
  finite = finite && o.finite;
}

double diff_value(const DiffStats& s, DiffMetric m) {
  switch (m) {
    case DiffMetric::Abs:
      return s.max_abs;
    case DiffMetric::Rel:
      return s.max_rel;
    case DiffMetric::Ulps:
      return s.max_ulps;
  }
  return s.max_rel;
}

const NodeDiff* find_node(const DeviceCompare& d, const std::string& label, StepPhase phase) {
  for (const NodeDiff& n : d.nodes)
    if (n.label == label && n.phase == phase) return &n;
  return nullptr;
}

Result<CompareReport> compare_devices(Project& project, const CompareOptions& o) {
  // The devices first: a name that is none is an error before any work.
  for (const std::string& d : o.devices) {
    auto pd = parse_device(d);
    if (!pd) return make_error("compare-devices: " + pd.error().message);
    if (!known_device(pd->first))
      return make_error("compare-devices: unknown device '" + d + "' (cpu, vulkan or cuda)");
  }
  if (o.devices.empty()) return make_error("compare-devices: no device to compare");
  if (!project.train) return make_error(project.path + ": the project has no training data");
  auto host = backend_registry().open("cpu");
  if (!host) return host.error();
  Backend& cpu = **host;

  TrainConfig config = project.train_config();
  if (o.batch_size > 0) config.batch_size = o.batch_size;
  // The weights: the run's initialisation, then the checkpoint's.
  Trainer t(cpu, project.builder(), config);
  if (auto r = t.init(); !r) return make_error(project.path + ": " + r.error().message);
  CompareReport rep;
  rep.project = project.path;
  rep.start = "the project's initialisation (seed " + std::to_string(config.seed) + ")";
  if (o.start) {
    if (auto r = t.restore(*o.start); !r)
      return make_error(o.start_name + ": " + r.error().message);
    rep.start = "checkpoint " + o.start_name + " (step " + std::to_string(t.steps_done()) + ")";
  }
  if (o.advance > 0) {
    if (auto r = advance(t, project, config, o); !r) return r.error();
    rep.start += ", then " + std::to_string(o.advance) + " steps on the CPU";
  }
  rep.step = t.steps_done();

  // The batch, in the run's order.
  BatchSource& src = *project.train;
  const int64_t bs = config.batch_size, n = src.num_samples();
  const int64_t per_epoch = std::max<int64_t>((n + bs - 1) / bs, 1);
  rep.batch = o.batch >= 0 ? o.batch : rep.step;
  src.start_epoch(rep.batch / per_epoch);
  HostBatch hb;
  for (int64_t i = 0; i <= rep.batch % per_epoch; ++i)
    if (!src.next(bs, hb))
      return make_error(project.path + ": the training split has no batch " +
                        std::to_string(rep.batch));
  rep.batch_size = hb.size;

  // The step graph: the model at this batch size with its backward, no passes.
  auto mg = project.builder()(hb.size, true);
  if (!mg) return make_error(project.path + ": " + mg.error().message);
  Step st;
  Graph& g = mg->graph;
  st.graph = &g;
  st.forward_nodes = g.nodes().size();
  Refs wrt;
  std::vector<size_t> trainable;
  for (size_t i = 0; i < g.params().size(); ++i)
    if (g.value(g.params()[i]).trainable) {
      wrt.push_back(g.params()[i]);
      trainable.push_back(i);
    }
  auto grads = append_backward(g, mg->loss, wrt);
  if (!grads) return make_error(project.path + ": " + grads.error().message);
  Refs outs{mg->loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  st.leaves.assign(g.values().size(), Tensor{});
  for (size_t i = 0; i < g.params().size(); ++i)
    st.leaves[static_cast<size_t>(g.params()[i].id)] = t.params()[i];
  const ValueType xt = g.type_of(mg->input), yt = g.type_of(mg->labels);
  Tensor x = Tensor::empty(cpu, xt.dtype, xt.shape, AllocTag::Input);
  x.fill_raw(hb.x.data(), x.nbytes());
  st.leaves[static_cast<size_t>(mg->input.id)] = x;
  Tensor y = Tensor::empty(cpu, yt.dtype, yt.shape, AllocTag::Input);
  if (yt.dtype == DType::I64)
    y.fill_raw(hb.y.data(), y.nbytes());
  else
    y.fill_raw(hb.t.data(), y.nbytes());
  st.leaves[static_cast<size_t>(mg->labels.id)] = y;
  if (mg->step_seed.valid()) {  // as Trainer::step_seed
    st.leaves[static_cast<size_t>(mg->step_seed.id)] =
        Tensor::from_i64(cpu, {1}, {training_step_seed(config.seed, rep.step)}, AllocTag::Input);
  }
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].kind == ValueKind::Const) st.leaves[i] = g.values()[i].constant;

  // The float64 reference, node by node, each fed the reference's own values.
  std::vector<RefArray> ref(g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i)
    if (st.leaves[i].defined()) ref[i] = to_ref(st.leaves[i]);
  for (const Node& nd : g.nodes()) {
    std::vector<RefArray> ins;
    for (Ref r : nd.inputs) ins.push_back(ref[static_cast<size_t>(r.id)]);
    std::vector<RefArray> res = nd.op->reference(ins, nd.attrs);
    if (nd.op->kind == OpKind::Update) {
      // It writes its inputs (BatchNorm's running statistics): so does the reference.
      for (size_t k = 0; k < res.size() && k < nd.op->mutated_inputs.size(); ++k)
        ref[static_cast<size_t>(nd.inputs[static_cast<size_t>(nd.op->mutated_inputs[k])].id)] =
            std::move(res[k]);
      continue;
    }
    if (res.size() != nd.outputs.size())
      return make_error("node '" + nd.label + "' (" + nd.op->name +
                        "): its float64 reference gave " + std::to_string(res.size()) +
                        " outputs, not " + std::to_string(nd.outputs.size()));
    for (size_t k = 0; k < res.size(); ++k)
      ref[static_cast<size_t>(nd.outputs[k].id)] = std::move(res[k]);
  }
  rep.reference_loss = ref[static_cast<size_t>(mg->loss.id)].v.at(0);

  // Rows: document nodes by (label, phase) in order of first execution; the backward's
  // unlabelled seed joins the row after it, as in the step-through view.
  std::map<std::string, std::string> types;
  for (const nodes::NodeDoc& d : project.doc.nodes) types[d.id] = d.type;
  std::vector<int> row_of(g.nodes().size(), -1);
  std::vector<NodeDiff> rows;
  std::map<std::pair<std::string, bool>, int> index;
  std::vector<size_t> pending;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& nd = g.nodes()[i];
    if (nd.label.empty()) {
      pending.push_back(i);
      continue;
    }
    const bool bw = i >= st.forward_nodes;
    auto [it, fresh] = index.emplace(std::make_pair(nd.label, bw), static_cast<int>(rows.size()));
    if (fresh) {
      NodeDiff r;
      r.order = static_cast<int>(rows.size());
      r.label = nd.label;
      auto ty = types.find(nd.label);
      if (ty != types.end()) r.type = ty->second;
      r.phase = bw ? StepPhase::Backward : StepPhase::Forward;
      rows.push_back(std::move(r));
    }
    pending.push_back(i);
    for (size_t p : pending) {
      row_of[p] = it->second;
      rows[static_cast<size_t>(it->second)].ops.push_back(g.nodes()[p].op->name);
    }
    pending.clear();
  }
  if (!pending.empty()) {
    NodeDiff r;
    r.order = static_cast<int>(rows.size());
    r.label = "(seed)";
    r.phase = StepPhase::Backward;
    for (size_t p : pending) {
      row_of[p] = r.order;
      r.ops.push_back(g.nodes()[p].op->name);
    }
    rows.push_back(std::move(r));
  }
  // Collapse repeated ops in a row's list ("matmul, add" rather than one entry per node).
  for (NodeDiff& r : rows) {
    std::vector<std::string> u;
    for (const std::string& op : r.ops)
      if (std::find(u.begin(), u.end(), op) == u.end()) u.push_back(op);
    r.ops = std::move(u);
  }
  const std::vector<std::string>& names = t.param_names();

  for (const std::string& dname : o.devices) {
    DeviceCompare dc;
    dc.device = dname;
    auto b = backend_registry().open(dname);
    if (!b) {
      dc.status = b.error().message;
      rep.devices.push_back(std::move(dc));
      continue;
    }
    Backend& be = **b;
    auto dv = run_on(st, ref, be, o.kernel_alone, mg->loss);
    if (!dv) return make_error(project.path + ": " + dv.error().message);
    dc.ran = true;
    dc.status = std::string(be.name());
    dc.loss = dv->loss;
    dc.nodes = rows;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& nd = g.nodes()[i];
      NodeDiff& r = dc.nodes[static_cast<size_t>(row_of[i])];
      for (Ref out : nd.outputs) {
        r.chained.merge(dv->chained[static_cast<size_t>(out.id)]);
        if (o.kernel_alone) r.alone.merge(dv->alone[static_cast<size_t>(out.id)]);
      }
      if (be.kind() != DeviceKind::CPU && !nd.op->view) {
        std::vector<ValueType> in, ot;
        for (Ref x2 : nd.inputs) in.push_back(g.type_of(x2));
        for (Ref x2 : nd.outputs) ot.push_back(g.type_of(x2));
        const DType kt = kernel_dtype(*nd.op, in, ot);
        const std::string h = nd.op->name + " at " + std::string(dtype_name(kt));
        if (nd.op->kernel(be.kind(), kt) == nullptr &&
            std::find(r.host_ops.begin(), r.host_ops.end(), h) == r.host_ops.end())
          r.host_ops.push_back(h);
      }
    }
    for (size_t k = 0; k < trainable.size(); ++k) {
      const size_t id = static_cast<size_t>((*grads)[k].id);
      ParamGradDiff pg;
      pg.param = trainable[k] < names.size() ? names[trainable[k]] : "param" + std::to_string(k);
      const Value& v = g.value((*grads)[k]);
      if (v.kind == ValueKind::Node) pg.node = g.nodes()[static_cast<size_t>(v.node)].label;
      pg.chained = dv->chained[id];
      pg.alone = dv->alone[id];
      dc.params.push_back(std::move(pg));
    }
    rep.devices.push_back(std::move(dc));
  }
  return rep;
}

namespace {

std::string fmt(double v) {
  if (std::isinf(v)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", v);
  return b;
}

std::string fmt_ulps(double v) {
  if (std::isinf(v)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, v < 1e6 ? "%.0f" : "%.2e", v);
  return b;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string padl(std::string s, size_t w) {
  if (s.size() < w) s.insert(0, w - s.size(), ' ');
  return s;
}

const char* metric_name(DiffMetric m) {
  return m == DiffMetric::Abs ? "abs" : m == DiffMetric::Rel ? "rel" : "ulps";
}

nlohmann::json stats_json(const DiffStats& s) {
  auto num = [](double v) { return std::isinf(v) ? nlohmann::json("inf") : nlohmann::json(v); };
  return {{"max_abs", num(s.max_abs)}, {"max_rel", num(s.max_rel)}, {"max_ulps", num(s.max_ulps)},
          {"elements", s.elements},    {"finite", s.finite},        {"worst", s.worst}};
}

}  // namespace

std::string format_compare_table(const CompareReport& r, const TableOptions& t) {
  std::string s;
  s += r.project + ": one training step, batch " + std::to_string(r.batch) + " (" +
       std::to_string(r.batch_size) + " samples), from " + r.start + "\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "float64 reference loss %.9g\n", r.reference_loss);
  s += buf;
  s += "chained: the device fed its own values (what a run sees); alone: each op fed the "
       "reference's inputs rounded to f32 (the kernel's own error). rel = max |diff| / max "
       "|reference| of the tensor; ulps: f32 ulps from the reference rounded to f32.\n";
  for (const DeviceCompare& d : r.devices) {
    s += "\n== " + d.device + ": ";
    if (!d.ran) {
      s += "not compared: " + d.status + "\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "%s, loss %.9g (reference %+.2e)\n", d.status.c_str(), d.loss,
                  d.loss - r.reference_loss);
    s += buf;
    s += "  #  phase     node         ops                      | chained abs   rel       ulps | "
         "alone abs     rel       ulps\n";
    auto over = [&](const DiffStats& x) {
      return t.threshold > 0 && diff_value(x, t.metric) > t.threshold;
    };
    for (const NodeDiff& n : d.nodes) {
      std::string ops = join(n.ops);
      if (ops.size() > 24) ops = ops.substr(0, 21) + "...";
      s += padl(std::to_string(n.order), 3) + "  " + pad(std::string(step_phase_name(n.phase)), 9) +
           " " + pad(n.label, 12) + " " + pad(ops, 24) + " | " + pad(fmt(n.chained.max_abs), 9) +
           " " + pad(fmt(n.chained.max_rel), 9) + " " + padl(fmt_ulps(n.chained.max_ulps), 6) +
           " | " + pad(fmt(n.alone.max_abs), 9) + " " + pad(fmt(n.alone.max_rel), 9) + " " +
           padl(fmt_ulps(n.alone.max_ulps), 6);
      if (over(n.chained) || over(n.alone)) s += "  !";
      if (!n.host_ops.empty()) s += "  (on the host: " + join(n.host_ops) + ")";
      s += "\n";
    }
    s += "  parameter gradients:\n";
    for (const ParamGradDiff& p : d.params)
      s += "     " + pad(p.param, 24) + " | chained " + fmt(p.chained.max_abs) + " rel " +
           fmt(p.chained.max_rel) + " ulps " + fmt_ulps(p.chained.max_ulps) + " | alone " +
           fmt(p.alone.max_abs) + " rel " + fmt(p.alone.max_rel) + " ulps " +
           fmt_ulps(p.alone.max_ulps) + "\n";
    // The largest differences, by the table's metric.
    for (int which = 0; which < 2; ++which) {
      std::vector<const NodeDiff*> v;
      for (const NodeDiff& n : d.nodes) v.push_back(&n);
      auto key = [&](const NodeDiff* n) {
        return diff_value(which == 0 ? n->chained : n->alone, t.metric);
      };
      std::stable_sort(v.begin(), v.end(),
                       [&](const NodeDiff* a, const NodeDiff* b) { return key(a) > key(b); });
      s += std::string("  largest ") + (which == 0 ? "chained" : "alone (kernel)") + " (" +
           metric_name(t.metric) + "):";
      for (size_t i = 0; i < v.size() && static_cast<int>(i) < t.summary; ++i)
        s += std::string(i ? ", " : " ") + v[i]->label + " " +
             std::string(step_phase_name(v[i]->phase)) + " " +
             (t.metric == DiffMetric::Ulps ? fmt_ulps(key(v[i])) : fmt(key(v[i])));
      s += "\n";
    }
    if (t.threshold > 0) {
      int n_over = 0;
      for (const NodeDiff& n : d.nodes) n_over += over(n.chained) || over(n.alone);
      s += "  " + std::to_string(n_over) + " of " + std::to_string(d.nodes.size()) +
           " rows over the threshold " + fmt(t.threshold) + " (" + metric_name(t.metric) + ")\n";
    }
  }
  return s;
}

std::string compare_json(const CompareReport& r) {
  nlohmann::json j{
      {"project", r.project}, {"start", r.start},           {"step", r.step},
      {"batch", r.batch},     {"batch_size", r.batch_size}, {"reference_loss", r.reference_loss}};
  nlohmann::json devs = nlohmann::json::array();
  for (const DeviceCompare& d : r.devices) {
    nlohmann::json dj{{"device", d.device}, {"ran", d.ran}, {"status", d.status}};
    if (d.ran) {
      dj["loss"] = d.loss;
      nlohmann::json rows = nlohmann::json::array();
      for (const NodeDiff& n : d.nodes)
        rows.push_back({{"order", n.order},
                        {"node", n.label},
                        {"type", n.type},
                        {"phase", std::string(step_phase_name(n.phase))},
                        {"ops", n.ops},
                        {"chained", stats_json(n.chained)},
                        {"alone", stats_json(n.alone)},
                        {"host_ops", n.host_ops}});
      dj["nodes"] = std::move(rows);
      nlohmann::json ps = nlohmann::json::array();
      for (const ParamGradDiff& p : d.params)
        ps.push_back({{"param", p.param},
                      {"node", p.node},
                      {"chained", stats_json(p.chained)},
                      {"alone", stats_json(p.alone)}});
      dj["params"] = std::move(ps);
    }
    devs.push_back(std::move(dj));
  }
  j["devices"] = std::move(devs);
  return j.dump();
}

}  // namespace mls::runner
