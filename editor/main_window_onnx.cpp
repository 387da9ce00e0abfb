// The main window's ONNX actions: File > Export to ONNX… (runner::export_project on a worker,
// so the canvas keeps serving while the file is checked node by node) and the import behind
// File > Open of a .onnx file (runner::import_model, then the project opens on the canvas).
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QtConcurrent/QtConcurrent>
#include <filesystem>

#include "editor/main_window.h"
#include "engine/core/backend_registry.h"
#include "engine/core/check.h"

namespace mls::editor {

namespace {

// Export and import run on the host, as `mlstudio export` and `mlstudio import` do.
Backend& host_backend() {
  Backend* b = backend_registry().host();
  MLS_CHECK(b != nullptr, "ONNX export and import need the CPU backend registered");
  return *b;
}

}  // namespace

void MainWindow::showExportDialog() {
  if (exporting()) return showStatus("an export is already running", true);
  const std::string project = projectFileForExport();
  if (project.empty()) return;
  const QFileInfo info(QString::fromStdString(project));
  const QString out = info.absoluteDir().filePath(info.completeBaseName() + ".onnx");
  const auto runs = export_run_choices(options_.db, project);
  // The run trained here last, else the newest recorded one.
  int64_t preferred = runs.empty() ? 0 : runs.front().id;
  for (const RunChoice& r : runs)
    if (r.id == last_run_id_) preferred = r.id;
  ExportDialog d(this, out, runs, preferred, model_.doc().weights);
  if (d.exec() == QDialog::Accepted) (void)exportOnnx(d.choice());
}

bool MainWindow::exportOnnx(const ExportChoice& choice) {
  auto refuse = [this](const QString& why) {
    showStatus(why, true);
    Q_EMIT exportFinished(false, why);
    return false;
  };
  if (exporting()) return refuse("an export is already running");
  if (choice.out.isEmpty()) return refuse("choose the ONNX file to write");
  runner::ExportOptions o;
  o.project.path = projectFileForExport();
  if (o.project.path.empty()) return refuse("the project could not be saved for the export");
  o.out = choice.out.toStdString();
  if (choice.run_id > 0) o.run_id = choice.run_id;
  o.db = options_.db;
  o.int8 = choice.int8;
  o.opset = choice.opset;
  o.version = MLSTUDIO_VERSION;

  run_log_->appendPlainText(
      "exporting " + QString::fromStdString(o.project.path) + " to " + choice.out +
      (choice.run_id > 0 ? QString(" with the weights of run %1").arg(choice.run_id)
                         : " with " + project_weights_label(model_.doc().weights)) +
      (choice.int8 ? ", int8" : ""));
  showStatus("exporting to " + QFileInfo(choice.out).fileName() + "…");
  progress_->setRange(0, 0);  // busy: the check has no steps to count
  progress_->setFormat("exporting");
  progress_->show();

  export_watcher_ = new QFutureWatcher<Result<runner::ExportReport>>(this);
  connect(export_watcher_, &QFutureWatcherBase::finished, this, [this, o] {
    Result<runner::ExportReport> r = export_watcher_->result();
    export_watcher_->deleteLater();
    export_watcher_ = nullptr;
    progress_->hide();
    if (!r) {
      const QString msg = QString::fromStdString(r.error().message);
      run_log_->appendPlainText("export failed: " + msg);
      showStatus("export failed: " + msg.section('\n', 0, 0), true);
      if (options_.interactive) QMessageBox::warning(this, "Export to ONNX failed", msg);
      Q_EMIT exportFinished(false, msg);
      return;
    }
    QString line =
        QString(
            "wrote %1 (%2, %3 ONNX nodes, %4 parameters); read back and checked on %5 test "
            "samples: max |onnx − mlstudio| %6")
            .arg(QString::fromStdString(r->path))
            .arg(QString::fromStdString(runner::bytes_text(r->bytes)))
            .arg(r->onnx_nodes)
            .arg(r->parameters)
            .arg(r->checked_samples)
            .arg(r->max_abs_diff, 0, 'g', 3);
    for (const runner::NodeCheck& c : r->checks)
      run_log_->appendPlainText(QString("  %1: max |onnx − mlstudio| %2")
                                    .arg(QString::fromStdString(c.node))
                                    .arg(c.max_abs, 0, 'g', 3));
    if (o.int8 && r->f32_bytes > 0) {
      line += QString("; int8 is %1% of the f32 file")
                  .arg(100.0 * static_cast<double>(r->bytes) / static_cast<double>(r->f32_bytes), 0,
                       'f', 1);
      if (r->accuracy_samples > 0)
        line += QString(", test accuracy %1% (f32 %2%)")
                    .arg(100 * r->accuracy_int8, 0, 'f', 2)
                    .arg(100 * r->accuracy_f32, 0, 'f', 2);
    }
    run_log_->appendPlainText(line);
    showStatus(line);
    Q_EMIT exportFinished(true, line);
  });
  // Messages from the worker reach the run log through the event loop.
  auto say = [this](const std::string& s) {
    QMetaObject::invokeMethod(
        this, [this, m = QString::fromStdString(s)] { run_log_->appendPlainText(m); },
        Qt::QueuedConnection);
  };
  export_watcher_->setFuture(QtConcurrent::run([o, say]() -> Result<runner::ExportReport> {
    return runner::export_project(o, host_backend(), say);
  }));
  return true;
}

Result<void> MainWindow::importOnnx(const QString& model, const QString& project, bool replace) {
  runner::ImportOptions o;
  o.model = model.toStdString();
  o.out = project.toStdString();
  o.force = replace;
  o.fallback_dataset = "fashion-mnist";
  std::vector<std::string> notes;
  auto r =
      runner::import_model(o, host_backend(), [&](const std::string& s) { notes.push_back(s); });
  if (!r) {
    const QString msg = QString::fromStdString(r.error().message);
    run_log_->appendPlainText("import failed: " + msg);
    showStatus(msg.section('\n', 0, 0), true);
    if (options_.interactive)
      QMessageBox::warning(this, "Cannot import " + QFileInfo(model).fileName(), msg);
    return r.error();
  }
  if (auto opened = openFile(project); !opened) return opened;
  run_log_->appendPlainText(QString("imported %1: %2 nodes, %3 parameters, written as %4 and %5")
                                .arg(model)
                                .arg(r->nodes)
                                .arg(r->parameters)
                                .arg(QString::fromStdString(r->project))
                                .arg(QString::fromStdString(r->weights)));
  for (const std::string& n : notes) run_log_->appendPlainText(QString::fromStdString(n));
  showStatus(QString("imported %1 as %2 (%3 parameters): train it, or export it again")
                 .arg(QFileInfo(model).fileName())
                 .arg(QFileInfo(project).fileName())
                 .arg(r->parameters));
  return {};
}

}  // namespace mls::editor
