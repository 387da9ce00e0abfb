// [SECTION] construction   the toolbar, the session on the open project
// [SECTION] document       cells follow the document; edits go through its commands
// [SECTION] running        one run at a time on a worker thread, Stop
// [SECTION] runs           a training cell's dashboard and run id, the saved outputs
#include "editor/notebook_view.h"

#include <QAction>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QScrollArea>
#include <QTemporaryDir>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <QMessageBox>
#include <QtConcurrent/QtConcurrentRun>

#include "engine/core/backend_registry.h"
#include "engine/core/check.h"
#include "nodes/document.h"
#include "nodes/notebook_edit.h"
#include "scripting/notebook/outputs.h"
#include "scripting/runtime.h"

namespace mls::editor {

namespace {

std::optional<size_t> index_of(const nodes::Notebook& nb, const std::string& id) {
  for (size_t i = 0; i < nb.cells.size(); ++i)
    if (nb.cells[i].id == id) return i;
  return std::nullopt;
}

const nodes::Cell* find_cell(const nodes::Notebook& nb, const std::string& id) {
  const auto i = index_of(nb, id);
  return i ? &nb.cells[*i] : nullptr;
}

}  // namespace

// [SECTION] construction

NotebookView::NotebookView(DocumentModel* model, const std::string& db_path, QWidget* parent)
    : QWidget(parent),
      model_(model),
      db_path_(db_path),
      bridge_(model),
      toolbar_(new QToolBar),
      run_bar_(new QToolBar),
      mode_bar_(new QToolBar),
      trust_state_(new QLabel),
      lab_goals_(new QLabel),
      scroll_(new QScrollArea),
      cells_box_(new QWidget),
      cells_layout_(new QVBoxLayout(cells_box_)) {
  setObjectName("notebook");
  // A notebook comes with a project file, which may be a stranger's: its cells run in the
  // sandbox (files only under the project's folder, no os.execute, a memory limit) unless the
  // user trusts it (the "Trust" action; dropped when another project opens).
  makeSession();

  // Three rows, so that every command is in sight in a narrow dock: the cells, the runs, and
  // the modes with the sandbox's state.
  QToolBar* bar = toolbar_;
  auto add = [this, &bar](const QString& name, const QString& text, const QString& tip, auto fn) {
    QAction* a = bar->addAction(text, this, fn);
    a->setObjectName("notebook." + name);
    a->setToolTip(tip);
    actions_[name] = a;
    return a;
  };
  add("add-lua", "+ Lua", "Add a Lua cell after the selected one",
      [this] { addCell(nodes::CellKind::Lua); });
  add("add-markdown", "+ Markdown", "Add a Markdown cell after the selected one",
      [this] { addCell(nodes::CellKind::Markdown); });
  // "+ View": a graph view cell on a click, the other views from its menu (its arrow).
  QAction* view = add("add-view", "+ View",
                      "Add a view cell: a live picture of the model graph (the arrow: the "
                      "training step, the dashboard of the latest run, its memory)",
                      [this] { addViewCell("graph"); });
  auto* views = new QMenu(this);
  views->setObjectName("notebook.views");
  for (const auto& [name, text] : {std::pair<const char*, const char*>{"graph", "Graph"},
                                   {"step", "Training step"},
                                   {"dashboard", "Dashboard"},
                                   {"memory", "Memory"}}) {
    QAction* a = views->addAction(text, this, [this, v = std::string(name)] { addViewCell(v); });
    a->setObjectName(QString("notebook.add-view-") + name);
    actions_[QString("add-view-") + name] = a;
  }
  if (auto* b = qobject_cast<QToolButton*>(toolbar_->widgetForAction(view))) {
    b->setMenu(views);
    b->setPopupMode(QToolButton::MenuButtonPopup);
  }
  add("delete", "Delete", "Delete the selected cell (Ctrl+Z restores it)",
      [this] { deleteSelected(); });
  QAction* up = add("move-up", "Move up", "Move the selected cell up (Alt+Up; Ctrl+Z: back)",
                    [this] { moveSelected(-1); });
  up->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Up));
  up->setIconText("↑");  // the toolbar is narrow in its dock: Run and Run all stay in sight
  QAction* down =
      add("move-down", "Move down", "Move the selected cell down (Alt+Down; Ctrl+Z: back)",
          [this] { moveSelected(+1); });
  down->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Down));
  down->setIconText("↓");
  bar = run_bar_;
  add("run", "Run", "Run the selected cell and its dependents (Shift+Enter)",
      [this] { runSelected(); });
  add("run-all", "Run all", "Run every cell in dependency order (Ctrl+Shift+Enter)", [this] {
    runAll();
  })->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Return));
  add("run-to", "Run to here", "Run what the selected cell needs, then it",
      [this] { runToHere(); });
  add("check", "Check my work",
      "A lab: run its checks (and the cells they need) and show which goals are met",
      [this] { checkMyWork(); });
  add("restart", "Restart", "A fresh Lua state: every cell stale", [this] { restart(); });
  add("stop", "Stop", "Stop the running cell", [this] { stop(); })->setEnabled(false);
  bar = mode_bar_;
  QAction* lazy = add("lazy", "Lazy", "Mark dependents stale instead of running them",
                      [this] { setLazy(actions_["lazy"]->isChecked()); });
  lazy->setCheckable(true);
  QAction* od = add("on-demand", "Only when asked", "Run the selected cell only when asked",
                    [this] { setOnDemand(actions_["on-demand"]->isChecked()); });
  od->setCheckable(true);
  // A lab's author marks the selected cell's part (nodes/lab.h); not in a student's copy.
  QAction* role = add("role", "Lab role", "A lab: what the selected cell is for students",
                      [] {});
  auto* roles = new QMenu(this);
  roles->setObjectName("notebook.roles");
  for (const auto& [r, text] :
       {std::pair{nodes::CellRole::Free, "Ordinary"}, {nodes::CellRole::Locked, "Locked"},
        {nodes::CellRole::Answer, "Answer (its text is the solution)"},
        {nodes::CellRole::Check, "Check (students can run it)"},
        {nodes::CellRole::HiddenCheck, "Hidden check (the grader only)"}}) {
    QAction* a = roles->addAction(text, this, [this, r = r] { setRole(r); });
    const std::string name(nodes::cell_role_name(r));
    a->setObjectName(QString::fromStdString("notebook.role-" + (name.empty() ? "free" : name)));
    a->setCheckable(true);
    actions_[QString::fromStdString("role-" + (name.empty() ? "free" : name))] = a;
  }
  if (auto* b = qobject_cast<QToolButton*>(mode_bar_->widgetForAction(role))) {
    b->setMenu(roles);
    b->setPopupMode(QToolButton::InstantPopup);
  }
  role->setVisible(false);
  mode_bar_->addSeparator();
  QAction* trust = add("trust", "Trust",
                       "Run this notebook's cells with your own rights: files anywhere, "
                       "os.execute, no memory limit. Off: they run in the sandbox, under the "
                       "project's folder. Only for notebooks you wrote or trust.",
                       [this] { setTrusted(actions_["trust"]->isChecked()); });
  trust->setCheckable(true);
  trust_state_->setObjectName("notebook.trust-state");
  trust_state_->setContentsMargins(6, 0, 6, 0);
  mode_bar_->addWidget(trust_state_);
  showTrust();

  // A click between the cells leaves them (Ctrl+Z is then the document's, not a cell's text).
  cells_box_->setObjectName("notebook.cells");
  cells_box_->setFocusPolicy(Qt::ClickFocus);
  cells_layout_->setContentsMargins(6, 6, 6, 6);
  cells_layout_->setSpacing(8);
  cells_layout_->addStretch(1);
  scroll_->setWidget(cells_box_);
  scroll_->setWidgetResizable(true);
  scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(0);
  lay->addWidget(toolbar_);
  lay->addWidget(run_bar_);
  lay->addWidget(mode_bar_);
  lab_goals_->setObjectName("notebook.lab-goals");
  lab_goals_->setWordWrap(true);
  lab_goals_->setTextFormat(Qt::RichText);
  lab_goals_->setContentsMargins(6, 4, 6, 4);
  lab_goals_->hide();
  lay->addWidget(lab_goals_);
  lay->addWidget(scroll_, 1);

  connect(&watcher_, &QFutureWatcher<std::vector<std::string>>::finished, this,
          &NotebookView::finished);
  connect(model_, &DocumentModel::changed, this, &NotebookView::syncFromDocument);
  // A cell's mls.train: a dashboard under it (the Instruments tab follows the same feed).
  connect(this, &NotebookView::liveRunStarted, this, &NotebookView::showLiveRun);
  // An opened project's saved outputs (P.outputs.json): shown, stale where the code or the
  // inputs changed since.
  connect(model_, &DocumentModel::reloaded, this, [this] {
    if (busy_) return;
    // Another project: trust was given to the one before, and the sandbox's root moves.
    if (trusted_ || sandboxRoot() != session_->host().options().root) {
      trusted_ = false;
      actions_["trust"]->setChecked(false);
      makeSession();
      showTrust();
      shown_.clear();
    }
    clearRuns();
    // Opening a project is not an edit of its graph: nothing re-runs (and the session is
    // free for restore_outputs below).
    last_model_ = nodes::model_text(model_->doc());
    session_->set_project_text(last_model_);
    if (model_->path().empty()) return;
    syncFromDocument();
    auto saved = lua::load_outputs(model_->path());
    if (!saved || !*saved) return;
    session_->restore_outputs(**saved);
    refreshOutputs();
  });
  last_model_ = nodes::model_text(model_->doc());  // the project as opened: not an edit
  session_->set_project_text(last_model_);
  syncFromDocument();
}

