// [SECTION] construction
// [SECTION] filter, columns, selection
// [SECTION] the selected runs' curves
// [SECTION] graph diff and parallel coordinates
// (the actions, Tag to Reproduce, are in run_browser_actions.cpp; the Lineage tab in
// run_lineage.cpp; the colours by a param in param_colours.cpp)
#include "editor/run_browser.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "editor/graph_diff_view.h"
#include "editor/parallel_coords.h"
#include "editor/run_table_model.h"
#include "engine/train/data_source.h"
#include "store/run_store.h"

namespace mls::editor {

namespace {

// A metric as a field: `metrics.KEY.AGG`, the key quoted when it holds a dot or a space.
std::string metric_field(const std::string& key, const char* agg) {
  const bool quote = key.find_first_of(". =<>!()'\"~") != std::string::npos;
  return "metrics." + (quote ? "`" + key + "`" : key) + "." + agg;
}

std::string param_field(const std::string& key) {
  const bool quote = key.find_first_of(". =<>!()'\"~") != std::string::npos;
  return "params." + (quote ? "`" + key + "`" : key);
}

const char* const kAttributes[] = {"id",       "name",        "status", "started",    "ended",
                                   "duration", "device",      "seed",   "world_size", "experiment",
                                   "parent",   "fork_step",   "sweep",  "trial",      "note",
                                   "project",  "project_hash"};

}  // namespace

// [SECTION] construction

RunBrowser::RunBrowser(QWidget* parent)
    : QWidget(parent),
      exe_(QCoreApplication::applicationFilePath()),
      model_(new RunTableModel(this)),
      table_(new QTableView),
      filter_(new QLineEdit),
      message_(new QLabel),
      columns_(new QToolButton),
      colour_by_(new QComboBox),
      objective_(new QComboBox),
      legend_bar_(new ColourLegend),
      lower_(new QTabWidget),
      log_(new QPlainTextEdit),
      parallel_(new ParallelCoords),
      diff_(new GraphDiffView),
      lineage_(new QTreeWidget) {
  setObjectName("runs.browser");
  // Tabbed with the console: the dock area must not grow to what the table and its views
  // below would like at least (the splitter lets them shrink).
  setMinimumSize(240, 120);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  auto* top = new QHBoxLayout;
  filter_->setObjectName("runs.filter");
  filter_->setPlaceholderText(
      "filter, then Enter: params.lr < 0.01 AND (status = 'finished' OR tags.keep)");
  filter_->setClearButtonEnabled(true);
  filter_->setToolTip(
      "Fields: id name status started ended duration device seed sweep trial note ...,\n"
      "params.KEY, metrics.KEY[.latest|min|max|best|count|step], tags.KEY.\n"
      "AND, OR, NOT, parentheses; = != < <= > >= LIKE.");
  top->addWidget(filter_, 1);
  columns_->setObjectName("runs.columns");
  columns_->setText("Columns");
  columns_->setPopupMode(QToolButton::InstantPopup);
  columns_->setMenu(new QMenu(columns_));
  top->addWidget(columns_);
  top->addWidget(new QLabel("colour by"));
  colour_by_->setObjectName("runs.colour_by");
  colour_by_->addItem("(none)", QString());
  colour_by_->setToolTip("The param that colours the selected runs' curves on the dashboard");
  colour_by_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  top->addWidget(colour_by_);
  top->addWidget(legend_bar_);
  layout->addLayout(top);

  message_->setObjectName("runs.message");
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->hide();
  layout->addWidget(message_);

  table_->setObjectName("runs.table");
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(false);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  // Fixed row heights: 10,000 rows cost nothing to lay out.
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->horizontalHeader()->setDefaultSectionSize(120);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSortIndicator(0, Qt::DescendingOrder);  // newest first
  table_->setSortingEnabled(true);

  auto* actions = new QHBoxLayout;
  auto add_button = [&](const QString& name, const QString& text, const QString& tip,
                        void (RunBrowser::*slot)()) {
    auto* b = new QPushButton(text);
    b->setObjectName("runs." + name);
    b->setToolTip(tip);
    connect(b, &QPushButton::clicked, this, slot);
    actions->addWidget(b);
    buttons_[name] = b;
  };
  add_button("tag", "Tag...", "Add tags (KEY or KEY=VALUE) to the selected runs",
             &RunBrowser::tagRuns);
  add_button("note", "Note...", "Write the selected run's note", &RunBrowser::noteRun);
  add_button("delete", "Delete", "Delete the selected runs with their checkpoints and artifacts",
             &RunBrowser::deleteRuns);
  add_button("fork", "Fork...",
             "Continue the selected run's checkpoint as a child run with settings changed",
             &RunBrowser::forkRun);
  add_button("reproduce", "Reproduce",
             "Run the selected run again from its snapshot and compare the metrics step by step",
             &RunBrowser::reproduceRun);
  actions->addSpacing(12);
  add_button("diff", "Diff graphs", "The two selected runs' graphs side by side",
             &RunBrowser::diffRuns);
  add_button("parallel", "Parallel coordinates",
             "The selected run's sweep (or the filtered runs) as parallel coordinates",
             &RunBrowser::showParallel);
  actions->addStretch(1);
  add_button("refresh", "Refresh", "Read the database again", &RunBrowser::refresh);

  auto* split = split_ = new QSplitter(Qt::Vertical);
  auto* upper = new QWidget;
  auto* uv = new QVBoxLayout(upper);
  uv->setContentsMargins(0, 0, 0, 0);
  uv->addWidget(table_, 1);
  uv->addLayout(actions);
  split->addWidget(upper);
  log_->setObjectName("runs.log");
  log_->setReadOnly(true);
  log_->setFont(QFont("monospace"));
  log_->setPlaceholderText("What Tag, Note, Delete, Fork and Reproduce ran, and their output");
  lower_->setObjectName("runs.lower");
  lower_->addTab(log_, "Log");
  auto* pc = new QWidget;
  auto* pv = new QVBoxLayout(pc);
  pv->setContentsMargins(0, 0, 0, 0);
  auto* prow = new QHBoxLayout;
  prow->addWidget(new QLabel("objective"));
  objective_->setObjectName("runs.objective");
  objective_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  prow->addWidget(objective_);
  prow->addStretch(1);
  pv->addLayout(prow);
  pv->addWidget(parallel_, 1);
  lower_->addTab(pc, "Parallel coordinates");
  lower_->addTab(diff_, "Graph diff");
  lineage_->setObjectName("runs.lineage");
  lineage_->setHeaderLabels({"run", "forked at step", "status", "name"});
  lineage_->setRootIsDecorated(true);
  lower_->addTab(lineage_, "Lineage");
  connect(lineage_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
    (void)selectRun(item->data(0, Qt::UserRole).toLongLong());
  });
  split->addWidget(lower_);
  // The views below give way first when the dock is short (their own minimums add up).
  lower_->setMinimumHeight(60);
  upper->setMinimumHeight(80);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  // Until the splitter is moved by hand, the table keeps three fifths of the height.
  connect(split, &QSplitter::splitterMoved, this, [this] { split_moved_ = true; });
  layout->addWidget(split, 1);

