#include "editor/export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <algorithm>
#include <filesystem>

#include "store/run_store.h"

namespace mls::editor {

std::vector<RunChoice> export_run_choices(const std::string& db, const std::string& project_path) {
  std::vector<RunChoice> out;
  if (!std::filesystem::exists(db)) return out;
  auto store = store::RunStore::open_read_only(db);
  if (!store) return out;
  auto runs = (*store)->list_runs();
  if (!runs) return out;
  const std::string want = std::filesystem::absolute(project_path).lexically_normal().string();
  for (auto it = runs->rbegin(); it != runs->rend(); ++it) {
    if (std::filesystem::path(it->project_path).lexically_normal().string() != want) continue;
    if (it->status != "finished" && it->status != "interrupted") continue;
    // "2026-11-25T10:02:33.123Z" -> "2026-11-25 10:02"
    const QString when = QString::fromStdString(it->started).left(16).replace('T', ' ');
    out.push_back({it->id, QString("run %1 · %2 · %3 · %4")
                               .arg(it->id)
                               .arg(QString::fromStdString(it->status))
                               .arg(when)
                               .arg(QString::fromStdString(it->device))});
  }
  return out;
}

QString project_weights_label(const std::string& weights_file) {
  if (weights_file.empty()) return "initial weights (not trained)";
  return "the project's weights (" +
         QString::fromStdString(std::filesystem::path(weights_file).filename().string()) + ")";
}

ExportDialog::ExportDialog(QWidget* parent, const QString& out, const std::vector<RunChoice>& runs,
                           int64_t preferred_run, const std::string& project_weights)
    : QDialog(parent) {
  setWindowTitle("Export to ONNX");
  auto* form = new QFormLayout;

  out_ = new QLineEdit(out);
  auto* browse = new QPushButton("Browse…");
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString p =
        QFileDialog::getSaveFileName(this, "Export to ONNX", out_->text(), "ONNX models (*.onnx)");
    if (!p.isEmpty()) out_->setText(p);
  });
  auto* row = new QHBoxLayout;
  row->addWidget(out_, 1);
  row->addWidget(browse);
  form->addRow("File:", row);

  weights_ = new QComboBox;
  for (const RunChoice& r : runs) weights_->addItem(r.label, QVariant::fromValue<qlonglong>(r.id));
  weights_->addItem(project_weights_label(project_weights), QVariant::fromValue<qlonglong>(0));
  for (int i = 0; i < weights_->count(); ++i)
    if (weights_->itemData(i).toLongLong() == preferred_run) weights_->setCurrentIndex(i);
  form->addRow("Weights:", weights_);

  int8_ = new QCheckBox(
      "int8 (QDQ): weights per channel, activations calibrated on 8 training batches");
  form->addRow("Quantize:", int8_);
  opset_ = new QSpinBox;
  opset_->setRange(13, 17);
  opset_->setValue(17);
  form->addRow("Opset:", opset_);

  auto* note = new QLabel(
      "The written file is read back, run on 256 test samples and compared with mlstudio node by "
      "node; "
      "if a node differs, nothing is written.");
  note->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText("Export");
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(out_, &QLineEdit::textChanged, this,
          [ok = buttons->button(QDialogButtonBox::Ok)](const QString& t) {
            ok->setEnabled(!t.trimmed().isEmpty());
          });
  buttons->button(QDialogButtonBox::Ok)->setEnabled(!out.trimmed().isEmpty());

  auto* v = new QVBoxLayout(this);
  v->addLayout(form);
  v->addWidget(note);
  v->addWidget(buttons);
}

ExportChoice ExportDialog::choice() const {
  ExportChoice c;
  c.out = out_->text().trimmed();
  c.run_id = weights_->currentData().toLongLong();
  c.int8 = int8_->isChecked();
  c.opset = opset_->value();
  return c;
}

}  // namespace mls::editor