NotebookView::~NotebookView() {
  cancel_ = true;
  watcher_.waitForFinished();
  clearRuns();  // a box whose cell has no widget has no parent to delete it
}

std::string NotebookView::sandboxRoot() {
  if (!model_->path().empty())
    return QFileInfo(QString::fromStdString(model_->path())).absolutePath().toStdString();
  // An unsaved project has no folder: its cells get an empty one of their own.
  if (!scratch_) scratch_ = std::make_unique<QTemporaryDir>();
  return scratch_->path().toStdString();
}

void NotebookView::makeSession() {
  lua::ScriptOptions options;
  options.db_path = db_path_;
  options.sandbox = !trusted_;
  options.root = sandboxRoot();
  Backend* host = backend_registry().host();
  MLS_CHECK(host != nullptr, "the notebook needs the CPU backend registered");
  // The outputs shown stay (stale: nothing ran in the new state).
  std::map<std::string, lua::CellOutput> kept;
  if (session_)
    for (const auto& c : shown_)
      if (const lua::CellOutput* out = session_->output(c.id)) kept[c.id] = *out;
  session_ = std::make_unique<lua::NotebookSession>(*host, options);
  session_->set_project_text(last_model_);
  session_->set_lab(shown_lab_);
  session_->host().runtime().project = &bridge_;
  session_->host().runtime().new_telemetry = [this] {
    auto tm = std::make_shared<Telemetry>();
    QMetaObject::invokeMethod(
        this, [this, tm] { Q_EMIT liveRunStarted(tm); }, Qt::QueuedConnection);
    return tm;
  };
  session_->set_interrupt(&cancel_);
  session_->on_cell_started = [this](const std::string& id) {
    QMetaObject::invokeMethod(
        this,
        [this, id = QString::fromStdString(id)] {
          if (auto* w = cellWidget(running_)) w->setRunning(false);
          running_ = id;
          if (auto* w = cellWidget(id)) w->setRunning(true);
        },
        Qt::QueuedConnection);
  };
  if (!shown_.empty()) {
    session_->set_cells(shown_);
    session_->set_lazy(notebook().lazy);
    session_->restore_outputs(kept);
  }
}

