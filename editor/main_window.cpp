#include "editor/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QCryptographicHash>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QGraphicsView>
#include <QInputDialog>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QStyleFactory>
#include <QTabBar>
#include <QTabWidget>
#include <QToolBar>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <filesystem>

#include "datasets/dataset_spec.h"
#include "engine/core/backend_registry.h"
#include "editor/debugger.h"
#include "editor/health_panel.h"
#include "editor/memory_view.h"
#include "editor/run_browser.h"
#include "editor/run_dashboard.h"
#include "editor/run_table_model.h"
#include "editor/step_through_view.h"
#include "editor/theme.h"
#include "engine/train/progress_line.h"

namespace mls::editor {

namespace {

// A run's per-node figures (RunRequest::inspect) as the canvas draws them.
std::map<std::string, NodeRunInfo> run_insights(const runner::RunOutcome& o) {
  std::map<std::string, NodeRunInfo> out;
  double total = 0;
  for (const LabelTime& t : o.node_times) total += t.forward_seconds + t.backward_seconds;
  for (const LabelTime& t : o.node_times) {
    if (t.label.empty() || total <= 0) continue;
    NodeRunInfo& n = out[t.label];
    n.time_share = (t.forward_seconds + t.backward_seconds) / total;
    n.ms_per_step = 1e3 * (t.forward_seconds + t.backward_seconds);
    n.backward_ms = 1e3 * t.backward_seconds;
  }
  for (const OutputStats& s : o.node_outputs) {
    NodeRunInfo& n = out[s.label];
    if (total > 0 && n.time_share < 0) n.time_share = 0;  // timed, and ran no kernel (a view)
    n.output = s;
  }
  return out;
}

}  // namespace

QSize initial_window_size(QSize available) {
  const QSize wanted(1440, 900);
  if (!available.isValid()) return wanted;
  return wanted.boundedTo(QSize(available.width() * 95 / 100, available.height() * 92 / 100));
}

MainWindow::MainWindow(MainWindowOptions options, QWidget* parent)
    : QMainWindow(parent),
      options_(std::move(options)),
      scene_(new CanvasScene(&model_, this)),
      view_(new CanvasView(scene_)),
      step_view_(new StepView(&model_)),
      instruments_(new InstrumentsPanel),
      tabs_(new QTabWidget),
      palette_(new Palette),
      inspector_(new Inspector(&model_)),
      console_(new ConsoleWidget(&model_, options_.db)),
      notebook_(new NotebookView(&model_, options_.db)),
      run_log_(new QPlainTextEdit),
      status_label_(new QLabel),
      summary_label_(new QLabel),
      progress_(new QProgressBar) {
  setObjectName("mlstudio.main");
  // The model and, beside it, the step the trainer compiles from it (the teaching views).
  tabs_->setDocumentMode(true);
  tabs_->addTab(view_, "Model");
  tabs_->addTab(step_view_, "Training step");
  tabs_->setTabToolTip(
      1, "The forward, the backward autodiff generated and the optimised step, drawn as graphs");
  // Where no OpenGL context can be made (Qt's offscreen platform), the panel stays out of the
  // window: Qt 6.4 crashes showing a QOpenGLWidget there. Its data still flow.
  debugger_ = new Debugger(this, scene_, &model_);
  if (ImGuiHost::isSupported()) {
    tabs_->addTab(instruments_, "Instruments");
    tabs_->setTabToolTip(2, "Live curves, where memory goes, time per op, and the pre-flight estimate");
    // [debugger] Beside the dashboard: Debug > Health instruments fills it.
    tabs_->addTab(debugger_->healthPanel(), "Health");
    tabs_->setTabToolTip(3, "The run's health: gradient norms, update sizes, dead ReLUs, "
                            "weight and gradient histograms (Debug > Health instruments)");
  }
  // Lua files open as closable tabs after these (openScript); these stay.
  tabs_->setTabsClosable(true);
  for (int i = 0; i < tabs_->count(); ++i) {
    tabs_->tabBar()->setTabButton(i, QTabBar::RightSide, nullptr);
    tabs_->tabBar()->setTabButton(i, QTabBar::LeftSide, nullptr);
  }
  connect(tabs_, &QTabWidget::tabCloseRequested, this, [this](int i) {
    if (auto* s = qobject_cast<ScriptEditor*>(tabs_->widget(i))) (void)closeScript(s);
  });
  setCentralWidget(tabs_);
  buildInstruments();
  connect(scene_, &CanvasScene::frameRenameRequested, this, [this](int index) {
    if (!options_.interactive || index >= static_cast<int>(scene_->frameItems().size())) return;
    bool ok = false;
    const QString t =
        QInputDialog::getText(this, "Comment frame", "Title:", QLineEdit::Normal,
                              scene_->frameItems()[static_cast<size_t>(index)]->title(), &ok);
    if (ok) (void)scene_->renameFrame(index, t);
  });
  connect(step_view_, &StepView::nodeActivated, this, [this](const QString& id) {
    scene_->selectNode(id.toStdString());
    showStatus("IR node from '" + id + "' (selected on the Model tab)");
  });
  // 1440x900 where it fits; on a smaller screen, or one scaled up (high DPI), the screen's
  // free area less a margin, so the title bar and the status bar stay on screen.
  resize(initial_window_size(screen() ? screen()->availableGeometry().size() : QSize()));
  buildDocks();
  buildActions();
  buildToolbar();

  statusBar()->addWidget(status_label_, 1);
  progress_->setMaximumWidth(260);
  progress_->setTextVisible(true);
  progress_->hide();
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(summary_label_);

  connect(scene_, &CanvasScene::message, this, &MainWindow::showStatus);
  connect(inspector_, &Inspector::message, this, &MainWindow::showStatus);
  connect(scene_, &CanvasScene::selectionChangedTo, inspector_, &Inspector::showNode);
  connect(palette_, &Palette::activated, this, [this](const std::string& type) {
    (void)view_->dropNodeType(type, view_->mapToScene(view_->viewport()->rect().center()));
  });
  connect(&model_, &DocumentModel::changed, this, [this] {
    updateTitle();
    syncToolbar();
    const auto& a = model_.analysis();
    summary_label_->setText(QString("%1 nodes · %2 params%3")
                                .arg(model_.doc().nodes.size())
                                .arg(a.total_params)
                                .arg(a.complete() ? "" : " · draft"));
  });
  connect(&model_, &DocumentModel::datasetChanged, this, &MainWindow::readDataset);
  connect(model_.undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);

  connect(&trainer_, &TrainController::message, this, [this](const QString& m) {
    run_log_->appendPlainText(m);
    showStatus(m);
  });
  connect(&trainer_, &TrainController::progress, this, [this](const ProgressInfo& i) {
    progress_->show();
    progress_->setRange(0, static_cast<int>(i.batches * i.epochs));
    progress_->setValue(static_cast<int>((i.epoch - 1) * i.batches + i.batch));
    progress_->setFormat(
        QString("epoch %1/%2 · loss %3").arg(i.epoch).arg(i.epochs).arg(i.loss, 0, 'g', 4));
    // Steps reported before a pause arrive after it: the status says what the run does now.
    status_label_->setText(QString("%1: epoch %2/%3, step %4/%5, loss %6, %7 samples/s, ETA %8")
                               .arg(trainer_.paused() ? "paused" : "training")
                               .arg(i.epoch)
                               .arg(i.epochs)
                               .arg(i.batch)
                               .arg(i.batches)
                               .arg(i.loss, 0, 'g', 4)
                               .arg(i.samples_per_s, 0, 'f', 0)
                               .arg(QString::fromStdString(format_duration(i.eta_s))));
  });
  connect(&trainer_, &TrainController::epochEnded, this, [this](const EpochReport& r) {
    QString line = QString("epoch %1/%2: train loss %3 (%4 s)")
                       .arg(r.epoch)
                       .arg(r.epochs)
                       .arg(r.train_loss, 0, 'g', 4)
                       .arg(r.seconds, 0, 'f', 2);
    if (r.has_validation)
      line += ", validation " + QString::fromStdString(runner::eval_text(r.validation));
    run_log_->appendPlainText(line);
  });
  // [debugger] Resume a paused run; the debugger's messages in the status bar.
  connect(debugger_, &Debugger::resumeRequested, this,
          [this](int64_t run, const BreakHit& hit) { (void)resumePaused(run, hit); });
  connect(debugger_, &Debugger::forkRequested, this, [this](int64_t run, const QString& ck) {
    (void)forkPaused(run, ck.toStdString());
  });
  connect(debugger_, &Debugger::status, this, &MainWindow::showStatus);
  connect(&trainer_, &TrainController::finished, this, [this](const runner::RunOutcome& o) {
    last_run_id_ = o.run_id;
    QString line = QString("run %1 %2: final loss %3")
                       .arg(o.run_id)
                       .arg(QString::fromStdString(o.status))
                       .arg(o.result.final_loss, 0, 'g', 4);
    if (o.result.has_test)
      line += ", test " + QString::fromStdString(runner::eval_text(o.result.test));
    line += ", recorded in " + QString::fromStdString(o.db);
    // The log has the run session's summary, the line --run and mls.train print.
    run_log_->appendPlainText(QString::fromStdString(runner::summary_line(o)));
    if (const std::string e = runner::estimate_line(o); !e.empty())
      run_log_->appendPlainText(QString::fromStdString(e));
    scene_->setRunInsights(run_insights(o));
    instruments_->setPhase(o.status == "finished" ? RunPhase::Done : RunPhase::Stopped);
    if (!o.inspect_note.empty())
      run_log_->appendPlainText(QString::fromStdString("note: " + o.inspect_note));
    showStatus(line);
    // [debugger] A breakpoint paused the run: the node at fault on the canvas, the status bar
    // says where.
    if (debugger_->runEnded(o, model_.path())) {
      instruments_->setPhase(RunPhase::Paused);
      tabs_->setCurrentWidget(view_);
      showStatus(paused_status(*o.result.breakpoint), true);
    }
    progress_->hide();
    updateRunState();
  });
  connect(&trainer_, &TrainController::failed, this, [this](const QString& m) {
    run_log_->appendPlainText("error: " + m);
    showStatus(m, true);
    instruments_->setPhase(is_divergence(m) ? RunPhase::Diverged : RunPhase::Failed);
    progress_->hide();
    updateRunState();
  });

  autosave_timer_.setInterval(30'000);
  connect(&autosave_timer_, &QTimer::timeout, this, &MainWindow::autosave);
  autosave_timer_.start();

  QSettings s;
  setDark(s.value("view/dark", true).toBool());
  newFromTemplate("");
  updateRunState();
  if (options_.interactive) QTimer::singleShot(0, this, &MainWindow::offerRecovery);
}

MainWindow::~MainWindow() {
  // An export's worker posts its messages to this window: let it end first.
  if (export_watcher_) export_watcher_->waitForFinished();
  // An orderly exit leaves no autosave behind to recover.
  QFile::remove(autosavePath());
  // The scene, docks and console read model_: delete them while it is still alive (Qt
  // would delete children only after the members are gone).
  scene_->disconnect();
  // A panel left out of the window (no OpenGL) has no parent to delete it; one in the tabs
  // goes with them below.
  if (!instruments_->parent()) delete instruments_;
  if (!debugger_->healthPanel()->parent()) delete debugger_->healthPanel();
  delete takeCentralWidget();
  delete scene_;
  for (QDockWidget* d : findChildren<QDockWidget*>(Qt::FindDirectChildrenOnly)) delete d;
}

void MainWindow::buildDocks() {
  auto* pal = new QDockWidget("Nodes", this);
  pal->setObjectName("dock.palette");
  pal->setWidget(palette_);
  addDockWidget(Qt::LeftDockWidgetArea, pal);
  auto* ins = new QDockWidget("Inspector", this);
  ins->setObjectName("dock.inspector");
  ins->setWidget(inspector_);
  addDockWidget(Qt::RightDockWidgetArea, ins);
  // The notebook beside the canvas: its cells and the graph are seen together.
  // View cells: live pictures of the project. "graph": the canvas's scene (the same scene,
  // read only); "step": the training step as the trainer compiles it; "dashboard": the run
  // the editor started last (Train, the console or a cell); "memory": that run's bytes by
  // category, else the pre-flight estimate's.
  notebook_->setViewFactory([this](const std::string& view) -> QWidget* {
    if (view == "step") {
      auto* v = new StepView(&model_);
      v->setMinimumHeight(320);
      return v;
    }
    if (view == "dashboard") {
      auto* d = new RunDashboard;
      d->follow([this] { return std::shared_ptr<const Telemetry>(telemetry_); });
      return d;
    }
    if (view == "memory") {
      auto* m = new MemoryView;
      m->follow([this] { return std::shared_ptr<const Telemetry>(telemetry_); },
                [this] { return instruments_->preflight(); });
      return m;
    }
    if (view != "graph") return nullptr;
    auto* v = new QGraphicsView(scene_);
    v->setInteractive(false);
    v->setRenderHint(QPainter::Antialiasing);
    v->setMinimumHeight(260);
    v->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    v->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto fit = [v, this] {
      v->fitInView(scene_->itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt::KeepAspectRatio);
    };
    connect(&model_, &DocumentModel::changed, v, fit);
    QTimer::singleShot(0, v, fit);
    return v;
  });
  auto* nb = new QDockWidget("Notebook", this);
  nb->setObjectName("dock.notebook");
  nb->setWidget(notebook_);
  addDockWidget(Qt::RightDockWidgetArea, nb);
  // Tabbed with the Inspector, so the cells have the dock's height; in front when the opened
  // project has cells.
  tabifyDockWidget(ins, nb);
  // Step through one training step node by node on the canvas (issue 27).
  auto* st = new QDockWidget("Step through", this);
  st->setObjectName("dock.step_through");
  st->setWidget(new StepThroughView(&model_, scene_));
  addDockWidget(Qt::RightDockWidgetArea, st);
  tabifyDockWidget(ins, st);
  ins->raise();
  connect(&model_, &DocumentModel::reloaded, nb, [this, nb, ins] {
    (model_.doc().notebook.cells.empty() ? static_cast<QWidget*>(ins) : nb)->raise();
  });
  auto* bottom = new QDockWidget("Console", this);
  bottom->setObjectName("dock.console");
  auto* tabs = new QTabWidget;
  tabs->addTab(console_, "Lua console");
  run_log_->setReadOnly(true);
  run_log_->setObjectName("run.log");
  tabs->addTab(run_log_, "Run log");
  bottom->setWidget(tabs);
  addDockWidget(Qt::BottomDockWidgetArea, bottom);
  // [run browser] Every run of the experiment database (issue 28: editor/run_browser.h),
  // tabbed with the console; the database is opened when the dock is first shown.
  auto* runs = new RunBrowser;
  runs->setDatabase(options_.db);
  auto* rd = new QDockWidget("Runs", this);
  rd->setObjectName("dock.runs");
  rd->setWidget(runs);
  addDockWidget(Qt::BottomDockWidgetArea, rd);
  tabifyDockWidget(bottom, rd);
  bottom->raise();
  connect(rd, &QDockWidget::visibilityChanged, runs, &RunBrowser::setActive);
  // The selected runs' curves on the dashboard, coloured as the browser says.
  connect(runs, &RunBrowser::curvesChanged, this,
          [this](const std::vector<RunCurves>& curves, const QString& legend) {
            instruments_->setRuns(curves);
            instruments_->setOverlayLegend(legend.toStdString());
            if (curves.empty() || tabs_->indexOf(instruments_) < 0) return;
            tabs_->setCurrentWidget(instruments_);
            instruments_->showTab("Dashboard");
          });
  // [/run browser]
  resizeDocks({pal, ins}, {230, 460}, Qt::Horizontal);
  resizeDocks({bottom}, {190}, Qt::Vertical);
}

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu("&File");
  QMenu* templates = file->addMenu("&New");
  const std::pair<const char*, const char*> kTemplates[] = {
      {"Empty project", ""},
      {"Logistic regression (two blobs)", "two-blobs-logistic.mls"},
      {"MLP (Fashion-MNIST)", "fashion-mnist-mlp.mls"},
      {"CNN (Fashion-MNIST)", "fashion-mnist-cnn.mls"},
      {"Residual CNN (Fashion-MNIST)", "fashion-mnist-resnet.mls"},
  };
  for (const auto& [label, f] : kTemplates) {
    QAction* a = templates->addAction(label);
    if (QString(f).isEmpty()) {
      a->setShortcut(QKeySequence::New);
      quick_.new_ = withIcon(a, "new");
    }
    connect(a, &QAction::triggered, this, [this, f = QString(f)] {
      if (maybeSave()) newFromTemplate(f);
    });
  }
  QAction* open = withIcon(file->addAction("&Open…", QKeySequence::Open), "open");
  quick_.open = open;
  connect(open, &QAction::triggered, this, [this] {
    if (!maybeSave()) return;
    const QString p = QFileDialog::getOpenFileName(
        this, "Open project", QString(),
        "Projects and ONNX models (*.mls *.onnx);;mlstudio projects (*.mls);;ONNX models (*.onnx)");
    if (!p.isEmpty()) (void)openFile(p);
  });
  recent_menu_ = file->addMenu("Open &Recent");
  rebuildRecentMenu();
  QAction* open_lua =
      file->addAction("Open &Lua file…", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  open_lua->setObjectName("file.open-lua");
  connect(open_lua, &QAction::triggered, this, [this] {
    const QString dir = model_.path().empty()
                            ? QString()
                            : QFileInfo(QString::fromStdString(model_.path())).absolutePath();
    const QString p =
        QFileDialog::getOpenFileName(this, "Open Lua file", dir, "Lua scripts (*.lua)");
    if (!p.isEmpty()) (void)openScript(p);
  });
  // The project folder's scripts, listed afresh each time the menu opens.
  scripts_menu_ = file->addMenu("Scri&pts");
  scripts_menu_->setObjectName("file.scripts");
  connect(scripts_menu_, &QMenu::aboutToShow, this, &MainWindow::rebuildScriptsMenu);
  rebuildScriptsMenu();
  QAction* save = withIcon(file->addAction("&Save", QKeySequence::Save), "save");
  quick_.save = save;
  connect(save, &QAction::triggered, this, [this] {
    QString p = QString::fromStdString(model_.path());
    if (p.isEmpty())
      p = QFileDialog::getSaveFileName(this, "Save project", "untitled.mls",
                                       "mlstudio projects (*.mls)");
    if (!p.isEmpty()) (void)saveTo(p);
  });
  QAction* save_as = file->addAction("Save &As…", QKeySequence::SaveAs);
  connect(save_as, &QAction::triggered, this, [this] {
    const QString p =
        QFileDialog::getSaveFileName(this, "Save project as", QString::fromStdString(model_.path()),
                                     "mlstudio projects (*.mls)");
    if (!p.isEmpty()) (void)saveTo(p);
  });
  file->addSeparator();
  file->addAction("&Export to ONNX…", QKeySequence(Qt::CTRL | Qt::Key_E), this, &MainWindow::showExportDialog);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu("&Edit");
  QAction* undo = withIcon(model_.undoStack()->createUndoAction(this, "&Undo"), "undo");
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = withIcon(model_.undoStack()->createRedoAction(this, "&Redo"), "redo");
  quick_.undo = undo;
  quick_.redo = redo;
  redo->setShortcut(QKeySequence::Redo);
  edit->addAction(undo);
  edit->addAction(redo);
  edit->addSeparator();
  edit->addAction("&Copy", QKeySequence::Copy, scene_, &CanvasScene::copySelection);
  edit->addAction("&Paste", QKeySequence::Paste, scene_, &CanvasScene::paste);
  edit->addAction("Cu&t", QKeySequence::Cut, this, [this] {
    scene_->copySelection();
    scene_->deleteSelection();
  });
  QAction* del = edit->addAction("&Delete", scene_, &CanvasScene::deleteSelection);
  del->setShortcuts({QKeySequence::Delete, QKeySequence(Qt::Key_Backspace)});
  edit->addAction("Select &All", QKeySequence::SelectAll, this, [this] {
    for (QGraphicsItem* it : scene_->items()) it->setSelected(true);
  });
  edit->addSeparator();
  quick_.frame = withIcon(
      edit->addAction("Add comment &frame", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M), this,
                      [this] {
                        scene_->addFrame("Comment",
                                         view_->mapToScene(view_->viewport()->rect().center()));
                      }),
      "frame");
  edit->addAction("&Find node type", QKeySequence::Find, this, [this] {
    palette_->search()->setFocus();
    palette_->search()->selectAll();
  });

  QMenu* view = menuBar()->addMenu("&View");
  withIcon(view->addAction("Zoom &In", QKeySequence::ZoomIn, this, [this] { view_->zoomBy(1.2); }),
           "zoom-in");
  withIcon(
      view->addAction("Zoom &Out", QKeySequence::ZoomOut, this, [this] { view_->zoomBy(1 / 1.2); }),
      "zoom-out");
  quick_.fit = withIcon(
      view->addAction("&Fit", QKeySequence(Qt::CTRL | Qt::Key_0), view_, &CanvasView::fitAll),
      "fit");
  quick_.layout = withIcon(view->addAction("&Auto-layout", QKeySequence(Qt::CTRL | Qt::Key_L), this,
                                           [this] {
                                             scene_->autoLayout();
                                             view_->fitAll();
                                           }),
                           "layout");
  view->addSeparator();
  view->addAction("&Model", QKeySequence(Qt::CTRL | Qt::Key_1), this, &MainWindow::showModelTab);
  quick_.step = withIcon(view->addAction("Step: &forward graph", QKeySequence(Qt::CTRL | Qt::Key_2),
                                         this, [this] { showStepTab(StepView::kForward); }),
                         "step");
  view->addAction("Step: &backward graph (autodiff)", QKeySequence(Qt::CTRL | Qt::Key_3), this,
                  [this] { showStepTab(StepView::kBackward); });
  view->addAction("Step: &optimised (after the passes)", QKeySequence(Qt::CTRL | Qt::Key_4), this,
                  [this] { showStepTab(-1); });
  view->addSeparator();
  dark_act_ = withIcon(view->addAction("&Dark theme"), "theme");
  dark_act_->setCheckable(true);
  connect(dark_act_, &QAction::toggled, this, &MainWindow::setDark);
  view->addSeparator();
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
  // [run browser] Brings the Runs dock up (its toggle above would close one behind a tab).
  view->addAction("Runs &browser", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), this, [this] {
    if (auto* rd = findChild<QDockWidget*>("dock.runs")) {
      rd->show();
      rd->raise();
      // The table and its views below want more than the console's height.
      if (!rd->isFloating() && rd->height() < 360) resizeDocks({rd}, {420}, Qt::Vertical);
    }
  });

