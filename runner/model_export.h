// `mlstudio export` and `mlstudio import`: a project's trained model to an ONNX file that
// is checked before the command says it is done, and an ONNX file to a project.
//
//   ExportOptions o;  o.project.path = "mlp.mls";  o.out = "mlp.onnx";  o.run_id = 3;
//   Result<ExportReport> r = export_project(o, cpu::backend(), say);
//   r->max_abs_diff;          // ONNX (re-read, run by the engine) vs the engine, worst node
//   ImportOptions i;  i.model = "mlp.onnx";  i.out = "imported.mls";
//   Result<ImportReport> p = import_model(i, cpu::backend(), say);  // imported.mls + .weights
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "runner/project.h"

namespace mls::runner {

using Say = std::function<void(const std::string&)>;

struct ExportOptions {
  ProjectOptions project;
  std::string out;
  std::optional<int64_t> run_id;  // none: the project's initial weights
  std::string db = "mlstudio-runs.db";
  std::string checkpoint = "auto";
  int64_t opset = 17;
  int64_t check_samples = 256;  // test samples the written file is re-run on
  double tolerance = 1e-4;      // max abs difference per node, relative to max(1, |value|)
  bool int8 = false;
  int64_t calibration_batches = 8;
  int64_t calibration_batch = 64;
  std::string save_outputs;  // an NPY file for the engine's outputs on the test split
  std::string version;       // mlstudio's, for the metadata
};

struct NodeCheck {
  std::string node, value;
  double max_abs = 0, scale = 1;  // scale: max(1, max |engine value|)
};

struct ExportReport {
  std::string path, checkpoint;
  int64_t bytes = 0, onnx_nodes = 0, initializers = 0, parameters = 0;
  int64_t checked_samples = 0;
  double max_abs_diff = 0;  // of the output
  std::vector<NodeCheck> checks;
  // With int8: the f32 model's size, both models' accuracy on the test split (as the
  // engine runs the files) and how often they agree.
  int64_t f32_bytes = 0, accuracy_samples = 0;
  double accuracy_f32 = -1, accuracy_int8 = -1, agreement = -1;
  int64_t outputs_saved = 0;
};

Result<ExportReport> export_project(const ExportOptions& o, Backend& backend, const Say& say);

struct ImportOptions {
  std::string model, out;
  std::string dataset;  // a dataset source ("fashion-mnist") for a model from another tool
  // Used, with a note, when neither `dataset` nor the file's metadata names one (the editor:
  // the model opens, and its dataset can be changed there). "": that is an error.
  std::string fallback_dataset;
  bool force = false;   // overwrite an existing project
  int64_t check_samples = 64;  // test samples the project and the ONNX model are compared on
  double tolerance = 1e-4;     // max abs difference, relative to max(1, |value|)
};

struct ImportReport {
  std::string project, weights;
  int64_t nodes = 0, parameters = 0;
  int64_t checked_samples = 0;  // 0: not checked (a note says why)
  double max_abs_diff = 0;
  std::vector<std::string> notes;
};

// Writes the project and its weights, then runs both the project (engine) and the ONNX model
// on test samples: a difference is an error and removes what was written.
Result<ImportReport> import_model(const ImportOptions& o, Backend& backend, const Say& say);

// Overwrites the trainer's initialised parameters with the project's "weights" file, when it
// names one (an imported model). Messages name the file and the parameter.
Result<void> apply_initial_weights(Trainer& trainer, const Project& p);

}  // namespace mls::runner