void NotebookView::setTrusted(bool trusted) {
  if (busy_ || trusted == trusted_) {
    actions_["trust"]->setChecked(trusted_);
    return;
  }
  trusted_ = trusted;
  makeSession();
  showTrust();
  refreshOutputs();
}

void NotebookView::showTrust() {
  const QString root = QString::fromStdString(session_->host().options().root);
  trust_state_->setText(trusted_ ? "trusted: your rights" : "sandboxed");
  trust_state_->setToolTip(trusted_ ? "The cells run with your rights."
                                    : "The cells may read and write only under " + root +
                                          " (and read the dataset folders).");
  trust_state_->setStyleSheet(trusted_ ? "color: #c0392b;" : "color: #2e7d32;");
}

QWidget* NotebookView::buttonFor(const QString& name) const {
  QAction* a = action(name);
  if (!a) return nullptr;
  for (QToolBar* b : {toolbar_, run_bar_, mode_bar_})
    if (QWidget* w = b->widgetForAction(a)) return w;
  return nullptr;
}

QAction* NotebookView::action(const QString& name) const {
  auto it = actions_.find(name);
  return it == actions_.end() ? nullptr : it->second;
}

CellWidget* NotebookView::cellWidget(const QString& id) const {
  auto it = widgets_.find(id);
  return it == widgets_.end() ? nullptr : it->second;
}