  QMenu* run = menuBar()->addMenu("&Run");
  train_act_ =
      withIcon(run->addAction("&Train", train_key(), this, [this] { (void)train(); }), "train");
  pause_act_ = withIcon(run->addAction("&Pause", pause_key()), "pause");
  pause_act_->setCheckable(true);
  connect(pause_act_, &QAction::toggled, this, [this](bool on) {
    trainer_.setPaused(on);
    if (!trainer_.running()) return;
    instruments_->setPhase(on ? RunPhase::Paused : RunPhase::Training);
    showStatus(on ? "paused between steps (Pause again to go on)" : "training");
  });
  stop_act_ = withIcon(run->addAction("&Stop", stop_key(), this,
                                      [this] {
                                        trainer_.stop();
                                        showStatus("stopping after this step…");
                                      }),
                       "stop");

  // [debugger] Breakpoints, health instruments and Compare devices (editor/debugger.h).
  QMenu* debug = menuBar()->addMenu("&Debug");
  debug->setObjectName("menu.debug");
  debugger_->populate(debug);

  QMenu* help = menuBar()->addMenu("&Help");
  help->addAction("&About mlstudio", this, [this] {
    QMessageBox::about(this, "mlstudio",
                       "<b>mlstudio " MLSTUDIO_VERSION
                       "</b><br>Build, train and inspect neural networks.<br><br>"
                       "Drag nodes from the palette, link outputs to inputs, press Train (" +
                           train_key().toString(QKeySequence::NativeText) +
                           ").<br>"
                           "Headless: <code>mlstudio --run project.mls</code>");
  });
}

