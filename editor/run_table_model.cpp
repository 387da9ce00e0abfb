#include "editor/run_table_model.h"

#include <QBrush>
#include <QColor>
#include <QPointer>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace mls::editor {

QString run_column_label(const std::string& field) {
  auto starts = [&](const char* p) { return field.rfind(p, 0) == 0; };
  auto unquote = [](std::string k) {
    if (k.size() >= 2 && (k.front() == '"' || k.front() == '`') && k.back() == k.front())
      k = k.substr(1, k.size() - 2);
    return k;
  };
  if (starts("params.")) return QString::fromStdString(unquote(field.substr(7)));
  if (starts("tags.")) return "tag " + QString::fromStdString(field.substr(5));
  if (!starts("metrics.")) return QString::fromStdString(field);
  std::string key = field.substr(8);
  static const char* const kAggs[] = {"latest", "last",  "min",  "max",
                                      "best",   "count", "step", "best_step"};
  for (const char* agg : kAggs) {
    const std::string suffix = std::string(".") + agg;
    if (key.size() > suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
      key.resize(key.size() - suffix.size());
      if (key.size() >= 2 && (key.front() == '"' || key.front() == '`'))
        key = key.substr(1, key.size() - 2);
      return QString::fromStdString(key) +
             (std::string(agg) == "latest" || std::string(agg) == "last"
                  ? QString()
                  : QString(" (%1)").arg(agg));
    }
  }
  if (key.size() >= 2 && (key.front() == '"' || key.front() == '`'))
    key = key.substr(1, key.size() - 2);
  return QString::fromStdString(key);
}

// The connection, used by one job at a time (the pool has one thread; the mutex says so).
struct RunTableModel::Worker {
  std::mutex mutex;
  std::unique_ptr<store::RunTable> table;
};

RunTableModel::RunTableModel(QObject* parent)
    : QAbstractTableModel(parent), worker_(std::make_shared<Worker>()) {
  query_.columns = store::default_columns();  // the header can be sorted before opening
  pool_.setMaxThreadCount(1);
  pool_.setExpiryTimeout(-1);
  live_timer_.setInterval(3000);
  connect(&live_timer_, &QTimer::timeout, this, &RunTableModel::liveTick);
}

RunTableModel::~RunTableModel() {
  live_timer_.stop();
  pool_.waitForDone();
}

void RunTableModel::runOnWorker(std::function<std::function<void()>(store::RunTable&)> job) {
  ++in_flight_;
  QPointer<RunTableModel> self(this);
  std::shared_ptr<Worker> w = worker_;
  (void)QtConcurrent::run(&pool_, [self, w, job = std::move(job)] {
    std::function<void()> done;
    {
      std::lock_guard lock(w->mutex);
      if (w->table) done = job(*w->table);
    }
    // Answered on the GUI thread; dropped with the model if it is gone by then.
    QMetaObject::invokeMethod(
        self.data(),
        [self, done] {
          if (!self) return;
          if (done) done();
          if (--self->in_flight_ == 0) Q_EMIT self->settled();
        },
        Qt::QueuedConnection);
  });
}

void RunTableModel::open(const std::string& db, store::RunQuery query) {
  db_ = db;
  open_ = false;
  ++generation_;
  beginResetModel();
  pages_.clear();
  pending_.clear();
  total_ = 0;
  query_ = query;
  if (query_.columns.empty()) query_.columns = store::default_columns();
  endResetModel();
  ++in_flight_;
  QPointer<RunTableModel> self(this);
  std::shared_ptr<Worker> w = worker_;
  (void)QtConcurrent::run(&pool_, [self, w, db] {
    std::string error;
    {
      std::lock_guard lock(w->mutex);
      w->table.reset();
      auto t = store::RunTable::open(db);
      if (t)
        w->table = std::move(*t);
      else
        error = t.error().message;
    }
    QMetaObject::invokeMethod(
        self.data(),
        [self, error] {
          if (!self) return;
          --self->in_flight_;
          if (!error.empty()) {
            Q_EMIT self->failed(QString::fromStdString(error));
            if (self->in_flight_ == 0) Q_EMIT self->settled();
            return;
          }
          self->open_ = true;
          Q_EMIT self->opened();
          self->replaceQuery(self->query_, false);
        },
        Qt::QueuedConnection);
  });
}