QStringList NotebookView::cellIds() const {
  QStringList ids;
  for (const auto& c : shown_) ids << QString::fromStdString(c.id);
  return ids;
}

void NotebookView::select(const QString& id) {
  if (auto* w = cellWidget(selected_)) w->setLineWidth(1);
  selected_ = id;
  if (auto* w = cellWidget(id)) w->setLineWidth(2);
  const nodes::Cell* c = find_cell(notebook(), id.toStdString());
  actions_["on-demand"]->setChecked(c && c->on_demand);
  for (nodes::CellRole r : {nodes::CellRole::Free, nodes::CellRole::Locked, nodes::CellRole::Answer,
                            nodes::CellRole::Check, nodes::CellRole::HiddenCheck}) {
    const std::string name(nodes::cell_role_name(r));
    actions_[QString::fromStdString("role-" + (name.empty() ? "free" : name))]->setChecked(
        c && c->role == r);
  }
}

void NotebookView::setRole(nodes::CellRole role) {
  const nodes::Cell* c = find_cell(notebook(), selected_.toStdString());
  if (!c || c->role == role) return;
  // An answer starts from a placeholder; the cell's text stays the reference solution.
  const std::string starter = role == nodes::CellRole::Answer ? "-- your answer here" : "";
  auto r = model_->push(nodes::make_set_cell_role(model_->doc(), c->id, role, starter));
  if (!r) QMessageBox::warning(this, "Lab role", QString::fromStdString(r.error().message));
  select(selected_);
}

const nodes::Notebook& NotebookView::notebook() const {
  return model_->doc().notebook;
}

// [SECTION] document

void NotebookView::addViewCell(const std::string& view) {
  addCell({.kind = nodes::CellKind::View, .view = view});
}

void NotebookView::addCell(nodes::CellKind kind) {
  addCell(nodes::Cell{.kind = kind});
}

