#include "runner/model_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "datasets/npy.h"
#include "datasets/transforms.h"
#include "engine/core/atomic_file.h"
#include "engine/exec/compiled_plan.h"
#include "engine/onnx/onnx_file.h"
#include "engine/onnx/onnx_graph.h"
#include "engine/onnx/quantize.h"
#include "nodes/lower.h"
#include "nodes/onnx_export.h"
#include "nodes/onnx_import.h"
#include "runner/checkpoints.h"

namespace mls::runner {

namespace {

namespace fs = std::filesystem;

// [SECTION] inputs as the file takes them

// The file's input for a batch the dataset prepared: the raw bytes back (images), or the
// values before normalisation. `x` is rewritten to exactly what those raw values give, so the
// engine and the file see the same numbers.
onnx::HostValue raw_input(HostBatch& b, const Shape& sample, const nodes::InputPreprocessing& p) {
  onnx::HostValue v;
  v.shape = {b.size};
  v.shape.insert(v.shape.end(), sample.begin(), sample.end());
  const int64_t per = numel(sample);
  // The channel of element i: axis 0 of an image sample, the feature of a flat one.
  const int64_t channels = sample.size() > 1 ? sample[0] : per;
  const int64_t inner = per / std::max<int64_t>(channels, 1);
  const data::Normalization norm{p.mean, p.stddev};
  auto mean = [&](int64_t i) { return norm.empty() ? 0.0f : norm.mean_of(i % per / inner); };
  auto sd = [&](int64_t i) { return norm.empty() ? 1.0f : norm.std_of(i % per / inner); };
  const auto n = static_cast<int64_t>(b.x.size());
  v.dtype = p.bytes ? DType::U8 : DType::F32;
  v.bytes.resize(static_cast<size_t>(n) * dtype_size(v.dtype));
  for (int64_t i = 0; i < n; ++i) {
    float& x = b.x[static_cast<size_t>(i)];
    float raw = x * sd(i) + mean(i);
    if (p.bytes) {
      const auto byte = static_cast<uint8_t>(std::clamp(std::nearbyint(raw * 255.0f), 0.0f, 255.0f));
      v.bytes[static_cast<size_t>(i)] = byte;
      raw = static_cast<float>(byte) / 255.0f;
    } else {
      std::memcpy(&v.bytes[static_cast<size_t>(i) * sizeof(float)], &raw, sizeof(float));
    }
    x = (raw - mean(i)) / sd(i);
  }
  return v;
}

std::string format_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& b, double* scale) {
  double d = 0, s = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
    s = std::max(s, static_cast<double>(std::abs(b[i])));
  }
  if (a.size() != b.size()) d = INFINITY;
  if (scale) *scale = s;
  return d;
}

// The engine's value of every exported node on batch `b` (its x as the file's input gives it).
Result<std::map<std::string, std::vector<float>>> engine_values(const Project& p, const Trainer& trainer,
                                                                 const HostBatch& b,
                                                                 const std::vector<std::string>& ids,
                                                                 Backend& backend) {
  std::map<std::string, Refs> outs;
  auto mg = nodes::lower(p.doc, p.data, b.size, false, p.path, &outs);
  if (!mg) return mg.error();
  PlanOptions opt;
  for (const std::string& id : ids) opt.outputs.push_back(outs.at(id).at(0));
  auto plan = CompiledPlan::compile(mg->graph, backend, opt);
  if (!plan) return plan.error();
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < trainer.params().size(); ++i) by_name[trainer.param_names()[i]] = &trainer.params()[i];
  for (Ref r : mg->graph.params()) {
    auto it = by_name.find(mg->graph.value(r).name);
    if (it == by_name.end()) return make_error("no trained value for '" + mg->graph.value(r).name + "'");
    if (auto bound = plan->bind(r, *it->second); !bound) return bound.error();
  }
  std::vector<Tensor> keep;
  for (Ref r : mg->graph.inputs()) {
    const ValueType& t = mg->graph.type_of(r);
    keep.push_back(Tensor::zeros(backend, t.dtype, t.shape, AllocTag::Input));
    if (r == mg->input) keep.back().fill_raw(b.x.data(), b.x.size() * sizeof(float));
    if (auto bound = plan->bind(r, keep.back()); !bound) return bound.error();
  }
  plan->run();
  std::map<std::string, std::vector<float>> values;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Tensor& t = plan->tensor(opt.outputs[i]);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend.copy_to_host(*t.buffer(), t.byte_offset(), host.data(), t.nbytes());
    values[ids[i]] = std::move(host);
  }
  return values;
}