QAction* MainWindow::withIcon(QAction* a, const char* name) {
  icons_.emplace_back(a, name);
  a->setIcon(icon(name));
  return a;
}

void MainWindow::applyIcons() {
  // Icons are drawn in the palette's text colour: again after a theme change.
  for (auto& [a, name] : icons_) a->setIcon(icon(name));
  palette_->applyIcons();
  setWindowIcon(app_icon());
}

void MainWindow::buildToolbar() {
  // Files, history and the canvas: icons only (the tooltips name them and their keys).
  QToolBar* quick = addToolBar("Project");
  quick->setObjectName("toolbar.project");
  quick->setMovable(false);
  for (QAction* a :
       {quick_.new_, quick_.open, quick_.save, (QAction*)nullptr, quick_.undo, quick_.redo,
        (QAction*)nullptr, quick_.fit, quick_.layout, quick_.frame, quick_.step}) {
    if (!a) {
      quick->addSeparator();
      continue;
    }
    quick->addAction(a);
    const QString keys = a->shortcut().toString(QKeySequence::NativeText);
    a->setToolTip(a->text().remove('&').remove(QChar(0x2026)) +
                  (keys.isEmpty() ? QString() : " (" + keys + ")"));
  }
  QToolBar* tb = addToolBar("Run");
  tb->setObjectName("toolbar.run");
  tb->setMovable(false);
  tb->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  // Train, Pause and Stop first: on a narrow (or high-DPI) window the settings are the ones
  // that go to the overflow menu.
  tb->addAction(train_act_);
  tb->addAction(pause_act_);
  tb->addAction(stop_act_);
  tb->addAction(debugger_->menu()->nanAction());  // [debugger] the toggle most runs want
  tb->addSeparator();
  tb->addWidget(new QLabel(" Device "));
  device_ = new QComboBox;
  device_->setObjectName("run.device");
  device_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  device_->setMinimumContentsLength(10);
  // The backends this build registered, then the known kinds it lacks (greyed out).
  const std::vector<std::string> have = backend_registry().names();
  for (const std::string& d : have) device_->addItem(QString::fromStdString(d));
  for (const char* d : {"cpu", "vulkan", "cuda"}) {
    if (std::find(have.begin(), have.end(), d) != have.end()) continue;
    device_->addItem(QString(d) + " (not in this build)");
    auto* m = static_cast<QStandardItemModel*>(device_->model());
    m->item(device_->count() - 1)->setEnabled(false);
  }
  tb->addWidget(device_);
  tb->addSeparator();
  tb->addWidget(new QLabel(" Epochs "));
  epochs_ = new QSpinBox;
  epochs_->setRange(1, 100000);
  epochs_->setObjectName("toolbar.epochs");
  tb->addWidget(epochs_);
  tb->addWidget(new QLabel("  Batch "));
  batch_ = new QSpinBox;
  batch_->setRange(1, 1 << 20);
  batch_->setObjectName("toolbar.batch");
  tb->addWidget(batch_);
  tb->addWidget(new QLabel("  LR "));
  lr_ = new RealSpinBox;  // any rate the document takes, none capped
  lr_->setSingleStep(0.001);
  lr_->setObjectName("toolbar.lr");
  tb->addWidget(lr_);
  for (QAbstractSpinBox* s : std::initializer_list<QAbstractSpinBox*>{epochs_, batch_, lr_})
    s->setKeyboardTracking(false);
  // The toolbar edits the project's training settings (undoable), so a saved project
  // reproduces the GUI's run with `mlstudio --run`.
  auto push = [this](nlohmann::json patch) {
    if (syncing_toolbar_) return;
    if (auto r = model_.push(nodes::make_set_training(model_.doc(), patch)); !r)
      showStatus(QString::fromStdString(r.error().message), true);
  };
  connect(epochs_, &QSpinBox::valueChanged, this, [push](int v) { push({{"epochs", v}}); });
  connect(batch_, &QSpinBox::valueChanged, this, [push](int v) { push({{"batch_size", v}}); });
  connect(lr_, &QDoubleSpinBox::valueChanged, this, [push](double v) {
    push({{"optimizer", {{"lr", v}}}});
  });
}