void NotebookView::addCell(nodes::Cell cell) {
  const nodes::CellKind kind = cell.kind;
  size_t at = notebook().cells.size();
  if (auto i = index_of(notebook(), selected_.toStdString())) at = *i + 1;
  if (kind == nodes::CellKind::Markdown && cell.source.empty())
    cell.source = "*Double-click to edit*";
  const size_t before = notebook().cells.size();
  // The id: a fresh one from the command (cell1, cell2, ...).
  if (!model_->push(nodes::make_add_cell(model_->doc(), at, std::move(cell)))) return;
  if (notebook().cells.size() != before + 1) return;
  const QString id = QString::fromStdString(notebook().cells[at].id);
  select(id);
  if (auto* w = cellWidget(id); w && w->editor() && kind == nodes::CellKind::Lua)
    w->editor()->setFocus();
}

bool NotebookView::moveSelected(int delta) {
  if (selected_.isEmpty() || busy_) return false;
  const std::string id = selected_.toStdString();
  const auto i = index_of(notebook(), id);
  if (!i) return false;
  const auto to = static_cast<std::ptrdiff_t>(*i) + delta;
  if (to < 0 || to >= static_cast<std::ptrdiff_t>(notebook().cells.size())) return false;
  if (!model_->push(nodes::make_move_cell(model_->doc(), id, static_cast<size_t>(to))))
    return false;
  select(selected_);
  // Out of the cells' text: Ctrl+Z is then the document's (it moves the cell back), and
  // Alt+Up / Alt+Down go on moving it.
  cells_box_->setFocus();
  if (auto* w = cellWidget(selected_)) scroll_->ensureWidgetVisible(w);
  return true;
}

void NotebookView::deleteSelected() {
  if (selected_.isEmpty() || busy_) return;
  const auto i = index_of(notebook(), selected_.toStdString());
  if (!i) return;
  if (!model_->push(nodes::make_remove_cell(model_->doc(), selected_.toStdString()))) return;
  const auto& cells = notebook().cells;
  select(cells.empty() ? QString()
                       : QString::fromStdString(cells[std::min(*i, cells.size() - 1)].id));
}

void NotebookView::setOnDemand(bool on) {
  const nodes::Cell* c = find_cell(notebook(), selected_.toStdString());
  if (!c || c->on_demand == on) return;
  (void)model_->push(nodes::make_set_cell_on_demand(model_->doc(), c->id, on));
}

void NotebookView::setLazy(bool lazy) {
  if (notebook().lazy != lazy)
    (void)model_->push(nodes::make_set_notebook_lazy(model_->doc(), lazy));
}

void NotebookView::setSource(const QString& id, const QString& source) {
  const nodes::Cell* c = find_cell(notebook(), id.toStdString());
  if (!c || c->source == source.toStdString()) return;
  (void)model_->push(nodes::make_set_cell_source(model_->doc(), c->id, source.toStdString()));
}

void NotebookView::rebuildWidgets() {
  // The run boxes outlive the widgets they sit in (a moved cell keeps its dashboard).
  for (auto& [id, r] : runs_) r.box->setParent(nullptr);
  for (auto& [id, w] : widgets_) {
    cells_layout_->removeWidget(w);
    w->deleteLater();
  }
  widgets_.clear();
  const QString dir = model_->path().empty()
                          ? QString()
                          : QFileInfo(QString::fromStdString(model_->path())).absolutePath();
  int row = 0;
  for (const auto& c : notebook().cells) {
    auto* w = new CellWidget(c);
    w->setLocked(model_->doc().lab.student && !nodes::cell_editable(c.role));
    const QString id = QString::fromStdString(c.id);
    w->setBaseDir(dir);
    if (c.kind == nodes::CellKind::View && view_factory_) w->setViewWidget(view_factory_(c.view));
    w->setCompletions([this](const std::string& prefix) {
      // The Lua state belongs to the worker while a run is in flight.
      return busy_ ? std::vector<std::string>{} : session_->host().completions(prefix);
    });
    connect(w, &CellWidget::runRequested, this, [this](const QString& cid) { runCell(cid); });
    connect(w, &CellWidget::selected, this, [this](const QString& cid) { select(cid); });
    connect(w, &CellWidget::sourceEdited, this,
            [this](const QString& cid, const QString& src) { setSource(cid, src); });
    connect(w, &CellWidget::widgetChanged, this,
            [this](const QString& name, const nlohmann::json& value) {
              start([name = name.toStdString(), value](lua::NotebookSession& s) {
                return s.set_widget(name, value);
              });
            });
    cells_layout_->insertWidget(row++, w);
    widgets_[id] = w;
  }
  for (auto it = runs_.begin(); it != runs_.end();) {
    CellWidget* w = cellWidget(it->first);
    if (!w) {  // the cell is gone
      delete it->second.box;
      it = runs_.erase(it);
      continue;
    }
    static_cast<QVBoxLayout*>(w->layout())->addWidget(it->second.box);
    it->second.box->show();
    ++it;
  }
  if (auto* w = cellWidget(selected_)) w->setLineWidth(2);
}

