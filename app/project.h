// A project opened for a command: the document with the command line's overrides applied,
// its datasets, and the model builder that lowers it for any batch size.
//
//   ProjectOptions o;  o.path = "resources/examples/fashion-mnist-mlp.mls";  o.epochs = 1;
//   Result<Project> p = open_project(o);
//   Trainer t(backend, p->builder(), p->train_config());
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datasets/image_classification.h"
#include "engine/train/trainer.h"
#include "nodes/document.h"

namespace mls::app {

struct ProjectOptions {
  std::string path;
  std::optional<int64_t> epochs, batch_size, limit, test_limit;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  std::optional<std::string> device, mode;
  bool load_data = true;  // `graph` needs only the sample shape
};

struct Project {
  std::string path;
  nodes::Document doc;
  std::unique_ptr<data::ImageClassificationSource> train, test;
  Shape sample_shape;
  int64_t num_classes = 0;
  ModelBuilder builder() const;
  TrainConfig train_config() const;
};

Result<Project> open_project(const ProjectOptions& o);

}  // namespace mls::app
