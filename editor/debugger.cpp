#include "editor/debugger.h"

#include <QDockWidget>
#include <QMainWindow>
#include <QMenu>

#include "editor/canvas.h"
#include "editor/device_diff_view.h"
#include "editor/document_model.h"
#include "editor/health_panel.h"

namespace mls::editor {

Debugger::Debugger(QMainWindow* window, CanvasScene* scene, DocumentModel* model)
    : QObject(window),
      window_(window),
      scene_(scene),
      model_(model),
      menu_(new DebugMenu(window)),
      fault_(new FaultView(scene)),
      fault_dock_(new QDockWidget("Debugger", window)),
      health_(new HealthPanel),
      diff_(new DeviceDiffView(model, scene)),
      diff_dock_(new QDockWidget("Compare devices", window)) {
  fault_dock_->setObjectName("dock.debugger");
  fault_dock_->setWidget(fault_);
  window->addDockWidget(Qt::RightDockWidgetArea, fault_dock_);
  fault_dock_->hide();
  diff_dock_->setObjectName("dock.compare_devices");
  diff_dock_->setWidget(diff_);
  window->addDockWidget(Qt::RightDockWidgetArea, diff_dock_);
  diff_dock_->hide();
  connect(fault_, &FaultView::resumeRequested, this, &Debugger::resumeRequested);
  connect(fault_, &FaultView::forkRequested, this, &Debugger::forkRequested);
  // The scene rebuilds a node's item when the document changes: mark it again.
  connect(model_, &DocumentModel::changed, fault_, [this] { fault_->remark(); });
  connect(diff_, &DeviceDiffView::finished, this,
          [this](bool ok, const QString& s) { Q_EMIT status("compare devices: " + s, !ok); });
}

void Debugger::showDock(QDockWidget* dock) {
  // The first time: tabbed with the Inspector, so the dock has the right side's full height
  // (the window's docks are made after the debugger).
  if (!dock->property("placed").toBool()) {
    if (auto* ins = window_->findChild<QDockWidget*>("dock.inspector"))
      window_->tabifyDockWidget(ins, dock);
    dock->setProperty("placed", true);
  }
  dock->show();
  dock->raise();
}

void Debugger::populate(QMenu* menu) {
  menu_->populate(menu);
  menu->addSeparator();
  QAction* cmp = menu->addAction("&Compare devices…", this, [this] {
    showDock(diff_dock_);
    diff_->run();
  });
  cmp->setObjectName("debug.compare_devices");
  cmp->setToolTip(
      "One training step on each device against a float64 reference; the canvas "
      "painted by each node's difference");
  QAction* show =
      menu->addAction("Show the Debugger &panel", this, [this] { showDock(fault_dock_); });
  show->setObjectName("debug.show_dock");
}

void Debugger::arm(runner::RunRequest& req, std::shared_ptr<const Telemetry> telemetry,
                   const std::optional<BreakHit>& skip) {
  const DebugSettings& s = menu_->settings();
  Breakpoints b = s.breakpoints();
  if (skip) {
    // Resume: the breakpoint that paused the run is off for the run that goes on.
    switch (skip->kind) {
      case BreakHit::Kind::NonFinite:
        b.nan = false;
        break;
      case BreakHit::Kind::Spike:
        b.spike = 0;
        break;
      case BreakHit::Kind::DeadRelu:
        b.dead_relu = 0;
        break;
      case BreakHit::Kind::GradNormHigh:
        b.grad_norm_max = 0;
        break;
      case BreakHit::Kind::GradNormLow:
        b.grad_norm_min = 0;
        break;
    }
  }
  req.breaks = b;
  req.health = s.healthConfig();
  fault_->clear();
  follow(std::move(telemetry));
}

void Debugger::follow(std::shared_ptr<const Telemetry> telemetry) {
  health_->setLive(std::move(telemetry));
}

bool Debugger::runEnded(const runner::RunOutcome& outcome, const std::string& project) {
  if (!outcome.result.breakpoint) return false;
  FaultView::RunInfo info;
  info.run_id = outcome.run_id;
  info.db = outcome.db;
  info.lr = outcome.config.opt.lr;
  info.project = project;
  // A fault has usually been growing for some steps (at lr 1000 the weights are near 1e20 by
  // the step that overflows): fork from the last checkpoint before it.
  info.checkpoint = outcome.healthy_checkpoint.empty() ? outcome.break_checkpoint
                                                       : outcome.healthy_checkpoint;
  info.fork_step = outcome.healthy_checkpoint.empty() ? outcome.result.breakpoint->step - 1
                                                      : outcome.healthy_step;
  fault_->showBreak(*outcome.result.breakpoint, info);
  showDock(fault_dock_);
  Q_EMIT status(paused_status(*outcome.result.breakpoint), true);
  return true;
}

}  // namespace mls::editor
