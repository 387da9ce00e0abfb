// The notebook beside the canvas: the document's cells in order (DocumentModel is the source
// of truth: every add, delete and edit is a cell edit command on its undo stack), each drawn by a
// CellWidget with its output, and a NotebookSession that runs them on a worker thread, one run at a
// time, with Stop. mls.project.current() in a cell is the open project (through GuiThreadHistory,
// as in the Lua console); an edit on the canvas marks the cells that read the project stale, or
// re-runs them.
//
//   auto* nb = new NotebookView(&model);
//   nb->addCell(nodes::CellKind::Lua);          // after the selected cell; undoable
//   nb->runCell("a");                           // returns at once; runFinished(ids) follows
//   nb->stop();                                 // the running cell stops at its next instruction
//   nb->moveSelected(+1);                       // Alt+Down; undoable
// A cell whose mls.train runs shows a RunDashboard under its output (live while it trains,
// its final curves after) and "run #ID"; after each run a saved project's outputs are written
// beside it (P.outputs.json).
#pragma once

#include <QFutureWatcher>
#include <QStringList>
#include <QWidget>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "editor/cell_widget.h"
#include "editor/document_model.h"
#include "editor/gui_thread_history.h"
#include "editor/run_dashboard.h"
#include "engine/train/telemetry.h"
#include "nodes/lab.h"
#include "nodes/notebook.h"
#include "scripting/notebook/session.h"

class QAction;
class QLabel;
class QTemporaryDir;
class QScrollArea;
class QToolBar;
class QVBoxLayout;

namespace mls::editor {

class NotebookView : public QWidget {
  Q_OBJECT
 public:
  explicit NotebookView(DocumentModel* model, const std::string& db_path = "mlstudio-runs.db",
                        QWidget* parent = nullptr);
  ~NotebookView() override;

  // [Commands] Each run returns at once (false: a run is in flight); runFinished follows.
  void addCell(nodes::CellKind kind);
  void addCell(nodes::Cell cell);  // a fresh id when it has none
  void deleteSelected();
  // Moves the selected cell up (-1) or down (+1) through the document's undoable command;
  // it stays selected. False at either end or while a run is in flight.
  bool moveSelected(int delta);
  bool runCell(const QString& id);
  bool runAll();
  bool runToHere();
  bool runSelected();
  // A lab (nodes/lab.h): runs its visible checks with what they need ("Check my work");
  // labGoals() then shows each goal met or not, with what the check saw.
  bool checkMyWork();
  QLabel* labGoals() const { return lab_goals_; }
  void restart();
  void stop();
  void setLazy(bool lazy);
  void setOnDemand(bool on);
  // A lab author: the selected cell's role (an answer gets a placeholder starter).
  void setRole(nodes::CellRole role);
  // Off (the default, and again whenever another project opens): cells run in the sandbox,
  // under the project's folder. On: with the user's rights. Either way a fresh Lua state.
  void setTrusted(bool trusted);
  bool trusted() const { return trusted_; }

  // Makes a view cell's live view ("graph", "step", "dashboard", "memory"); null: its name.
  void setViewFactory(std::function<QWidget*(const std::string& view)> f) {
    view_factory_ = std::move(f);
  }
  void addViewCell(const std::string& view);

  bool busy() const { return busy_; }
  QString selected() const { return selected_; }
  void select(const QString& id);
  CellWidget* cellWidget(const QString& id) const;
  QStringList cellIds() const;
  QToolBar* toolbar() const { return toolbar_; }  // the cells' row (add, delete, move)
  // The button of an action, in whichever row it is ("run-all", "trust", ...).
  QWidget* buttonFor(const QString& name) const;
  QAction* action(const QString& name) const;  // "add-lua", "run", "stop", "lazy", ...
  lua::NotebookSession& session() { return *session_; }
  const nodes::Notebook& notebook() const;
  // The ids the last run ran, in order.
  const QStringList& lastRun() const { return last_run_; }
  // Under a cell that trained: its dashboard (null: none) and its "run #ID" label (null: none).
  RunDashboard* dashboard(const QString& id) const;
  QLabel* runLabel(const QString& id) const;
  // Why the last write of P.outputs.json failed ("" when it did not).
  QString outputsError() const { return outputs_error_; }