  connect(filter_, &QLineEdit::returnPressed, this, &RunBrowser::applyFilter);
  connect(model_, &RunTableModel::filterError, this, [this](const QString& m) {
    filter_error_ = true;
    filter_->setStyleSheet("QLineEdit { border: 1px solid #e04848; background: #4a1f1f; }");
    showMessage(m, true);
  });
  connect(model_, &RunTableModel::filterApplied, this, [this](const QString& where) {
    filter_error_ = false;
    filter_->setStyleSheet({});
    showMessage(QString("%1 runs%2").arg(model_->total()).arg(where.isEmpty() ? "" : " match"),
                false);
  });
  connect(model_, &RunTableModel::failed, this, [this](const QString& m) { showMessage(m, true); });
  connect(model_, &RunTableModel::opened, this, [this] {
    if (message_->property("error").toBool()) showMessage({}, false);  // an earlier failure
    model_->keys([this](std::vector<std::string> params, std::vector<std::string> metrics) {
      param_keys_ = std::move(params);
      metric_keys_ = std::move(metrics);
      rebuildColumnMenu();
    });
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    // Another filter or order starts at its first row (and reads only that page).
    table_->scrollToTop();
    selectionChanged();
    if (filter_error_) return;
    if (!message_->isHidden() && message_->property("error").toBool()) message_->hide();
  });
  selection_timer_.setSingleShot(true);
  selection_timer_.setInterval(120);
  connect(&selection_timer_, &QTimer::timeout, this, &RunBrowser::selectionChanged);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { selection_timer_.start(); });
  connect(colour_by_, &QComboBox::currentIndexChanged, this, [this] { recolour(); });
  connect(objective_, &QComboBox::activated, this, [this] { showParallel(); });
  connect(parallel_, &ParallelCoords::runClicked, this, [this](int64_t id) {
    if (!selectRun(id))
      showMessage(QString("run %1 is not among the rows read: filter `id = %1`").arg(id), false);
  });
  updateButtons();
}

