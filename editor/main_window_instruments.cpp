// The main window's side of the instruments: the Instruments tab's signals (select a node,
// export CSV, estimate, compare runs) and the work they start.
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QTabWidget>
#include <QtConcurrent/QtConcurrent>

#include "editor/debugger.h"
#include "editor/main_window.h"
#include "editor/run_browser.h"
#include "editor/run_table_model.h"
#include "store/run_store.h"

namespace mls::editor {

void MainWindow::buildInstruments() {
  instruments_->setTrainKey(train_key().toString(QKeySequence::NativeText));
  connect(instruments_, &InstrumentsPanel::nodeClicked, this, [this](const QString& label) {
    if (!nodes::find_node(model_.doc(), label.toStdString())) {
      showStatus("'" + label + "' is a step of the compiled graph, not a node of the model");
      return;
    }
    scene_->selectNode(label.toStdString());
    tabs_->setCurrentWidget(view_);
    showStatus("node '" + label + "' selected (from the instruments)");
  });
  connect(instruments_, &InstrumentsPanel::exportRequested, this, [this] {
    const QString path = options_.interactive
                             ? QFileDialog::getSaveFileName(this, "Export the dashboard as CSV",
                                                            "dashboard.csv", "CSV files (*.csv)")
                             : QString();
    if (path.isEmpty()) return;
    QString error;
    if (!instruments_->exportCsv(path, &error)) return showStatus(error, true);
    showStatus("dashboard series written to " + path);
  });
  connect(instruments_, &InstrumentsPanel::estimateRequested, this,
          [this](int64_t b) { requestEstimate(b); });
  connect(instruments_, &InstrumentsPanel::refreshRunsRequested, this, [this] {
    loadRunCurves();
    // [run browser] "Compare runs..." also brings up the Runs dock: every run, filtered.
    if (auto* rd = findChild<QDockWidget*>("dock.runs")) {
      rd->show();
      rd->raise();
    }
  });
  connect(&trainer_, &TrainController::preflightReady, instruments_,
          &InstrumentsPanel::setPreflight);
  connect(&trainer_, &TrainController::finished, this, [this] {
    loadRunCurves();
    // [run browser] The new run in the table, where it was opened.
    if (auto* b = findChild<RunBrowser*>(); b && b->model()->isOpen()) b->model()->refresh();
  });
  // A run started by mls.train in the Lua console is followed like the Train button's.
  connect(console_, &ConsoleWidget::liveRunStarted, this, [this](std::shared_ptr<Telemetry> tm) {
    telemetry_ = tm;
    instruments_->setLive(tm);
    debugger_->follow(tm);
  });
  connect(notebook_, &NotebookView::liveRunStarted, this, [this](std::shared_ptr<Telemetry> tm) {
    telemetry_ = tm;
    instruments_->setLive(tm);
    debugger_->follow(tm);
  });
  // A run from the console or a notebook cell ended with its entry or its cell: done when its
  // last epoch came in, else stopped.
  auto lua_run_ended = [this] {
    if (telemetry_ && !trainer_.running() && instruments_->phase() == RunPhase::Training &&
        !telemetry_->running.load()) {
      const size_t epochs = telemetry_->epochs.size();
      const bool done =
          epochs > 0 && static_cast<int64_t>(epochs) >= telemetry_->planned_epochs.load();
      instruments_->setPhase(done ? RunPhase::Done : RunPhase::Stopped);
    }
    loadRunCurves();
  };
  connect(console_, &ConsoleWidget::entryFinished, this, lua_run_ended);
  connect(notebook_, &NotebookView::runFinished, this, lua_run_ended);
}

void MainWindow::requestEstimate(int64_t batch) {
  // Of what the canvas shows, as Train would run it: the file is neither saved nor read.
  runner::ProjectOptions po;
  po.path = model_.path();
  po.document = std::make_shared<const nodes::Document>(model_.doc());
  if (batch > 0) po.batch_size = batch;
  const int request = ++estimate_request_;
  auto* watcher = new QFutureWatcher<Result<PreflightEstimate>>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, request] {
    watcher->deleteLater();
    if (request != estimate_request_) return;  // a newer request is on its way
    Result<PreflightEstimate> r = watcher->result();
    if (!r) return showStatus("pre-flight: " + QString::fromStdString(r.error().message), true);
    showStatus(QString("pre-flight: the run will hold %1 MiB%2")
                   .arg(static_cast<double>(r->total_bytes) / (1024.0 * 1024.0), 0, 'f', 2)
                   .arg(r->fits ? "" : " and will not fit in free memory"),
               !r->fits);
    instruments_->setPreflight(std::make_shared<const PreflightEstimate>(std::move(*r)));
    instruments_->showTab("Pre-flight");
  });
  showStatus("estimating memory and time...");
  watcher->setFuture(QtConcurrent::run([po]() -> Result<PreflightEstimate> {
    auto p = runner::open_project(po);
    if (!p) return p.error();
    auto device = runner::open_backend(*p);  // the project's device, as its run opens it
    if (!device) return device.error();
    Backend& be = **device;
    return preflight(p->builder(), p->train_config(), be, runner::device_rates(be),
                     {.samples_per_epoch = p->train->num_samples(),
                      .eval_samples = {p->validation ? p->validation->num_samples() : 0,
                                       p->test ? p->test->num_samples() : 0}});
  }));
}

void MainWindow::loadRunCurves() {
  auto store = store::RunStore::open_read_only(options_.db);
  if (!store) return;  // no runs yet: nothing to overlay
  auto runs = (*store)->list_runs();
  if (!runs) return showStatus(QString::fromStdString(runs.error().message), true);
  std::vector<RunCurves> curves;
  // The newest 24 runs: the dashboard offers a dozen, the rest stay in `mlstudio runs`.
  const size_t first = runs->size() > 24 ? runs->size() - 24 : 0;
  for (size_t i = first; i < runs->size(); ++i) {
    const store::RunInfo& info = (*runs)[i];
    RunCurves c;
    c.run_id = info.id;
    c.label = "run " + std::to_string(info.id);
    if (auto m = (*store)->metrics(info.id, "train/loss"))
      for (const store::MetricPoint& p : *m) {
        c.steps.push_back(static_cast<double>(p.step));
        c.loss.push_back(p.value);
      }
    auto vl = (*store)->metrics(info.id, "val/loss");
    auto va = (*store)->metrics(info.id, "val/accuracy");
    if (vl)
      for (size_t k = 0; k < vl->size(); ++k) {
        c.epochs.push_back(static_cast<double>((*vl)[k].step));
        c.val_loss.push_back((*vl)[k].value);
        c.val_accuracy.push_back(va && k < va->size() ? (*va)[k].value : NAN);
      }
    if (!c.steps.empty()) curves.push_back(std::move(c));
  }
  instruments_->setRuns(std::move(curves));
}

std::string MainWindow::projectFileForExport() {
  // An export reads the project from its file, as `mlstudio export` does (the runs it offers
  // are that file's): a saved project is saved first; an untitled one exports from a
  // snapshot beside the autosave. Training and pre-flight take the document as it is held.
  std::string path = model_.path();
  if (path.empty()) {
    const QString snap = QFileInfo(autosavePath()).dir().filePath("untitled-export.mls");
    QDir().mkpath(QFileInfo(snap).path());
    if (auto r = nodes::save_document(model_.doc(), snap.toStdString()); !r) {
      showStatus(QString::fromStdString(r.error().message), true);
      return {};
    }
    return snap.toStdString();
  }
  if (model_.isModified() && !saveTo(QString::fromStdString(path)).ok()) return {};
  return path;
}

}  // namespace mls::editor
