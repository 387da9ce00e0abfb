// The training debugger in the editor (issue 29), put together for the main window: the Debug
// menu (editor/debug_menu.h), the Debugger dock with a paused run (editor/fault_view.h), the
// Health panel (editor/health_panel.h) and Compare devices (editor/device_diff_view.h).
//
//   auto* dbg = new Debugger(window, scene, &model);
//   dbg->populate(menuBar()->addMenu("&Debug"));
//   tabs->addTab(dbg->healthPanel(), "Health");       // where OpenGL is supported
//   // Train:  dbg->arm(request, telemetry);           // breakpoints and health into the run
//   // ended:  if (dbg->runEnded(outcome)) ...          // true: a breakpoint paused it
#pragma once

#include <QObject>
#include <QString>
#include <functional>
#include <memory>
#include <optional>

#include "editor/debug_menu.h"
#include "editor/fault_view.h"
#include "runner/training_run.h"

class QDockWidget;
class QMainWindow;
class QMenu;

namespace mls::editor {

class CanvasScene;
class DeviceDiffView;
class DocumentModel;
class HealthPanel;

class Debugger : public QObject {
  Q_OBJECT
 public:
  Debugger(QMainWindow* window, CanvasScene* scene, DocumentModel* model);

  void populate(QMenu* menu);
  DebugMenu* menu() { return menu_; }
  FaultView* faultView() { return fault_; }
  HealthPanel* healthPanel() { return health_; }
  DeviceDiffView* deviceDiff() { return diff_; }
  QDockWidget* faultDock() { return fault_dock_; }

  // Puts the armed breakpoints and health instruments into the run (for a resume of a paused
  // run, `skip` is the breakpoint that fired: off) and follows its telemetry.
  void arm(runner::RunRequest& req, std::shared_ptr<const Telemetry> telemetry,
           const std::optional<BreakHit>& skip = std::nullopt);
  // A run ended: true when a breakpoint paused it (the dock and the canvas show where).
  bool runEnded(const runner::RunOutcome& outcome, const std::string& project);
  // Follows a run started elsewhere (the console, a cell).
  void follow(std::shared_ptr<const Telemetry> telemetry);

 Q_SIGNALS:
  // Resume was pressed: train on from run `run_id`'s checkpoint, `hit`'s breakpoint off.
  void resumeRequested(int64_t run_id, const mls::BreakHit& hit);
  void forkRequested(int64_t run_id, const QString& checkpoint);
  void status(const QString& text, bool error);

 private:
  // Shows a dock of the debugger tabbed with the Inspector (the right side's full height).
  void showDock(QDockWidget* dock);

  QMainWindow* window_;
  CanvasScene* scene_;
  DocumentModel* model_;
  DebugMenu* menu_;
  FaultView* fault_;
  QDockWidget* fault_dock_;
  HealthPanel* health_;
  DeviceDiffView* diff_;
  QDockWidget* diff_dock_;
};

}  // namespace mls::editor