void NotebookView::syncFromDocument() {
  const nodes::Document& doc = model_->doc();
  // The graph, the dataset or the training settings: what a cell that reads the project sees.
  std::string model = nodes::model_text(doc);
  const bool graph_changed = model != last_model_;
  last_model_ = std::move(model);
  actions_["lazy"]->setChecked(notebook().lazy);
  actions_["check"]->setVisible(doc.lab.present);
  actions_["role"]->setVisible(doc.lab.present && !doc.lab.student);
  if (!doc.lab.present) lab_goals_->hide();
  // Widgets: rebuilt when cells came, went or moved; else each shows its cell.
  std::vector<std::string> ids, shown_ids;
  for (const auto& c : notebook().cells) ids.push_back(c.id);
  for (const auto& [id, w] : widgets_) shown_ids.push_back(id.toStdString());
  bool same = ids.size() == widgets_.size();
  for (size_t i = 0; same && i < ids.size(); ++i) {
    auto* w = cellWidget(QString::fromStdString(ids[i]));
    same = w && cells_layout_->indexOf(w) == int(i) && w->cell().kind == notebook().cells[i].kind &&
           w->cell().view == notebook().cells[i].view;
  }
  if (!same)
    rebuildWidgets();
  else
    for (const auto& c : notebook().cells) {
      CellWidget* w = widgets_[QString::fromStdString(c.id)];
      w->setCell(c);
      w->setLocked(doc.lab.student && !nodes::cell_editable(c.role));
    }
  // The session: not while a run holds it; finished() syncs then.
  if (busy_) {
    pending_sync_ = true;
    pending_project_ = pending_project_ || graph_changed;
    return;
  }
  if (shown_ != notebook().cells) {
    session_->set_cells(notebook().cells);
    shown_ = notebook().cells;
  }
  session_->set_lazy(notebook().lazy);
  session_->set_project_text(last_model_);
  if (!(shown_lab_ == doc.lab)) {
    shown_lab_ = doc.lab;
    session_->set_lab(shown_lab_);
  }
  if (graph_changed && !notebook().cells.empty()) {
    // Lazy: marks the readers stale. Reactive: re-runs them on the worker.
    start([](lua::NotebookSession& s) { return s.mark_project_changed(); }, false);
    return;
  }
  refreshOutputs();
}

void NotebookView::refreshOutputs() {
  std::map<std::string, QStringList> problems;
  for (const auto& p : session_->problems())
    for (const auto& c : p.cells) problems[c] << QString::fromStdString(p.reason);
  for (const auto& c : shown_) {
    CellWidget* w = cellWidget(QString::fromStdString(c.id));
    if (!w) continue;
    if (c.kind == nodes::CellKind::Lua) {
      const lua::CellOutput* out = session_->output(c.id);
      w->setOutput(out, session_->stale(c.id));
      showRunId(QString::fromStdString(c.id), out ? out->run_id : 0);
    }
    w->setProblems(problems[c.id]);
  }
}

// [SECTION] running