void MainWindow::syncToolbar() {
  syncing_toolbar_ = true;
  const nodes::TrainingSpec& t = model_.doc().training;
  epochs_->setValue(static_cast<int>(t.epochs));
  batch_->setValue(static_cast<int>(t.batch_size));
  lr_->setValue(t.optimizer.lr);
  syncing_toolbar_ = false;
}

void MainWindow::setDark(bool dark) {
  apply_theme(dark);
  applyIcons();
  if (dark_act_ && dark_act_->isChecked() != dark) dark_act_->setChecked(dark);
  QSettings().setValue("view/dark", dark);
  scene_->update();
}

void MainWindow::showStatus(const QString& text, bool error) {
  status_label_->setText(text);
  status_label_->setStyleSheet(error ? "color: #e05555;" : "");
  status_label_->setToolTip(text);
}

QString MainWindow::statusText() const {
  return status_label_->text();
}

void MainWindow::updateTitle() {
  const QString name = model_.path().empty()
                           ? "untitled"
                           : QFileInfo(QString::fromStdString(model_.path())).fileName();
  setWindowTitle(name + (model_.isModified() ? " •" : "") + " — mlstudio");
}

void MainWindow::updateRunState() {
  const bool running = trainer_.running();
  train_act_->setEnabled(!running);
  pause_act_->setEnabled(running);
  stop_act_->setEnabled(running);
  if (!running && pause_act_->isChecked()) pause_act_->setChecked(false);
}