 Q_SIGNALS:
  void runFinished(const QStringList& ran);
  void busyChanged(bool busy);
  // A cell trained: its live feed, for the Instruments tab.
  void liveRunStarted(std::shared_ptr<mls::Telemetry> telemetry);
  // P.outputs.json was written after a run.
  void outputsSaved(const QString& path);

 private:
  void setSource(const QString& id, const QString& source);
  using Job = std::function<std::vector<std::string>(lua::NotebookSession&)>;
  // save_outputs: P.outputs.json is written after the job. Not after the re-runs a canvas edit
  // starts: their outputs come from a graph that may never be saved, which the outputs' hash
  // does not cover (they would read as fresh when the project reopens without the edit).
  bool start(Job job, bool save_outputs = true);
  void finished();
  void showLabGoals();
  // The document's cells changed (edit, undo, load): the widgets and the session follow.
  void syncFromDocument();
  void refreshOutputs();
  void rebuildWidgets();
  void setBusy(bool busy);
  // The running cell's mls.train started: its dashboard follows the run.
  void showLiveRun(std::shared_ptr<Telemetry> telemetry);
  // The run's cells: their dashboards end (or go, for a cell that no longer trains).
  void endLiveRuns();
  // The box under a cell that holds its run's label and dashboard (made on demand).
  struct RunBox {
    QWidget* box = nullptr;  // owned by the cell's widget while it has one
    QLabel* label = nullptr;
    RunDashboard* dashboard = nullptr;
  };
  RunBox& runBox(const QString& id);
  void clearRuns();  // another project: its cells' runs are not these
  void showRunId(const QString& id, int64_t run_id);
  void saveOutputs();
  // A fresh session: sandboxed under sandboxRoot() unless trusted; the shown outputs kept.
  void makeSession();
  std::string sandboxRoot();
  void showTrust();

  DocumentModel* model_;
  std::string db_path_;
  bool trusted_ = false;
  std::unique_ptr<QTemporaryDir> scratch_;  // the folder of an unsaved project's cells
  GuiThreadHistory bridge_;
  std::unique_ptr<lua::NotebookSession> session_;
  std::atomic<bool> cancel_{false};
  QFutureWatcher<std::vector<std::string>> watcher_;
  bool busy_ = false;
  bool pending_sync_ = false;     // the document changed while a run was in flight
  bool pending_project_ = false;  // ...and so did the graph
  // The nodes and links last seen, to tell a canvas edit from a cell edit.
  std::string last_model_;  // nodes::model_text of the project last seen
  QString running_;
  QString selected_;
  QStringList last_run_;
  std::vector<nodes::Cell> shown_;  // the cells the widgets and the session have
  std::map<QString, CellWidget*> widgets_;
  QToolBar* toolbar_;
  QToolBar* run_bar_;
  QToolBar* mode_bar_;
  QLabel* trust_state_;
  QLabel* lab_goals_;     // a lab's goals after "Check my work"
  bool checking_ = false;  // the job in flight is "Check my work"
  nodes::LabSpec shown_lab_;  // the lab the session checks  // "sandboxed" or "trusted", with the folder in its tooltip
  QScrollArea* scroll_;
  QWidget* cells_box_;
  QVBoxLayout* cells_layout_;
  std::map<QString, QAction*> actions_;
  std::function<QWidget*(const std::string&)> view_factory_;
  std::map<QString, RunBox> runs_;
  std::set<QString> trained_;  // the cells whose mls.train started in the run in flight
  QString outputs_error_;
  bool save_after_ = true;  // the job in flight's save_outputs
};

}  // namespace mls::editor
