// The runs of an experiment database as a Qt table model that reads lazily: the row count
// comes from one COUNT, and rows are read a page (200 runs) at a time when the view first
// asks for one of them, so 10,000 runs cost one page at the first paint and one page more at
// the end of the table. Filter and sort run in SQL (store/run_table.h): a header click or a
// new filter is one query, never a sort of rows held here.
//
//   auto* model = new RunTableModel(this);
//   model->open("mlstudio-runs.db");          // on the worker; opened() or failed()
//   view->setModel(model);
//   view->setSortingEnabled(true);           // a header click: model->sort(column, order)
//   model->setFilter("params.lr < 0.01");    // filterError(message) keeps the rows shown
//
// Every query runs on one worker thread that owns the connection, so a slow query never
// blocks painting: until a page arrives its rows read as empty. Each answer carries the
// generation it was asked in; one for a query since replaced is dropped. A database that a
// training process writes meanwhile (WAL) is read again by refresh(), and every few seconds
// while setLive(true) and a run is 'running' or the number of runs changed.
#pragma once

#include <QAbstractTableModel>
#include <QThreadPool>
#include <QTimer>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "store/run_table.h"

namespace mls::editor {

// "params.lr" -> "lr", "metrics.val/loss.best" -> "val/loss (best)", "metrics.train/loss" ->
// "train/loss"; attributes as they are.
QString run_column_label(const std::string& field);

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kPage = 200;
  static constexpr size_t kMaxPages = 32;  // pages kept; the farthest from the last read go
  enum Role { RunIdRole = Qt::UserRole + 1, NumberRole };

  explicit RunTableModel(QObject* parent = nullptr);
  ~RunTableModel() override;  // waits for the query in flight

  // Opens `db` read-only on the worker and reads the first page of `query`.
  void open(const std::string& db, store::RunQuery query = {});
  const std::string& database() const { return db_; }
  bool isOpen() const { return open_; }

  // [QAbstractTableModel]
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
  // By the column's field, in SQL; then by id.
  void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

  // The query the rows shown answer, and the one asked last (they differ while one runs).
  const store::RunQuery& query() const { return query_; }
  // A new filter: checked and counted on the worker; the rows shown stay until it answers
  // (filterError for a bad one: they stay then too).
  void setFilter(const QString& where);
  void setColumns(std::vector<std::string> columns);
  const std::vector<std::string>& columns() const { return query_.columns; }
  // Reads the count and the pages held again, keeping the rows' places (a training process
  // added points or runs).
  void refresh();
  // While on, refresh() every `interval_ms` when a run is 'running' or the runs' number
  // changed since the last look.
  void setLive(bool on, int interval_ms = 3000);

  int64_t runId(int row) const;                        // 0 while its page is not read
  const store::Cell* cell(int row, int column) const;  // null while its page is not read
  int64_t total() const { return total_; }
  // For tests and the benchmark: rows held now, page reads so far, queries still running.
  int64_t rowsHeld() const;
  int64_t pagesRead() const { return pages_read_; }
  bool busy() const { return in_flight_ > 0; }

  // Work on the worker's connection, answered on the GUI thread (the browser's column
  // chooser, parallel coordinates and selections use these).
  void keys(
      std::function<void(std::vector<std::string> params, std::vector<std::string> metrics)> done);
  void rows(store::RunQuery q, int64_t limit,
            std::function<void(Result<std::vector<store::RunRow>>)> done);

 Q_SIGNALS:
  void opened();
  void failed(const QString& message);       // open or a query failed (the db is gone, locked)
  void filterError(const QString& message);  // the filter did not parse: column and caret
  void filterApplied(const QString& where);
  void settled();  // no query is running any more (tests wait for it)

 private:
  using Page = std::vector<store::RunRow>;
  struct Worker;
  // Runs `job` on the worker thread; `done` on the GUI thread, unless the model is gone.
  void runOnWorker(std::function<std::function<void()>(store::RunTable&)> job);
  // Counts `q` and reads its first page; on success the model shows it.
  void replaceQuery(store::RunQuery q, bool report_filter);
  void requestPage(int64_t page) const;
  void trimPages(int64_t keep_near);
  void liveTick();

  std::string db_;
  bool open_ = false;
  store::RunQuery query_;
  int64_t total_ = 0;
  std::map<int64_t, Page> pages_;
  mutable std::set<int64_t> pending_;
  uint64_t generation_ = 0;  // bumped by every query change: older answers are dropped
  int64_t pages_read_ = 0;
  int in_flight_ = 0;
  int64_t last_all_ = -1;  // the runs' number at the last live look
  int64_t last_live_ = 0;  // and how many were running then
  QTimer live_timer_;
  std::shared_ptr<Worker> worker_;
  QThreadPool pool_;  // one thread: the connection is used by one query at a time
};

}  // namespace mls::editor