// Runs an ONNX model over a data split with the engine: accuracy and each sample's class.
struct OnnxEval {
  double accuracy = 0;
  int64_t samples = 0;
  std::vector<int64_t> predicted;
};

Result<OnnxEval> evaluate_onnx(const onnx::Model& m, BatchSource& data, const Shape& sample,
                               const nodes::InputPreprocessing& pre, Backend& backend) {
  std::map<int64_t, onnx::OnnxGraph> graphs;
  OnnxEval r;
  int64_t right = 0;
  HostBatch b;
  data.start_epoch(0);
  while (data.next(500, b)) {
    auto it = graphs.find(b.size);
    if (it == graphs.end()) {
      auto g = onnx::to_graph(m, b.size);
      if (!g) return g.error();
      it = graphs.emplace(b.size, std::move(*g)).first;
    }
    onnx::HostValue in = raw_input(b, sample, pre);
    auto out = onnx::run(it->second, backend, {{m.inputs[0].name, in}}, {m.outputs[0].name});
    if (!out) return out.error();
    std::vector<float> z = (*out)[0].floats();
    const int64_t classes = static_cast<int64_t>(z.size()) / b.size;
    for (int64_t i = 0; i < b.size; ++i) {
      const float* row = z.data() + i * classes;
      const int64_t k = std::max_element(row, row + classes) - row;
      r.predicted.push_back(k);
      if (static_cast<size_t>(i) < b.y.size() && b.y[static_cast<size_t>(i)] == k) ++right;
    }
    r.samples += b.size;
  }
  r.accuracy = r.samples ? static_cast<double>(right) / static_cast<double>(r.samples) : 0;
  return r;
}

nodes::InputPreprocessing preprocessing_of(const Project& p) {
  nodes::InputPreprocessing pre;
  if (!p.encoder) return pre;
  pre.bytes = !p.encoder->csv() && p.encoder->byte_features();
  pre.mean = p.encoder->normalization().mean;
  pre.stddev = p.encoder->normalization().stddev;
  return pre;
}

std::string describe_input(const Project& p, const nodes::InputPreprocessing& pre) {
  std::string shape = "[N";
  for (int64_t d : p.data.sample_shape) shape += "," + std::to_string(d);
  shape += "]";
  if (pre.bytes) return "uint8 " + shape + ": raw pixel bytes 0-255; the model scales them by 1/255" +
                        std::string(pre.mean.empty() ? "" : " and normalises them (mean, std) itself");
  if (p.encoder && p.encoder->csv()) return "float32 " + shape + ": the CSV features as mlstudio encodes them (categories one-hot)" +
                                              std::string(pre.mean.empty() ? "" : "; the model normalises them itself");
  return "float32 " + shape + std::string(pre.mean.empty() ? "" : ": the model normalises them (mean, std) itself");
}

}  // namespace

// [SECTION] export

