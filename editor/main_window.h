// The editor's main window: palette, canvas, inspector, Lua console and run log docks,
// the run toolbar and the status bar, menus with shortcuts for everything frequent, files
// (templates, open, save, recent, autosave and recovery), training on a worker thread, and
// ONNX: export (checked, on a worker) and import (File > Open of a .onnx file).
#pragma once

#include <QFutureWatcher>
#include <QLabel>
#include <QMainWindow>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSet>
#include <QTimer>
#include <string>
#include <utility>
#include <vector>

#include "editor/canvas.h"
#include "editor/console_dock.h"
#include "editor/document_model.h"
#include "editor/export_dialog.h"
#include "editor/inspector.h"
#include "editor/instruments.h"
#include "editor/notebook_view.h"
#include "editor/palette.h"
#include "editor/script_editor.h"
#include "editor/step_view.h"
#include "editor/train_controller.h"
#include "runner/model_export.h"

class QAction;
class QComboBox;
class QDoubleSpinBox;
class QMenu;
class QSpinBox;
class QTabWidget;

namespace mls::editor {

class Debugger;

struct MainWindowOptions {
  // False in tests: no modal questions (unsaved changes are discarded, recovery skipped).
  bool interactive = true;
  std::string db = "mlstudio-runs.db";  // where GUI runs are recorded, as `--run`'s default
  std::string autosave_dir;             // "" : the user's data folder
};

// The main window's first size on a screen whose free area is `available` (device-independent
// pixels: a high-DPI scale makes it smaller).
QSize initial_window_size(QSize available);

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(MainWindowOptions options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  // File operations; errors are shown and returned. Opening a .onnx file imports it as a
  // project beside it (interactive: asks where), as importOnnx.
  Result<void> openFile(const QString& path);
  Result<void> saveTo(const QString& path);
  void newFromTemplate(const QString& example_file);  // "" : an empty project
  bool maybeSave();  // true when it is fine to drop the current document
  // A Lua file in a tab beside the canvas (main_window_files.cpp); one already open is
  // brought to the front. openFile opens .lua files this way too.
  Result<ScriptEditor*> openScript(const QString& path);
  QList<ScriptEditor*> scripts() const;
  // Closes a script's tab; with unsaved edits it asks (Save, Discard, Cancel): false: kept.
  bool closeScript(ScriptEditor* script);
  // The project folder's .lua files, as File > Scripts lists them (empty: no saved project).
  QStringList projectScripts() const;

  // Training with the toolbar's settings; false when the graph cannot train yet.
  bool train();
  // The Debugger's Resume: run `run_id` (paused by a breakpoint) goes on from its checkpoint
  // with the breakpoint `skip` names off, the others as the Debug menu arms them.
  bool resumePaused(int64_t run_id, const BreakHit& skip);
  // The Debugger's Fork here: a child of `run_id` from `checkpoint`, with the current settings.
  bool forkPaused(int64_t run_id, const std::string& checkpoint);
  void setDark(bool dark);

  DocumentModel* model() { return &model_; }
  CanvasScene* scene() { return scene_; }
  CanvasView* view() { return view_; }
  Palette* palette() { return palette_; }
  Inspector* inspector() { return inspector_; }
  ConsoleWidget* console() { return console_; }
  NotebookView* notebook() { return notebook_; }
  TrainController* trainer() { return &trainer_; }
  QPlainTextEdit* runLog() { return run_log_; }
  StepView* stepView() { return step_view_; }
  InstrumentsPanel* instruments() { return instruments_; }
  Debugger* debugger() { return debugger_; }
  // The pre-flight estimate of the project at this batch size (0: the project's), computed on
  // a worker thread; the Pre-flight view shows it when it is ready.
  void requestEstimate(int64_t batch);
  // The experiment store's recent runs, offered for the dashboard's overlay.
  void loadRunCurves();
  // The central tabs: the model (canvas) or the training step drawn as a graph.
  void showModelTab();
  void showStepTab(int stage);  // StepView::kForward, kBackward, or -1 for the optimised step
  QString statusText() const;
  // Writes the autosave copy now (the timer does it every 30 s while there are changes).
  void autosave();
  QString autosavePath() const;
  // Autosaves that editors which are gone left behind (a crash), newest first; recovering
  // one opens it as unsaved work on the file it came from and keeps it as this editor's
  // autosave, until the next autosave or a save replaces it.
  QStringList leftoverAutosaves() const;
  Result<void> recoverAutosave(const QString& file);
  void discardAutosave(const QString& file);

  // ONNX (main_window_onnx.cpp). Export runs runner::export_project on a worker: the file is
  // read back and checked node by node before it is kept; exportFinished says how it went.
  // False (with a message) when an export is already running or the project has no file.
  bool exportOnnx(const ExportChoice& choice);
  bool exporting() const { return export_watcher_ != nullptr; }
  // Writes `project` (and its weights beside it) from an ONNX model and opens it; unsupported
  // ops are listed by node. A model that does not name its data reads Fashion-MNIST, noted.
  Result<void> importOnnx(const QString& model, const QString& project, bool replace = false);
  int64_t lastRunId() const { return last_run_id_; }  // the last run trained here (0: none)

 Q_SIGNALS:
  void exportFinished(bool ok, const QString& summary);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildActions();
  void buildDocks();
  void buildToolbar();
  void updateTitle();
  void updateRunState();
  void syncToolbar();
  void showStatus(const QString& text, bool error = false);
  void readDataset();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void rebuildScriptsMenu();
  void offerRecovery();
  // Sets the icon by name and remembers it, so a theme change redraws it in the new colours.
  QAction* withIcon(QAction* a, const char* name);
  void applyIcons();
  void buildInstruments();  // main_window_instruments.cpp
  bool startRun(int64_t resume, const std::optional<BreakHit>& skip,
                const std::optional<runner::RunOptions::Fork>& fork = std::nullopt);
  void showExportDialog();  // main_window_onnx.cpp
  // The project as a file that runs read (`--run` semantics): the saved file, saved first when
  // modified, or a snapshot of an untitled one. Empty (with a status message) on failure.
  std::string projectFileForExport();

  MainWindowOptions options_;
  DocumentModel model_;
  CanvasScene* scene_;
  CanvasView* view_;
  StepView* step_view_;
  InstrumentsPanel* instruments_;
  Debugger* debugger_;  // the Debug menu, the paused run, the Health panel (issue 29)
  std::shared_ptr<Telemetry> telemetry_;  // the current run's feed
  int estimate_request_ = 0;
  QTabWidget* tabs_;
  Palette* palette_;
  Inspector* inspector_;
  ConsoleWidget* console_;
  NotebookView* notebook_;
  QPlainTextEdit* run_log_;
  TrainController trainer_;
  QLabel* status_label_;
  QLabel* summary_label_;
  QProgressBar* progress_;
  QTimer autosave_timer_;
  QComboBox* device_;
  QSpinBox* epochs_;
  QSpinBox* batch_;
  QDoubleSpinBox* lr_;
  QAction *train_act_, *pause_act_, *stop_act_, *dark_act_;
  QMenu* recent_menu_;
  QMenu* scripts_menu_;
  QSet<QString> trusted_scripts_;  // Lua files trusted in this session (absolute paths)
  std::vector<std::pair<QAction*, const char*>> icons_;
  struct {
    QAction *new_ = nullptr, *open = nullptr, *save = nullptr, *undo = nullptr, *redo = nullptr,
            *fit = nullptr, *layout = nullptr, *frame = nullptr, *step = nullptr;
  } quick_;
  int dataset_request_ = 0;
  int64_t last_run_id_ = 0;
  QFutureWatcher<Result<runner::ExportReport>>* export_watcher_ = nullptr;  // while exporting
  bool syncing_toolbar_ = false;
};

}  // namespace mls::editor