RunBrowser::~RunBrowser() {
  if (process_) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(2000);
  }
}

QPushButton* RunBrowser::button(const QString& name) const {
  auto it = buttons_.find(name);
  return it == buttons_.end() ? nullptr : it->second;
}

void RunBrowser::setDatabase(const std::string& db) {
  db_ = db;
  if (isVisible()) model_->open(db_, model_->query());
}

void RunBrowser::openIfNeeded() {
  // Also after a failed open (no runs yet when the window came up): tried again when shown.
  if (db_.empty() || model_->isOpen() || model_->busy()) return;
  model_->open(db_, model_->query());
}

void RunBrowser::refresh() {
  if (model_->isOpen())
    model_->refresh();
  else
    openIfNeeded();
}

void RunBrowser::setActive(bool on) {
  if (on) openIfNeeded();
  model_->setLive(on);
}

void RunBrowser::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  // A dock behind another's tab is shown too, but covered: it waits for setActive.
  QTimer::singleShot(0, this, [this] {
    if (isVisible() && !visibleRegion().isEmpty()) setActive(true);
  });
}

void RunBrowser::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  if (split_moved_) return;
  // After the layout gave the splitter its new height.
  QTimer::singleShot(0, this, [this] {
    if (split_moved_) return;
    const int h = split_->height();
    split_->setSizes({h * 3 / 5, h - h * 3 / 5});
  });
}

void RunBrowser::hideEvent(QHideEvent* e) {
  QWidget::hideEvent(e);
  setActive(false);
}

QString RunBrowser::messageText() const {
  return message_->isHidden() ? QString() : message_->text();
}

void RunBrowser::showMessage(const QString& text, bool error) {
  message_->setText(text);
  message_->setProperty("error", error);
  // A filter's message carries a caret under its column: a fixed-width font keeps it there.
  message_->setFont(error ? QFont("monospace") : font());
  message_->setStyleSheet(error ? "color: #e05a5a;" : "");
  message_->setVisible(!text.isEmpty());
  Q_EMIT message(text, error);
}

// [SECTION] filter, columns, selection

void RunBrowser::applyFilter() {
  openIfNeeded();
  model_->setFilter(filter_->text());
}

void RunBrowser::rebuildColumnMenu() {
  QMenu* menu = columns_->menu();
  menu->clear();
  const std::vector<std::string>& shown = model_->columns();
  auto add = [&](QMenu* m, const QString& text, const std::string& field) {
    QAction* a = m->addAction(text);
    a->setObjectName(QString::fromStdString("column:" + field));
    a->setCheckable(true);
    a->setChecked(std::find(shown.begin(), shown.end(), field) != shown.end());
    connect(a, &QAction::toggled, this, [this, field](bool on) { toggleColumn(field, on); });
  };
  QMenu* attrs = menu->addMenu("Attributes");
  for (const char* f : kAttributes) add(attrs, f, f);
  QMenu* params = menu->addMenu("Params");
  for (const std::string& k : param_keys_) add(params, QString::fromStdString(k), param_field(k));
  QMenu* metrics = menu->addMenu("Metrics");
  for (const std::string& k : metric_keys_) {
    add(metrics, QString::fromStdString(k) + " (latest)", metric_field(k, "latest"));
    add(metrics, QString::fromStdString(k) + " (best)", metric_field(k, "best"));
  }
  // The colour and the objective pickers follow the database's keys.
  const QString colour = colour_by_->currentData().toString();
  colour_by_->blockSignals(true);
  colour_by_->clear();
  colour_by_->addItem("(none)", QString());
  for (const std::string& k : param_keys_)
    colour_by_->addItem(QString::fromStdString(k), QString::fromStdString(k));
  colour_by_->setCurrentIndex(std::max(0, colour_by_->findData(colour)));
  colour_by_->blockSignals(false);
  const QString objective = objective_->currentData().toString();
  objective_->clear();
  for (const std::string& k : metric_keys_)
    objective_->addItem(QString::fromStdString(k) + " (best)", QString::fromStdString(k));
  int pick = objective_->findData(objective);
  if (pick < 0) pick = objective_->findData("val/loss");
  if (pick < 0) pick = objective_->findData("test/accuracy");
  if (pick < 0) pick = objective_->findData("epoch/train_loss");
  objective_->setCurrentIndex(std::max(0, pick));
}