Result<ExportReport> export_project(const ExportOptions& o, Backend& backend, const Say& say) {
  if (o.out.empty()) return make_error("give the output file: --onnx OUT.onnx");
  if (o.check_samples < 1) return make_error("--check-samples must be >= 1");
  // Refused before the work (the writes refuse them again): a FIFO or a device at either.
  for (const std::string& target : {o.out, o.save_outputs})
    if (!target.empty())
      if (auto ok = check_replaceable(target); !ok) return ok.error();
  ProjectOptions po = o.project;
  auto project = open_project(po);
  if (!project) return project.error();
  Project& p = *project;
  Trainer trainer(backend, p.builder(), p.train_config());
  ExportReport rep;
  if (o.run_id) {
    auto used = restore_run(trainer, o.db, *o.run_id, o.checkpoint);
    if (!used) return used.error();
    rep.checkpoint = *used;
  } else {
    if (auto r = trainer.init(); !r) return r.error();
    if (auto r = apply_initial_weights(trainer, p); !r) return r.error();
    say(p.doc.weights.empty() ? "no --run given: exporting the initial (untrained) weights"
                              : "no --run given: exporting the weights of " + p.doc.weights);
  }
  std::map<std::string, CheckpointTensor> weights;
  for (size_t i = 0; i < trainer.params().size(); ++i) {
    weights[trainer.param_names()[i]] = snapshot(trainer.param_names()[i], trainer.params()[i]);
    rep.parameters += trainer.params()[i].numel();
  }
  nodes::ExportSpec spec;
  spec.opset = o.opset;
  spec.input = preprocessing_of(p);
  nlohmann::json classes = p.class_names;
  // The dataset as the project file has it: --limit and --test-limit cut this export's check
  // and calibration short, and are no part of the model.
  data::DatasetSpec dataset = p.doc.dataset;
  if (o.project.limit || o.project.test_limit)
    if (auto own = nodes::load_document(p.path, nodes::GraphCheck::Draft))
      dataset = own->dataset;
  spec.metadata = {{"mlstudio.version", o.version},
                   {"mlstudio.project", fs::path(p.path).filename().string()},
                   {"mlstudio.run_id", o.run_id ? std::to_string(*o.run_id) : ""},
                   {"mlstudio.input", describe_input(p, spec.input)},
                   {"mlstudio.classes", classes.dump()},
                   {"mlstudio.dataset", data::dataset_spec_to_json(dataset).dump()},
                   {"mlstudio.training", nodes::training_json(p.doc.training).dump()}};
  auto ex = nodes::export_onnx(p.doc, p.data, weights, spec, p.path);
  if (!ex) return ex.error();
  std::string input_id = ex->order.front();
  ex->model.metadata.emplace_back("mlstudio.model_input", ex->node_values.at(input_id));
  ex->model.producer_version = o.version;
  auto bytes = onnx::serialize(ex->model);
  if (!bytes) return bytes.error();
  rep.f32_bytes = static_cast<int64_t>(bytes->size());

  // The check: the bytes read back as a new model, run by the engine on test samples, and
  // compared node by node with the engine's own values for the same samples.
  auto reread = onnx::parse(*bytes, o.out);
  if (!reread) return reread.error();
  BatchSource* src = p.test ? p.test.get() : (p.validation ? p.validation.get() : p.train.get());
  HostBatch b;
  src->start_epoch(0);
  if (!src->next(o.check_samples, b)) return make_error(p.path + ": no samples to check the export with");
  onnx::HostValue in = raw_input(b, p.data.sample_shape, spec.input);
  auto graph = onnx::to_graph(*reread, b.size);
  if (!graph) return make_error(o.out + ": the engine cannot run the file back: " + graph.error().message);
  std::vector<std::string> names;
  for (const std::string& id : ex->order) names.push_back(ex->node_values.at(id));
  names.push_back(reread->outputs[0].name);
  auto file_values = onnx::run(*graph, backend, {{reread->inputs[0].name, in}}, names);
  if (!file_values) return make_error(o.out + ": " + file_values.error().message);
  auto mine = engine_values(p, trainer, b, ex->order, backend);
  if (!mine) return mine.error();
  rep.checked_samples = b.size;
  for (size_t i = 0; i < ex->order.size(); ++i) {
    NodeCheck c{ex->order[i], names[i]};
    c.max_abs = max_abs((*file_values)[i].floats(), mine->at(ex->order[i]), &c.scale);
    rep.checks.push_back(c);
    if (!(c.max_abs <= o.tolerance * c.scale))
      return make_error(o.out + ": export check failed at node '" + c.node + "': the ONNX value '" + c.value +
                        "' differs from mlstudio's by " + std::to_string(c.max_abs) + " (max abs over " +
                        std::to_string(b.size) + " samples; tolerance " + std::to_string(o.tolerance * c.scale) +
                        "); nothing was written");
  }
  rep.max_abs_diff = rep.checks.back().max_abs;

  onnx::Model final_model = *reread;
  std::string final_bytes = *bytes;
  if (o.int8) {
    // Calibration: the ranges of each quantized layer's input over training batches, as
    // the f32 file computes them.
    auto values = onnx::calibration_values(*reread);
    std::map<std::string, onnx::Range> ranges;
    auto cal = onnx::to_graph(*reread, o.calibration_batch);
    if (!cal) return cal.error();
    p.train->start_epoch(0);
    int64_t batches = 0;
    while (batches < o.calibration_batches && p.train->next(o.calibration_batch, b)) {
      if (b.size != o.calibration_batch) break;
      onnx::HostValue cin = raw_input(b, p.data.sample_shape, spec.input);
      auto v = onnx::run(*cal, backend, {{reread->inputs[0].name, cin}}, values);
      if (!v) return v.error();
      for (size_t i = 0; i < values.size(); ++i) {
        std::vector<float> f = (*v)[i].floats();
        ranges[values[i]].add(f.data(), f.size());
      }
      ++batches;
    }
    if (batches == 0) return make_error(p.path + ": no full training batch to calibrate with");
    say("calibrated " + std::to_string(values.size()) + " activations on " + std::to_string(batches) + " batches of " +
        std::to_string(o.calibration_batch));
    auto q = onnx::quantize_qdq(*reread, ranges);
    if (!q) return q.error();
    auto qbytes = onnx::serialize(*q);
    if (!qbytes) return qbytes.error();
    auto qback = onnx::parse(*qbytes, o.out);
    if (!qback) return qback.error();
    if (p.test) {
      auto a = evaluate_onnx(*reread, *p.test, p.data.sample_shape, spec.input, backend);
      if (!a) return a.error();
      auto c = evaluate_onnx(*qback, *p.test, p.data.sample_shape, spec.input, backend);
      if (!c) return make_error(o.out + ": the engine cannot run the int8 file back: " + c.error().message);
      rep.accuracy_f32 = a->accuracy;
      rep.accuracy_int8 = c->accuracy;
      rep.accuracy_samples = a->samples;
      int64_t same = 0;
      for (size_t i = 0; i < a->predicted.size(); ++i) same += a->predicted[i] == c->predicted[i];
      rep.agreement = a->samples ? static_cast<double>(same) / static_cast<double>(a->samples) : 0;
    }
    final_model = std::move(*qback);
    final_bytes = std::move(*qbytes);
  }
  if (auto w = write_text_atomically(o.out, final_bytes); !w)
    return make_error("cannot write " + o.out + ": " + w.error().message);
  // What is on disk parses and passes the checker.
  auto on_disk = onnx::read_model(o.out);
  if (!on_disk) return on_disk.error();
  rep.path = o.out;
  rep.bytes = static_cast<int64_t>(final_bytes.size());
  rep.onnx_nodes = static_cast<int64_t>(final_model.nodes.size());
  rep.initializers = static_cast<int64_t>(final_model.initializers.size());

  if (!o.save_outputs.empty()) {
    if (!p.test) return make_error(p.path + ": --save-outputs needs a test split");
    std::vector<float> all;
    int64_t rows = 0, cols = 0;
    p.test->start_epoch(0);
    while (p.test->next(500, b)) {
      Shape s;
      auto out = trainer.predict(b, &s);
      if (!out) return out.error();
      cols = s.back();
      rows += b.size;
      all.insert(all.end(), out->begin(), out->end());
    }
    if (auto w = data::write_npy_f32(o.save_outputs, {rows, cols}, all); !w) return w.error();
    rep.outputs_saved = rows;
  }
  return rep;
}

