#include "runner/project.h"

#include <filesystem>

#include "engine/core/backend_registry.h"
#include "nodes/lower.h"
#include "nodes/setting_path.h"

namespace mls::runner {

ModelBuilder Project::builder() const {
  // The builder outlives this call: it keeps its own copies.
  return [doc = doc, data = data, path = path](int64_t batch, bool training) {
    return nodes::lower(doc, data, batch, training, path);
  };
}

Result<Project> open_project(const ProjectOptions& o) {
  Project p;
  p.file = o.path;
  p.path = o.path.empty() ? "untitled" : o.path;
  if (o.document) {
    // What the editor shows may be a draft: the graph rules a saved file is held to.
    if (auto r = nodes::check_graph(*o.document, p.path); !r) return r.error();
    p.doc = *o.document;
  } else {
    auto doc = nodes::load_document(o.path);
    if (!doc) return doc.error();
    p.doc = std::move(*doc);
  }
  for (const std::string& set : o.sets)
    if (auto r = nodes::apply_setting(p.doc, set); !r) return make_error(p.path + ": " + r.error().message);
  nodes::TrainingSpec& t = p.doc.training;
  if (o.epochs) {
    if (*o.epochs < 1) return make_error("--epochs must be >= 1");
    t.epochs = *o.epochs;
  }
  if (o.batch_size) {
    if (*o.batch_size < 1) return make_error("--batch-size must be >= 1");
    t.batch_size = *o.batch_size;
  }
  if (o.lr) {
    if (*o.lr <= 0) return make_error("--lr must be > 0");
    t.optimizer.lr = *o.lr;
  }
  if (o.seed) t.seed = *o.seed;
  if (o.device) t.device = *o.device;
  if (o.mode) {
    if (*o.mode != "static" && *o.mode != "eager")
      return make_error("--mode must be static or eager, got '" + *o.mode + "'");
    t.mode = *o.mode == "eager" ? ExecMode::Eager : ExecMode::Static;
  }
  if (o.precision) {
    auto prec = parse_precision(*o.precision);
    if (!prec) return make_error("--precision must be f32, bf16 or f16, got '" + *o.precision + "'");
    t.precision = *prec;
  }
  if (o.activation_checkpointing) {
    auto ac = nodes::parse_activation_checkpointing(*o.activation_checkpointing);
    if (!ac) return make_error("--activation-checkpointing: " + ac.error().message);
    t.activation_checkpointing = *ac;
  }
  if (o.limit) {
    if (*o.limit < 0) return make_error("--limit must be >= 0 (0: every sample)");
    p.doc.dataset.limit = *o.limit;
  }
  if (o.test_limit) {
    if (*o.test_limit < 0) return make_error("--test-limit must be >= 0 (0: every sample)");
    p.doc.dataset.test_limit = *o.test_limit;
  }
  if (auto d = backend_registry().check(t.device); !d) return make_error(p.path + ": " + d.error().message);
  // Relative data paths are the project file's business, not the working directory's.
  const std::string base = p.file.empty() ? std::filesystem::current_path().string()
                                          : std::filesystem::absolute(p.file).parent_path().string();
  auto splits = data::open_dataset(p.doc.dataset, base, t.seed, /*prefetch=*/o.load_data);
  if (!splits) return make_error(p.path + ": dataset: " + splits.error().message);
  p.train = std::move(splits->train);
  p.validation = std::move(splits->validation);
  p.test = std::move(splits->test);
  p.encoder = std::move(splits->encoder);
  p.class_names = std::move(splits->class_names);
  p.data = nodes::InferContext{splits->sample_shape, splits->num_classes,
                               splits->target_kind == TargetKind::Values ? splits->target_shape : Shape{}};
  return p;
}

Result<Backend*> open_backend(const Project& p) {
  auto b = backend_registry().open(p.doc.training.device);
  if (!b) return make_error(p.path + ": " + b.error().message);
  return b;
}

}  // namespace mls::runner