void RunTableModel::replaceQuery(store::RunQuery q, bool report_filter) {
  if (!open_) {
    query_ = std::move(q);
    return;
  }
  const uint64_t gen = ++generation_;
  runOnWorker([this, q, gen, report_filter](store::RunTable& t) -> std::function<void()> {
    struct Answer {
      std::string filter_error, error;
      int64_t count = 0;
      Page first;
    };
    auto a = std::make_shared<Answer>();
    if (auto c = t.check(q); !c) {
      a->filter_error = c.error().message;
    } else if (auto n = t.count(q); !n) {
      a->error = n.error().message;
    } else {
      a->count = *n;
      auto rows = t.rows(q, 0, kPage);
      if (rows)
        a->first = std::move(*rows);
      else
        a->error = rows.error().message;
    }
    return [this, q, gen, a, report_filter] {
      if (gen != generation_) return;  // a newer query replaced this one
      if (!a->filter_error.empty()) {
        Q_EMIT filterError(QString::fromStdString(a->filter_error));
        return;
      }
      if (!a->error.empty()) {
        Q_EMIT failed(QString::fromStdString(a->error));
        return;
      }
      beginResetModel();
      query_ = q;
      total_ = a->count;
      pages_.clear();
      pending_.clear();
      pages_[0] = std::move(a->first);
      ++pages_read_;
      endResetModel();
      if (report_filter) Q_EMIT filterApplied(QString::fromStdString(q.where));
    };
  });
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(total_);
}

int RunTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(query_.columns.size());
}

const store::Cell* RunTableModel::cell(int row, int column) const {
  if (row < 0 || column < 0 || column >= columnCount()) return nullptr;
  auto it = pages_.find(row / kPage);
  if (it == pages_.end()) {
    if (row < total_) requestPage(row / kPage);
    return nullptr;
  }
  const size_t r = static_cast<size_t>(row % kPage);
  if (r >= it->second.size() || static_cast<size_t>(column) >= it->second[r].cells.size())
    return nullptr;
  return &it->second[r].cells[static_cast<size_t>(column)];
}

int64_t RunTableModel::runId(int row) const {
  auto it = pages_.find(row / kPage);
  if (it == pages_.end()) return 0;
  const size_t r = static_cast<size_t>(row % kPage);
  return r < it->second.size() ? it->second[r].id : 0;
}

int64_t RunTableModel::rowsHeld() const {
  int64_t n = 0;
  for (const auto& [k, p] : pages_) n += static_cast<int64_t>(p.size());
  return n;
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  if (role == RunIdRole) return QVariant::fromValue<qlonglong>(runId(index.row()));
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole && role != Qt::TextAlignmentRole &&
      role != Qt::ForegroundRole && role != NumberRole)
    return {};
  const store::Cell* c = cell(index.row(), index.column());
  if (!c) return role == Qt::DisplayRole && index.column() == 0 ? QVariant("…") : QVariant();
  switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole:
      return QString::fromStdString(c->display());
    case NumberRole:
    case Qt::TextAlignmentRole: {
      // Params are kept as text: "0.01" is a number too, right-aligned like one.
      double v = c->number;
      bool number = c->kind == store::Cell::Kind::Number;
      if (c->kind == store::Cell::Kind::Text && !c->text.empty()) {
        char* end = nullptr;
        v = std::strtod(c->text.c_str(), &end);
        number = end == c->text.c_str() + c->text.size();
      }
      if (role == NumberRole) return number ? QVariant(v) : QVariant();
      return number ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                    : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    }
    case Qt::ForegroundRole:
      if (query_.columns[static_cast<size_t>(index.column())] == "status") {
        if (c->text == "failed") return QBrush(QColor(220, 80, 80));
        if (c->text == "running") return QBrush(QColor(80, 160, 240));
        if (c->text == "pruned" || c->text == "interrupted") return QBrush(QColor(150, 150, 150));
      }
      return {};
    default:
      return {};
  }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const std::string& field = query_.columns[static_cast<size_t>(section)];
  if (role == Qt::DisplayRole) return run_column_label(field);
  if (role == Qt::ToolTipRole) return QString::fromStdString(field) + " (click to sort)";
  return {};
}

void RunTableModel::sort(int column, Qt::SortOrder order) {
  if (column < 0 || column >= columnCount()) return;
  store::RunQuery q = query_;
  q.sort = {{query_.columns[static_cast<size_t>(column)], order == Qt::DescendingOrder}};
  const bool same = query_.sort.size() == 1 && query_.sort[0].field == q.sort[0].field &&
                    query_.sort[0].descending == q.sort[0].descending;
  if (same && open_) return;
  replaceQuery(std::move(q), false);
}

void RunTableModel::setFilter(const QString& where) {
  store::RunQuery q = query_;
  q.where = where.trimmed().toStdString();
  replaceQuery(std::move(q), true);
}

void RunTableModel::setColumns(std::vector<std::string> columns) {
  store::RunQuery q = query_;
  q.columns = std::move(columns);
  // A sort by a column no longer shown still holds: it is part of the query, not the view.
  replaceQuery(std::move(q), false);
}

