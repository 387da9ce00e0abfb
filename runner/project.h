// A project opened for a command: the document with the command line's overrides applied,
// its data splits, and the model builder that lowers it for any batch size and mode.
//
//   ProjectOptions o;  o.path = "resources/examples/fashion-mnist-mlp.mls";  o.epochs = 1;
//   Result<Project> p = open_project(o);
//   Trainer t(backend, p->builder(), p->train_config());
//   t.fit({.train = *p->train, .validation = p->validation.get(), .test = p->test.get()});
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datasets/dataset_spec.h"
#include "engine/train/trainer.h"
#include "nodes/document.h"

namespace mls::runner {

struct ProjectOptions {
  // The project file; with `document`, only its name and the folder its relative data
  // paths are read from ("": an untitled project, its data relative to the working folder).
  std::string path;
  // The document held in memory (the editor's, unsaved edits included): trained as it is,
  // the file is not read.
  std::shared_ptr<const nodes::Document> document;
  std::optional<int64_t> epochs, batch_size, limit, test_limit;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  std::optional<std::string> device, mode;
  std::optional<std::string> precision;  // "f32", "bf16" or "f16"
  std::optional<std::string> activation_checkpointing;  // "off", "auto" or a byte budget
  bool load_data = true;  // false: describe the data without the training split in memory
  // KEY=VALUE settings (nodes/setting_path.h: `--set lr=0.01 --set fc1.out_features=64`),
  // applied in order before the flags above.
  std::vector<std::string> sets;
};

struct Project {
  std::string path;  // the file, or "untitled"
  std::string file;  // the file ("" for an untitled document)
  nodes::Document doc;
  std::unique_ptr<BatchSource> train, validation, test;  // validation and test may be null
  std::shared_ptr<const data::InputEncoder> encoder;     // prepares files for `predict`
  nodes::InferContext data;                              // sample shape, classes, targets
  std::vector<std::string> class_names;
  ModelBuilder builder() const;
  // The training section's settings, and the nodes the project places on the host.
  TrainConfig train_config() const {
    TrainConfig c = nodes::train_config(doc.training);
    for (const nodes::NodeDoc& n : doc.nodes)
      if (n.device == "cpu") c.host_nodes.push_back(n.id);
    return c;
  }
};

Result<Project> open_project(const ProjectOptions& o);

// The project's device (its training "device", or --device) from backend_registry(); errors
// name the project file.
Result<Backend*> open_backend(const Project& p);

}  // namespace mls::runner