void MainWindow::readDataset() {
  // Reading the data (headers, or a whole small file) happens off the GUI thread; only the
  // newest request is applied.
  const int request = ++dataset_request_;
  const data::DatasetSpec spec = model_.doc().dataset;
  const std::string base = model_.path().empty()
                               ? std::filesystem::current_path().string()
                               : std::filesystem::absolute(model_.path()).parent_path().string();
  // The message before ("opened P.mls") comes back when the data is read, unless another
  // one took the status bar meanwhile.
  const QString reading = "reading the dataset…", before = status_label_->text();
  const bool before_error = !status_label_->styleSheet().isEmpty();
  showStatus(reading);
  auto* watcher = new QFutureWatcher<Result<nodes::InferContext>>(this);
  connect(watcher, &QFutureWatcher<Result<nodes::InferContext>>::finished, this,
          [this, watcher, request, reading, before, before_error] {
            watcher->deleteLater();
            if (request != dataset_request_) return;
            Result<nodes::InferContext> r = watcher->result();
            if (r) {
              model_.setDataContext(*r);
              if (status_label_->text() == reading)
                showStatus(before.isEmpty() || before == reading ? QString("ready") : before,
                           before_error);
            } else {
              model_.setDataContext(std::nullopt, QString::fromStdString(r.error().message));
              showStatus("dataset: " + QString::fromStdString(r.error().message), true);
            }
          });
  watcher->setFuture(QtConcurrent::run([spec, base]() -> Result<nodes::InferContext> {
    auto splits = data::open_dataset(spec, base, 0, /*prefetch=*/false);
    if (!splits) return splits.error();
    return nodes::InferContext{
        splits->sample_shape, splits->num_classes,
        splits->target_kind == TargetKind::Values ? splits->target_shape : Shape{}};
  }));
}