// [SECTION] import

Result<void> apply_initial_weights(Trainer& trainer, const Project& p) {
  if (p.doc.weights.empty()) return {};
  const fs::path file = fs::path(p.path).parent_path() / p.doc.weights;
  auto c = read_checkpoint(file.string());
  if (!c) return c.error();
  for (size_t i = 0; i < trainer.params().size(); ++i) {
    const std::string& name = trainer.param_names()[i];
    const CheckpointTensor* t = c->find("param/" + name);
    if (!t) return make_error(file.string() + ": has no value for parameter '" + name + "'");
    Tensor target = trainer.params()[i];  // shares the parameter's buffer
    if (auto r = restore(*t, target); !r) return make_error(file.string() + ": " + r.error().message);
  }
  return {};
}

namespace {

struct ImportCheck {
  int64_t samples = 0;  // 0: not checked, and `why`
  double max_abs = 0;
  std::string why;
};

// Runs the imported project (its own data, the weights just written) and the ONNX model on
// the same test samples. An ONNX op the engine's reader lacks, or data that cannot be
// read, leaves the import unchecked (said, not an error); a difference is an error.
Result<ImportCheck> check_import(const onnx::Model& model, const nodes::ImportedModel& im,
                                 const std::string& project_file, const ImportOptions& o, Backend& backend) {
  ImportCheck r;
  ProjectOptions po;
  po.path = project_file;
  po.limit = o.check_samples;
  po.test_limit = o.check_samples;
  po.load_data = false;
  auto project = open_project(po);
  if (!project) return r.why = project.error().message, r;
  Project& p = *project;
  Trainer trainer(backend, p.builder(), p.train_config());
  if (auto i = trainer.init(); !i) return i.error();
  if (auto w = apply_initial_weights(trainer, p); !w) return w.error();
  BatchSource* data = p.test ? p.test.get() : p.train.get();
  HostBatch b;
  data->start_epoch(0);
  if (!data->next(o.check_samples, b)) return r.why = "the dataset gave no samples", r;
  auto g = onnx::to_graph(model, b.size);
  if (!g) return r.why = g.error().message, r;
  // An mlstudio export takes raw samples and preprocesses them itself; another tool's model
  // takes what the project's model takes.
  onnx::HostValue in;
  if (!model.metadata_value("mlstudio.model_input").empty()) {
    in = raw_input(b, p.data.sample_shape, preprocessing_of(p));
  } else {
    in.dtype = DType::F32;
    in.shape = {b.size};
    in.shape.insert(in.shape.end(), p.data.sample_shape.begin(), p.data.sample_shape.end());
    in.bytes.resize(b.x.size() * sizeof(float));
    std::memcpy(in.bytes.data(), b.x.data(), in.bytes.size());
  }
  auto theirs = onnx::run(*g, backend, {{model.inputs[0].name, in}}, {im.output_value});
  if (!theirs) return r.why = theirs.error().message, r;
  auto ours = trainer.predict(b);
  if (!ours) return ours.error();
  double scale = 1;
  r.max_abs = max_abs(*ours, (*theirs)[0].floats(), &scale);
  if (!(r.max_abs <= o.tolerance * scale))
    return make_error(o.model + ": the imported project does not compute what the ONNX model does: its output '" +
                      im.output_value + "' differs by " + format_g(r.max_abs) + " on " + std::to_string(b.size) +
                      " test samples (nothing was written)");
  r.samples = b.size;
  return r;
}

// Whether two paths name one file (after every symlink): stat's device and inode.
bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

bool is_within(const fs::path& p, const fs::path& root) {
  auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  return r == root.end() || (std::next(r) == root.end() && r->empty());  // "root/" ends in ""
}

// A dataset an ONNX file's metadata names is a stranger's word: it may only lead (after every
// symlink and "..") into the model's own folder or the datasets folder, or importing would
// read, and echo in messages, any file the user can read. Relative paths are the model
// folder's; the spec gets the resolved absolute paths, so the project reads what was checked
// wherever it is written.
Result<void> confine_metadata_paths(data::DatasetSpec& spec, const std::string& model) {
  std::error_code ec;
  const fs::path model_dir = fs::weakly_canonical(fs::absolute(model).parent_path(), ec);
  const fs::path datasets =
      fs::weakly_canonical(fs::path(data::kDefaultDatasetPath).parent_path(), ec);
  for (std::string* path : {&spec.path, &spec.npy.labels}) {
    if (path->empty()) continue;
    fs::path p(*path);
    if (p.is_relative()) p = model_dir / p;
    const fs::path resolved = fs::weakly_canonical(p, ec);
    // A link left unresolved (its target missing) could be pointed anywhere later.
    if (ec || fs::is_symlink(fs::symlink_status(resolved, ec)) ||
        !(is_within(resolved, model_dir) || is_within(resolved, datasets)))
      return make_error(model + ": metadata 'mlstudio.dataset' names '" + *path +
                        "', which is outside the model's folder (" + model_dir.string() + ") and " +
                        datasets.string() + "; give the data with --dataset SOURCE:PATH");
    *path = resolved.string();
  }
  return {};
}

}  // namespace