void RunTableModel::requestPage(int64_t page) const {
  auto* self = const_cast<RunTableModel*>(this);
  if (!open_ || pending_.count(page)) return;
  pending_.insert(page);
  const uint64_t gen = generation_;
  const store::RunQuery q = query_;
  self->runOnWorker([self, q, gen, page](store::RunTable& t) -> std::function<void()> {
    auto rows = std::make_shared<Result<Page>>(t.rows(q, page * kPage, kPage));
    return [self, gen, page, rows] {
      if (gen != self->generation_) return;
      self->pending_.erase(page);
      if (!*rows) {
        Q_EMIT self->failed(QString::fromStdString(rows->error().message));
        return;
      }
      self->pages_[page] = std::move(**rows);
      ++self->pages_read_;
      self->trimPages(page);
      const int first = static_cast<int>(page * kPage);
      const int last = std::min<int>(static_cast<int>(self->total_), first + kPage) - 1;
      if (last >= first)
        Q_EMIT self->dataChanged(self->index(first, 0), self->index(last, self->columnCount() - 1));
    };
  });
}

void RunTableModel::trimPages(int64_t keep_near) {
  while (pages_.size() > kMaxPages) {
    auto far = pages_.begin();
    for (auto it = pages_.begin(); it != pages_.end(); ++it)
      if (std::llabs(it->first - keep_near) > std::llabs(far->first - keep_near)) far = it;
    pages_.erase(far);
  }
}

void RunTableModel::refresh() {
  if (!open_) return open(db_, query_);
  const uint64_t gen = generation_;
  std::vector<int64_t> held;
  for (const auto& [k, p] : pages_) held.push_back(k);
  const store::RunQuery q = query_;
  runOnWorker([this, q, gen, held](store::RunTable& t) -> std::function<void()> {
    struct Answer {
      std::string error;
      int64_t count = 0;
      std::map<int64_t, Page> pages;
    };
    auto a = std::make_shared<Answer>();
    if (auto n = t.count(q); !n) {
      a->error = n.error().message;
    } else {
      a->count = *n;
      for (int64_t p : held) {
        if (p * kPage >= a->count) continue;
        auto rows = t.rows(q, p * kPage, kPage);
        if (!rows) {
          a->error = rows.error().message;
          break;
        }
        a->pages[p] = std::move(*rows);
      }
    }
    return [this, gen, a] {
      if (gen != generation_) return;
      if (!a->error.empty()) {
        Q_EMIT failed(QString::fromStdString(a->error));
        return;
      }
      // Rows come and go at the end (runs are added); those in view keep their places.
      if (a->count > total_) {
        beginInsertRows({}, static_cast<int>(total_), static_cast<int>(a->count) - 1);
        total_ = a->count;
        endInsertRows();
      } else if (a->count < total_) {
        beginRemoveRows({}, static_cast<int>(a->count), static_cast<int>(total_) - 1);
        total_ = a->count;
        endRemoveRows();
      }
      pending_.clear();
      pages_ = std::move(a->pages);
      pages_read_ += static_cast<int64_t>(pages_.size());
      if (total_ > 0)
        Q_EMIT dataChanged(index(0, 0), index(static_cast<int>(total_) - 1, columnCount() - 1));
    };
  });
}

void RunTableModel::setLive(bool on, int interval_ms) {
  live_timer_.setInterval(interval_ms);
  if (on)
    live_timer_.start();
  else
    live_timer_.stop();
}

void RunTableModel::liveTick() {
  if (!open_ || in_flight_ > 0) return;  // the last look has not answered yet
  runOnWorker([this](store::RunTable& t) -> std::function<void()> {
    store::RunQuery running;
    running.where = "status = 'running'";
    const auto n_running = t.count(running);
    const auto n_all = t.count(store::RunQuery{});
    const int64_t all = n_all ? *n_all : -1, live = n_running ? *n_running : 0;
    return [this, all, live] {
      // Also once after the last live run ended: its final status and points.
      const bool changed = all != last_all_ || live != last_live_;
      last_all_ = all;
      last_live_ = live;
      if (live > 0 || changed) refresh();
    };
  });
}

void RunTableModel::keys(
    std::function<void(std::vector<std::string>, std::vector<std::string>)> done) {
  runOnWorker([done](store::RunTable& t) -> std::function<void()> {
    auto p = t.param_keys();
    auto m = t.metric_keys();
    std::vector<std::string> params = p ? *p : std::vector<std::string>{};
    std::vector<std::string> metrics = m ? *m : std::vector<std::string>{};
    return [done, params, metrics] { done(params, metrics); };
  });
}

void RunTableModel::rows(store::RunQuery q, int64_t limit,
                         std::function<void(Result<std::vector<store::RunRow>>)> done) {
  runOnWorker([q, limit, done](store::RunTable& t) -> std::function<void()> {
    auto r = std::make_shared<Result<std::vector<store::RunRow>>>(t.rows(q, 0, limit));
    return [done, r] { done(std::move(*r)); };
  });
}

}  // namespace mls::editor