void RunBrowser::toggleColumn(const std::string& field, bool on) {
  std::vector<std::string> cols = model_->columns();
  auto it = std::find(cols.begin(), cols.end(), field);
  if (on && it == cols.end()) cols.push_back(field);
  if (!on && it != cols.end()) cols.erase(it);
  if (cols.empty()) cols.push_back("id");
  model_->setColumns(std::move(cols));
}

std::vector<int64_t> RunBrowser::selectedRuns() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows())
    if (const int64_t id = model_->runId(i.row())) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool RunBrowser::selectRun(int64_t id) {
  for (int row = 0; row < model_->rowCount(); ++row) {
    if (model_->runId(row) != id) continue;
    table_->selectRow(row);
    table_->scrollTo(model_->index(row, 0));
    return true;
  }
  return false;
}

void RunBrowser::updateButtons() {
  const size_t n = selectedRuns().size();
  for (const char* one : {"note", "fork", "reproduce"}) buttons_[one]->setEnabled(n == 1);
  for (const char* many : {"tag", "delete"}) buttons_[many]->setEnabled(n >= 1);
  buttons_["diff"]->setEnabled(n == 2);
}

void RunBrowser::selectionChanged() {
  updateButtons();
  parallel_->setSelected(selectedRuns());
  loadCurves();
  showLineage();
}

// [SECTION] the selected runs' curves

void RunBrowser::loadCurves() {
  std::vector<int64_t> ids = selectedRuns();
  // A dozen and a half curves is already more than a chart can tell apart.
  if (ids.size() > 16) ids.resize(16);
  const int request = ++curves_request_;
  if (ids.empty() || db_.empty()) {
    curves_.clear();
    curve_params_.clear();
    recolour();
    return;
  }
  struct Read {
    std::vector<RunCurves> curves;
    std::map<int64_t, std::map<std::string, std::string>> params;
    std::string error;
  };
  auto* watcher = new QFutureWatcher<Read>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, request] {
    watcher->deleteLater();
    if (request != curves_request_) return;  // the selection moved on
    Read r = watcher->result();
    if (!r.error.empty()) showMessage(QString::fromStdString(r.error), true);
    curves_ = std::move(r.curves);
    curve_params_ = std::move(r.params);
    recolour();
  });
  watcher->setFuture(QtConcurrent::run([db = db_, ids]() -> Read {
    Read out;
    auto st = store::RunStore::open_read_only(db);
    if (!st) {
      out.error = st.error().message;
      return out;
    }
    store::RunStore& s = **st;
    for (int64_t id : ids) {
      RunCurves c;
      c.run_id = id;
      c.shown = true;
      if (auto m = s.metrics(id, "train/loss"))
        for (const store::MetricPoint& p : *m) {
          c.steps.push_back(static_cast<double>(p.step));
          c.loss.push_back(p.value);
        }
      auto vl = s.metrics(id, "val/loss");
      auto va = s.metrics(id, "val/accuracy");
      if (vl)
        for (size_t k = 0; k < vl->size(); ++k) {
          c.epochs.push_back(static_cast<double>((*vl)[k].step));
          c.val_loss.push_back((*vl)[k].value);
          c.val_accuracy.push_back(va && k < va->size() ? (*va)[k].value : NAN);
        }
      if (auto ps = s.params(id))
        for (auto& [k, v] : *ps) out.params[id][k] = v;
      out.curves.push_back(std::move(c));
    }
    return out;
  }));
}

