// [SECTION] construction   the toolbar, the session on the open project
// [SECTION] document       cells follow the document; edits go through its commands
// [SECTION] running        one run at a time on a worker thread, Stop
#include "editor/notebook_view.h"

#include <QAction>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QScrollArea>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "engine/core/backend_registry.h"
#include "engine/core/check.h"
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
      scroll_(new QScrollArea),
      cells_box_(new QWidget),
      cells_layout_(new QVBoxLayout(cells_box_)) {
  setObjectName("notebook");
  // A notebook comes with a project file, which may be a stranger's: its cells run in the
  // sandbox (files only under the project's folder, no os.execute, a memory limit) unless the
  // user trusts it (the "Trust" action; dropped when another project opens).
  makeSession();

  auto add = [this](const QString& name, const QString& text, const QString& tip, auto fn) {
    QAction* a = toolbar_->addAction(text, this, fn);
    a->setObjectName("notebook." + name);
    a->setToolTip(tip);
    actions_[name] = a;
    return a;
  };
  add("add-lua", "+ Lua", "Add a Lua cell after the selected one",
      [this] { addCell(nodes::CellKind::Lua); });
  add("add-markdown", "+ Markdown", "Add a Markdown cell after the selected one",
      [this] { addCell(nodes::CellKind::Markdown); });
  add("delete", "Delete", "Delete the selected cell (Ctrl+Z restores it)",
      [this] { deleteSelected(); });
  add("add-view", "+ Graph", "Add a view cell: a live picture of the model graph",
      [this] { addViewCell("graph"); });
  toolbar_->addSeparator();
  add("run", "Run", "Run the selected cell and its dependents (Shift+Enter)",
      [this] { runSelected(); });
  add("run-all", "Run all", "Run every cell in dependency order (Ctrl+Shift+Enter)", [this] {
    runAll();
  })->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Return));
  add("run-to", "Run to here", "Run what the selected cell needs, then it",
      [this] { runToHere(); });
  add("restart", "Restart", "A fresh Lua state: every cell stale", [this] { restart(); });
  add("stop", "Stop", "Stop the running cell", [this] { stop(); })->setEnabled(false);
  toolbar_->addSeparator();
  QAction* lazy = add("lazy", "Lazy", "Mark dependents stale instead of running them",
                      [this] { setLazy(actions_["lazy"]->isChecked()); });
  lazy->setCheckable(true);
  QAction* od = add("on-demand", "Only when asked", "Run the selected cell only when asked",
                    [this] { setOnDemand(actions_["on-demand"]->isChecked()); });
  od->setCheckable(true);
  toolbar_->addSeparator();
  QAction* trust = add("trust", "Trust",
                       "Run this notebook's cells with your own rights: files anywhere, "
                       "os.execute, no memory limit. Off: they run in the sandbox, under the "
                       "project's folder. Only for notebooks you wrote or trust.",
                       [this] { setTrusted(actions_["trust"]->isChecked()); });
  trust->setCheckable(true);

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
  lay->addWidget(scroll_, 1);

  connect(&watcher_, &QFutureWatcher<std::vector<std::string>>::finished, this,
          &NotebookView::finished);
  connect(model_, &DocumentModel::changed, this, &NotebookView::syncFromDocument);
  // An opened project's saved outputs (P.outputs.json): shown, stale where the code or the
  // inputs changed since.
  connect(model_, &DocumentModel::reloaded, this, [this] {
    if (busy_) return;
    // Another project: trust was given to the one before, and the sandbox's root moves.
    if (trusted_ || sandboxRoot() != session_->host().options().root) {
      trusted_ = false;
      actions_["trust"]->setChecked(false);
      makeSession();
      shown_.clear();
    }
    if (model_->path().empty()) return;
    syncFromDocument();
    auto saved = lua::load_outputs(model_->path());
    if (!saved || !*saved) return;
    session_->restore_outputs(**saved);
    refreshOutputs();
  });
  syncFromDocument();
}

NotebookView::~NotebookView() {
  cancel_ = true;
  watcher_.waitForFinished();
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
  refreshOutputs();
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
}

void NotebookView::syncFromDocument() {
  const nodes::Document& doc = model_->doc();
  const bool graph_changed = doc.nodes != last_nodes_ || doc.links != last_links_;
  last_nodes_ = doc.nodes;
  last_links_ = doc.links;
  actions_["lazy"]->setChecked(notebook().lazy);
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
    for (const auto& c : notebook().cells) widgets_[QString::fromStdString(c.id)]->setCell(c);
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
  if (graph_changed && !notebook().cells.empty()) {
    // Lazy: marks the readers stale. Reactive: re-runs them on the worker.
    start([](lua::NotebookSession& s) { return s.mark_project_changed(); });
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
    if (c.kind == nodes::CellKind::Lua) w->setOutput(session_->output(c.id), session_->stale(c.id));
    w->setProblems(problems[c.id]);
  }
}

// [SECTION] running

bool NotebookView::start(Job job) {
  if (busy_) return false;
  cancel_ = false;
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
  if (pending_sync_) {
    pending_sync_ = false;
    if (pending_project_) last_nodes_.clear(), last_links_.clear();
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
  for (const char* name : {"run", "run-all", "run-to", "restart", "delete", "trust"})
    actions_[name]->setEnabled(!busy);
  Q_EMIT busyChanged(busy);
}

bool NotebookView::runCell(const QString& id) {
  select(id);
  return start([id = id.toStdString()](lua::NotebookSession& s) { return s.run(id); });
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

}  // namespace mls::editor
