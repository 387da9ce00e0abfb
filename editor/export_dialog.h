// File > Export to ONNX…: where to write, which weights (a recorded run of this project or
// the initial ones), int8 quantization and the opset. The export itself runs on a worker
// (MainWindow::exportOnnx); this dialog only chooses.
//
//   auto runs = export_run_choices("mlstudio-runs.db", "/abs/mlp.mls");   // newest first
//   ExportDialog d(parent, "mlp.onnx", runs, runs.empty() ? 0 : runs[0].id, doc.weights);
//   if (d.exec() == QDialog::Accepted) window->exportOnnx(d.choice());
#pragma once

#include <QDialog>
#include <QString>
#include <cstdint>
#include <string>
#include <vector>

class QCheckBox;
class QComboBox;
class QLineEdit;
class QSpinBox;

namespace mls::editor {

struct ExportChoice {
  QString out;
  int64_t run_id = 0;  // 0: the project's own weights (its weights file, else untrained)
  bool int8 = false;
  int opset = 17;
};

struct RunChoice {
  int64_t id = 0;
  QString label;  // "run 7 · finished · 2026-11-25 10:02 · cpu"
};

// The runs recorded for this project (its absolute path) that left weights: finished or
// interrupted, newest first. Empty when the database does not exist yet.
std::vector<RunChoice> export_run_choices(const std::string& db, const std::string& project_path);

// What run_id 0 exports, as the dialog names it: the weights file the project starts from
// ("model": {"weights": F}, an imported model's trained weights), or, without one, the
// initial weights of its init schemes.
QString project_weights_label(const std::string& weights_file);

class ExportDialog : public QDialog {
  Q_OBJECT
 public:
  // `project_weights`: the project's weights file ("" when it has none).
  ExportDialog(QWidget* parent, const QString& out, const std::vector<RunChoice>& runs,
               int64_t preferred_run, const std::string& project_weights = {});
  ExportChoice choice() const;

 private:
  QLineEdit* out_;
  QComboBox* weights_;
  QCheckBox* int8_;
  QSpinBox* opset_;
};

}  // namespace mls::editor
