#include "app/project.h"

#include "nodes/lower.h"

namespace mls::app {

ModelBuilder Project::builder() const {
  // The builder outlives this call: it keeps its own copies.
  return [doc = doc, shape = sample_shape, classes = num_classes, path = path](int64_t batch) {
    return nodes::lower(doc, shape, classes, batch, path);
  };
}

TrainConfig Project::train_config() const {
  const nodes::TrainingSpec& t = doc.training;
  TrainConfig c;
  c.epochs = t.epochs;
  c.batch_size = t.batch_size;
  c.seed = t.seed;
  c.mode = t.mode == nodes::ExecMode::Eager ? ExecMode::Eager : ExecMode::Static;
  const nodes::OptimizerSpec& o = t.optimizer;
  c.opt.type = o.type == nodes::OptimizerType::Adam ? "adam" : "sgd";
  c.opt.lr = o.lr;
  c.opt.momentum = o.momentum;
  c.opt.nesterov = o.nesterov;
  c.opt.weight_decay = o.weight_decay;
  c.opt.beta1 = o.beta1;
  c.opt.beta2 = o.beta2;
  c.opt.eps = o.eps;
  return c;
}

Result<Project> open_project(const ProjectOptions& o) {
  auto doc = nodes::load_document(o.path);
  if (!doc) return doc.error();
  Project p;
  p.path = o.path;
  p.doc = std::move(*doc);
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
    t.mode = *o.mode == "eager" ? nodes::ExecMode::Eager : nodes::ExecMode::Static;
  }
  if (o.limit) {
    if (*o.limit < 0) return make_error("--limit must be >= 0 (0: every sample)");
    p.doc.dataset.limit = *o.limit;
  }
  if (o.test_limit) {
    if (*o.test_limit < 0) return make_error("--test-limit must be >= 0 (0: every sample)");
    p.doc.dataset.test_limit = *o.test_limit;
  }
  if (t.device != "cpu")
    return make_error(p.path + ": device '" + t.device +
                      "' is not available in this build: the CPU backend is the only one so far "
                      "(use --device cpu)");
  // Fashion-MNIST and MNIST share the IDX layout: 1x28x28 images, 10 classes.
  p.sample_shape = {1, 28, 28};
  p.num_classes = 10;
  if (!o.load_data) return p;
  const nodes::DatasetSpec& d = p.doc.dataset;
  data::ImageSourceOptions train_o;
  train_o.shuffle = true;
  train_o.seed = t.seed;
  train_o.mean = data::kFashionMnistMean;
  train_o.stddev = data::kFashionMnistStd;
  train_o.limit = d.limit;
  auto train = data::open_fashion_mnist(d.path, "train", train_o);
  if (!train) return make_error(p.path + ": dataset: " + train.error().message);
  data::ImageSourceOptions test_o = train_o;
  test_o.shuffle = false;
  test_o.limit = d.test_limit;
  auto test = data::open_fashion_mnist(d.path, "t10k", test_o);
  if (!test) return make_error(p.path + ": dataset: " + test.error().message);
  p.train = std::move(*train);
  p.test = std::move(*test);
  p.sample_shape = p.train->sample_shape();
  p.num_classes = p.train->num_classes();
  return p;
}

}  // namespace mls::app