bool MainWindow::train() {
  return startRun(0, std::nullopt);
}

bool MainWindow::resumePaused(int64_t run_id, const BreakHit& skip) {
  return startRun(run_id, skip);
}

bool MainWindow::forkPaused(int64_t run_id, const std::string& checkpoint) {
  return startRun(0, std::nullopt, runner::RunOptions::Fork{run_id, checkpoint});
}

bool MainWindow::startRun(int64_t resume, const std::optional<BreakHit>& skip,
                          const std::optional<runner::RunOptions::Fork>& fork) {
  if (trainer_.running()) return false;
  const auto& a = model_.analysis();
  if (!a.complete()) {
    QString why = !a.problems.empty() ? QString::fromStdString(a.problems[0])
                                      : "some nodes have no shape yet";
    for (const auto& [id, n] : a.nodes)
      if (!n.error.empty()) {
        why = QString::fromStdString("node '" + id + "': " + n.error);
        scene_->selectNode(id);
        break;
      }
    showStatus("cannot train yet: " + why, true);
    return false;
  }
  // The run trains what the canvas shows, unsaved edits included: the document goes to the
  // run session as it is held here, and the user's file is neither saved nor read.
  runner::RunRequest req;
  req.project.document = std::make_shared<const nodes::Document>(model_.doc());
  req.project.path = model_.path();
  req.inspect = true;  // per-node time and output statistics, drawn on the canvas afterwards
  // The instruments follow the run: a fresh feed, and the pre-flight estimate first.
  telemetry_ = std::make_shared<Telemetry>();
  req.telemetry = telemetry_.get();
  req.preflight = true;
  instruments_->setLive(telemetry_);
  debugger_->arm(req, telemetry_, skip);
  if (resume > 0) req.resume = resume;
  req.fork = fork;
  req.db = options_.db;
  const QString name = model_.path().empty() ? QString("the untitled project")
                                             : QString::fromStdString(model_.path());
  run_log_->appendPlainText(
      (resume > 0 ? QString("resuming run %1 of ").arg(resume)
       : fork     ? QString("forking run %1 from its last checkpoint before the breakpoint, training ").arg(fork->parent)
                  : QString("training ")) +
          name +
      (model_.isModified() ? " (unsaved edits included)" : "") + " (runs in " +
      QString::fromStdString(req.db) + ")");
  const bool ok = trainer_.start(req);
  updateRunState();
  return ok;
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (!maybeSave()) return e->ignore();
  if (options_.interactive)
    for (ScriptEditor* s : scripts())
      if (!s->maybeClose()) return e->ignore();
  trainer_.stop();
  e->accept();
}

void MainWindow::showModelTab() {
  tabs_->setCurrentWidget(view_);
}

void MainWindow::showStepTab(int stage) {
  tabs_->setCurrentWidget(step_view_);
  if (stage < 0)
    step_view_->showOptimised();
  else
    step_view_->showStage(stage);
}

}  // namespace mls::editor