bool NotebookView::start(Job job, bool save_outputs) {
  if (busy_) return false;
  save_after_ = save_outputs;
  cancel_ = false;
  trained_.clear();
  setBusy(true);
  watcher_.setFuture(QtConcurrent::run([this, job = std::move(job)] { return job(*session_); }));
  return true;
}

void NotebookView::finished() {
  last_run_.clear();
  for (const auto& id : watcher_.result()) last_run_ << QString::fromStdString(id);
  if (auto* w = cellWidget(running_)) w->setRunning(false);
  running_.clear();
  setBusy(false);
  // Before a pending sync, which may start the next job on the session.
  endLiveRuns();
  if (!last_run_.isEmpty() && save_after_) saveOutputs();
  if (checking_) {
    checking_ = false;
    showLabGoals();
  }
  if (pending_sync_) {
    pending_sync_ = false;
    if (pending_project_) last_model_.clear();
    pending_project_ = false;
    syncFromDocument();
  } else {
    refreshOutputs();
  }
  Q_EMIT runFinished(last_run_);
}

void NotebookView::setBusy(bool busy) {
  busy_ = busy;
  actions_["stop"]->setEnabled(busy);
  for (const char* name : {"run", "run-all", "run-to", "restart", "delete", "trust", "check"})
    actions_[name]->setEnabled(!busy);
  Q_EMIT busyChanged(busy);
}

bool NotebookView::runCell(const QString& id) {
  select(id);
  return start([id = id.toStdString()](lua::NotebookSession& s) { return s.run(id); });
}

bool NotebookView::checkMyWork() {
  if (!model_->doc().lab.present) return false;
  checking_ = start([](lua::NotebookSession& s) { return s.run_checks(false); });
  return checking_;
}

void NotebookView::showLabGoals() {
  QString html = "<b>Check my work</b>";
  int met = 0, shown = 0;
  for (const auto& g : session_->lab_goals()) {
    if (g.hidden && model_->doc().lab.student) continue;
    ++shown;
    met += g.passed;
    const QString mark = g.passed ? "<span style='color:#34a853'>✔ met</span>"
                                  : "<span style='color:#e8453c'>✘ not met</span>";
    html += "<br>" + mark + " &nbsp;<b>" + QString::fromStdString(g.id).toHtmlEscaped() +
            "</b>: " + QString::fromStdString(g.text).toHtmlEscaped() +
            (g.hidden ? " (hidden)" : "") + "<br>&nbsp;&nbsp;&nbsp;<span style='color:grey'>" +
            QString::fromStdString(g.message).toHtmlEscaped() + "</span>";
  }
  html += QString("<br><b>%1 of %2 goals met</b>").arg(met).arg(shown);
  lab_goals_->setText(html);
  lab_goals_->show();
}

bool NotebookView::runSelected() {
  return !selected_.isEmpty() && runCell(selected_);
}

bool NotebookView::runAll() {
  return start([](lua::NotebookSession& s) { return s.run_all(); });
}

bool NotebookView::runToHere() {
  if (selected_.isEmpty()) return false;
  return start([id = selected_.toStdString()](lua::NotebookSession& s) { return s.run_to(id); });
}

void NotebookView::restart() {
  if (busy_) return;
  session_->restart();
  refreshOutputs();
}

void NotebookView::stop() {
  cancel_ = true;
}

// [SECTION] runs

void NotebookView::clearRuns() {
  for (auto& [id, r] : runs_) delete r.box;
  runs_.clear();
  trained_.clear();
}

RunDashboard* NotebookView::dashboard(const QString& id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.dashboard;
}

QLabel* NotebookView::runLabel(const QString& id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.label;
}