void RunBrowser::recolour() {
  const std::string key = colour_by_->currentData().toString().toStdString();
  std::vector<std::string> values;
  auto value_of = [&](int64_t id) -> std::string {
    if (key.empty()) return "";
    auto r = curve_params_.find(id);
    if (r == curve_params_.end()) return "";
    auto v = r->second.find(key);
    return v == r->second.end() ? "" : v->second;
  };
  for (const RunCurves& c : curves_) values.push_back(value_of(c.run_id));
  colours_ = key.empty() ? ParamColours{} : param_colours(key, values);
  for (RunCurves& c : curves_) {
    const std::string v = value_of(c.run_id);
    c.colour = key.empty() ? 0 : colours_.colour(v);
    c.label = "run " + std::to_string(c.run_id) +
              (key.empty() ? "" : " " + key + "=" + (v.empty() ? "-" : v));
  }
  legend_ = QString::fromStdString(colours_.legend());
  legend_bar_->set(colours_);
  Q_EMIT curvesChanged(curves_, legend_);
}

// [SECTION] graph diff and parallel coordinates

void RunBrowser::diffRuns() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.size() != 2) return;
  diff_->showRuns(db_, ids[0], ids[1]);
  lower_->setCurrentWidget(diff_);
}

void RunBrowser::showParallel() {
  openIfNeeded();
  const std::string key = objective_->currentData().toString().toStdString();
  if (key.empty()) return showMessage("no metric to use as the objective yet", true);
  lower_->setCurrentIndex(1);
  const std::vector<int64_t> ids = selectedRuns();
  // `keys`: the params to draw an axis for (a sweep's: those its trials vary).
  auto draw = [this, key](std::string where, QString title, std::vector<std::string> keys) {
    store::RunQuery q;
    q.where = where;
    for (const std::string& k : keys) q.columns.push_back(param_field(k));
    q.columns.push_back(metric_field(key, "best"));
    model_->rows(q, 5000, [this, q, key, title](Result<std::vector<store::RunRow>> rows) {
      if (!rows) return showMessage(QString::fromStdString(rows.error().message), true);
      parallel_->setTitle(QString("%1: %2 runs").arg(title).arg(rows->size()));
      parallel_->setData(q.columns, std::move(*rows), metric_higher_is_better(key));
      parallel_->setSelected(selectedRuns());
    });
  };
  const QString filtered = "the runs the filter shows";
  if (ids.empty()) return draw(model_->query().where, filtered, param_keys_);
  // The first selected run's sweep, when it has one: its trials' params are the axes.
  store::RunQuery q;
  q.where = "id = " + std::to_string(ids[0]);
  q.columns = {"sweep"};
  model_->rows(q, 1, [this, draw, filtered](Result<std::vector<store::RunRow>> rows) {
    if (!rows || rows->empty() || rows->front().cells.empty() ||
        rows->front().cells[0].kind != store::Cell::Kind::Number)
      return draw(model_->query().where, filtered, param_keys_);
    const auto sweep = static_cast<int64_t>(rows->front().cells[0].number);
    auto* watcher = new QFutureWatcher<std::vector<std::string>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, draw, sweep] {
      watcher->deleteLater();
      std::vector<std::string> keys = watcher->result();
      draw("sweep = " + std::to_string(sweep), QString("sweep %1").arg(sweep),
           keys.empty() ? param_keys_ : keys);
    });
    watcher->setFuture(QtConcurrent::run([db = db_, sweep]() -> std::vector<std::string> {
      std::set<std::string> keys;
      auto st = store::RunStore::open_read_only(db);
      if (!st) return {};
      auto trials = (*st)->trials(sweep);
      if (!trials) return {};
      for (const store::TrialInfo& t : *trials) {
        const auto j = nlohmann::json::parse(t.params_json, nullptr, /*allow_exceptions=*/false);
        if (j.is_object())
          for (const auto& [k, v] : j.items()) keys.insert(k);
      }
      return {keys.begin(), keys.end()};
    }));
  });
}

}  // namespace mls::editor