Result<ImportReport> import_model(const ImportOptions& o, Backend& backend, const Say& say) {
  if (o.out.empty()) return make_error("give the project to write: -o OUT.mls");
  // The project, its weights and their temporaries are written next to each other: none of
  // them may be the model being read, whatever path or link names it (--force or not).
  const fs::path out(o.out);
  fs::path weights_file = out;
  weights_file.replace_extension(".weights");
  const fs::path dir = out.parent_path();
  const fs::path tmp_weights = dir / ("." + weights_file.filename().string() + ".importing");
  const fs::path tmp_project = dir / ("." + out.filename().string() + ".importing");
  for (const fs::path& written : {out, weights_file, tmp_weights, tmp_project})
    if (same_file(written, o.model))
      return make_error("refusing to write " + written.string() +
                        ": it is the model being imported (" + o.model + "); choose another -o");
  if (!o.force && fs::exists(o.out))
    return make_error(o.out + " exists; choose another name or pass --force to replace it");
  auto model = onnx::read_model(o.model);
  if (!model) return model.error();
  auto im = nodes::import_onnx(*model, o.model);
  if (!im) return im.error();
  // "fashion-mnist" or "SOURCE:PATH" as the dataset spec's JSON.
  auto spec_of = [](const std::string& text) {
    const size_t colon = text.find(':');
    nlohmann::json d = {{"source", text.substr(0, colon)}};
    if (colon != std::string::npos)
      d["path"] = text.substr(colon + 1);
    else if (text == "fashion-mnist")
      d["path"] = data::kDefaultDatasetPath;
    return d;
  };
  nlohmann::json dataset;
  if (!o.dataset.empty()) {
    dataset = spec_of(o.dataset);
  } else if (std::string d = model->metadata_value("mlstudio.dataset"); !d.empty()) {
    dataset = nlohmann::json::parse(d, nullptr, false);
  } else if (!o.fallback_dataset.empty()) {
    dataset = spec_of(o.fallback_dataset);
    im->notes.push_back("the file does not say what data it was trained on: the project reads " +
                        o.fallback_dataset + "; change the dataset if that is not the model's");
  }
  auto spec = data::parse_dataset_spec(dataset, o.model + ": dataset");
  if (!spec) return spec.error();
  if (o.dataset.empty() && !model->metadata_value("mlstudio.dataset").empty())
    if (auto c = confine_metadata_paths(*spec, o.model); !c) return c.error();
  im->doc.dataset = *spec;

  // Written under hidden names first and checked; only a model that passed replaces an
  // existing project (--force), so a failed import loses nothing.
  auto drop_tmp = [&] {
    std::error_code ec;
    fs::remove(tmp_weights, ec);
    fs::remove(tmp_project, ec);
  };
  // Both targets are checked before anything is written: a project replaced and then its
  // weights refused would leave a project without its weights.
  for (const fs::path& target : {out, weights_file})
    if (auto ok = check_replaceable(target.string()); !ok) return ok.error();
  Checkpoint c;
  c.strings["source"] = fs::path(o.model).filename().string();
  ImportReport rep;
  for (CheckpointTensor& t : im->weights) {
    rep.parameters += numel(t.shape);
    t.name = "param/" + t.name;
    c.tensors.push_back(std::move(t));
  }
  im->doc.weights = tmp_weights.filename().string();
  if (auto w = write_checkpoint(c, tmp_weights.string()); !w) return drop_tmp(), w.error();
  if (auto s = nodes::save_document(im->doc, tmp_project.string()); !s) return drop_tmp(), s.error();
  // The project, run by the engine, against the ONNX model itself: a mapping that computes
  // something else is an error.
  auto checked = check_import(*model, *im, tmp_project.string(), o, backend);
  if (!checked) return drop_tmp(), checked.error();
  im->doc.weights = weights_file.filename().string();
  if (auto s = nodes::save_document(im->doc, o.out); !s) return drop_tmp(), s.error();
  if (auto w = replace_file(tmp_weights.string(), weights_file.string()); !w)
    return drop_tmp(), make_error("cannot write " + weights_file.string() + ": " + w.error().message);
  std::error_code ec;
  fs::remove(tmp_project, ec);
  rep.project = o.out;
  rep.weights = weights_file.string();
  rep.nodes = static_cast<int64_t>(im->doc.nodes.size());
  if (checked->samples > 0) {
    rep.checked_samples = checked->samples;
    rep.max_abs_diff = checked->max_abs;
    say("checked: the project and the ONNX model agree on " + std::to_string(checked->samples) +
        " test samples (max |difference| " + format_g(checked->max_abs) + ")");
  } else {
    im->notes.push_back("not checked against the ONNX model: " + checked->why);
  }
  for (const std::string& n : im->notes) say("note: " + n);
  rep.notes = im->notes;
  return rep;
}

}  // namespace mls::runner