NotebookView::RunBox& NotebookView::runBox(const QString& id) {
  RunBox& r = runs_[id];
  if (r.box) return r;
  r.box = new QWidget;
  r.box->setObjectName("cell.run");
  auto* lay = new QVBoxLayout(r.box);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(2);
  r.label = new QLabel;
  r.label->setObjectName("cell.run.id");
  r.label->setStyleSheet("color: #555; font-size: 9pt;");
  r.label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  r.label->hide();
  lay->addWidget(r.label);
  if (CellWidget* w = cellWidget(id)) static_cast<QVBoxLayout*>(w->layout())->addWidget(r.box);
  return r;
}

void NotebookView::showRunId(const QString& id, int64_t run_id) {
  if (run_id == 0 && !runs_.count(id)) return;
  RunBox& r = runBox(id);
  r.label->setText(run_id ? QString("trained: run #%1 (mlstudio runs show %1)").arg(run_id)
                          : QString());
  r.label->setVisible(run_id != 0);
}

void NotebookView::showLiveRun(std::shared_ptr<Telemetry> telemetry) {
  if (running_.isEmpty()) return;
  trained_.insert(running_);
  RunBox& r = runBox(running_);
  if (!r.dashboard) {
    r.dashboard = new RunDashboard;
    r.dashboard->setStoppable(true);
    connect(r.dashboard, &RunDashboard::stopRequested, this, &NotebookView::stop);
    r.box->layout()->addWidget(r.dashboard);
  }
  r.dashboard->setTelemetry(std::move(telemetry));
}

void NotebookView::endLiveRuns() {
  for (const QString& id : trained_) {
    RunDashboard* d = dashboard(id);
    if (!d) continue;
    const lua::CellOutput* out = session_->output(id.toStdString());
    RunDashboard::End how = RunDashboard::End::Done;
    if (out && !out->ok) {
      const std::shared_ptr<const Telemetry>& tm = d->telemetry();
      const bool all_epochs = tm && tm->planned_epochs.load() > 0 &&
                              static_cast<int64_t>(tm->epochs.size()) >= tm->planned_epochs.load();
      // Stop: "mls.train: interrupted after N steps"; a cell that failed after its run ended
      // still trained to the end.
      if (out->error.find("interrupted") != std::string::npos)
        how = RunDashboard::End::Stopped;
      else if (!all_epochs)
        how = RunDashboard::End::Failed;
    }
    d->setEnded(how, out ? out->run_id : 0);
  }
  // A cell that ran without training no longer has a run to show.
  for (const QString& id : last_run_) {
    if (trained_.count(id)) continue;
    auto it = runs_.find(id);
    if (it == runs_.end() || !it->second.dashboard) continue;
    delete it->second.dashboard;
    it->second.dashboard = nullptr;
  }
  trained_.clear();
}

void NotebookView::saveOutputs() {
  if (model_->path().empty()) return;  // an unsaved project: nowhere beside it yet
  lua::SavedOutputs outputs;
  for (const auto& c : shown_)
    if (const lua::CellOutput* out = session_->output(c.id)) outputs[c.id] = *out;
  auto saved = lua::save_outputs(model_->path(), outputs);
  const QString path = QString::fromStdString(lua::outputs_path(model_->path()));
  outputs_error_ = saved ? QString() : QString::fromStdString(saved.error().message);
  // Shown above the cells until a write succeeds; the run itself is not undone.
  auto* notice = findChild<QLabel*>("notebook.notice", Qt::FindDirectChildrenOnly);
  if (!notice && !outputs_error_.isEmpty()) {
    notice = new QLabel(this);
    notice->setObjectName("notebook.notice");
    notice->setWordWrap(true);
    notice->setStyleSheet("color: #b00020; background: #fff0f0; padding: 2px;");
    static_cast<QVBoxLayout*>(layout())->insertWidget(1, notice);
  }
  if (notice) {
    notice->setText("The outputs were not saved: " + outputs_error_);
    notice->setVisible(!outputs_error_.isEmpty());
  }
  if (saved) Q_EMIT outputsSaved(path);
}

}  // namespace mls::editor
