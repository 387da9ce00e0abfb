// The Runs dock: every run of the experiment database in a table that reads lazily
// (RunTableModel), filtered with the filter language of store/run_table.h and sorted by a
// header click, both in SQL; a column chooser (params, and each metric's latest or best); the
// selected runs' curves on the Instruments dashboard, coloured by a chosen param; a sweep's
// parallel coordinates; two runs' graphs side by side; and the actions Tag, Note, Delete,
// Fork and Reproduce, which run `mlstudio runs ...` as a child process with its output in the
// log (the window never waits for one).
//
//   auto* b = new RunBrowser;
//   b->setDatabase(options.db);                 // opened when the dock is first shown
//   connect(b, &RunBrowser::curvesChanged, instruments, [=](auto c, auto legend) {...});
//
// Filter: type an expression and press Enter. A bad one leaves the rows as they were, turns
// the line red and shows the message with its column and a caret under it.
#pragma once

#include <QPointer>
#include <QProcess>
#include <QTimer>
#include <QWidget>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "editor/instruments.h"
#include "editor/param_colours.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSplitter;
class QTableView;
class QTabWidget;
class QToolButton;
class QTreeWidget;

namespace mls::editor {

class GraphDiffView;
class ParallelCoords;
class RunTableModel;

// A run's family for the Lineage tab: its oldest ancestor at the root, each run's forks (or
// resumed copies) under it, by id. `parents`: child -> (parent, the parent's step it forked
// at, if recorded), for every run that has a parent.
struct LineageNode {
  int64_t id = 0;
  std::optional<int64_t> fork_step;
  std::vector<LineageNode> children;
};
LineageNode run_family(
    int64_t run, const std::map<int64_t, std::pair<int64_t, std::optional<int64_t>>>& parents);

class RunBrowser : public QWidget {
  Q_OBJECT
 public:
  explicit RunBrowser(QWidget* parent = nullptr);
  ~RunBrowser() override;

  // The database to browse; opened when the browser is first on screen (or now if it is).
  void setDatabase(const std::string& db);
  const std::string& database() const { return db_; }
  // On screen (a dock raised): opens the database if it is not open yet and reads it again
  // every few seconds while runs are live. Off: no more reads until shown again.
  void setActive(bool on);
  // The mlstudio executable the actions run (default: this program).
  void setExecutable(const QString& exe) { exe_ = exe; }

  RunTableModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QLineEdit* filterEdit() const { return filter_; }
  QString messageText() const;
  bool filterInError() const { return filter_error_; }
  QPlainTextEdit* log() const { return log_; }
  QComboBox* colourBy() const { return colour_by_; }
  QComboBox* objective() const { return objective_; }
  ParallelCoords* parallel() const { return parallel_; }
  GraphDiffView* diffView() const { return diff_; }
  QTabWidget* lower() const { return lower_; }
  QTreeWidget* lineage() const { return lineage_; }
  QToolButton* columnsButton() const { return columns_; }
  // "tag", "note", "delete", "fork", "reproduce", "diff", "parallel", "refresh".
  QPushButton* button(const QString& name) const;

  std::vector<int64_t> selectedRuns() const;
  // Selects the run's row when it is among the rows read (a click on parallel coordinates).
  bool selectRun(int64_t id);
  bool processRunning() const { return process_ != nullptr; }
  // The selected runs' curves as the dashboard overlays them, and the colours' legend.
  const std::vector<RunCurves>& curves() const { return curves_; }
  QString legend() const { return legend_; }

 Q_SIGNALS:
  void curvesChanged(const std::vector<RunCurves>& curves, const QString& legend);
  void message(const QString& text, bool error);
  // A `runs` process ended (the table is read again).
  void actionFinished(int exit_code);

 protected:
  void showEvent(QShowEvent* e) override;
  void hideEvent(QHideEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  void openIfNeeded();
  void refresh();  // the Refresh button: read again, or open when that failed before
  void showMessage(const QString& text, bool error);
  void applyFilter();
  void rebuildColumnMenu();
  void toggleColumn(const std::string& field, bool on);
  void selectionChanged();
  void loadCurves();
  void recolour();
  void updateButtons();
  void tagRuns();
  void noteRun();
  void deleteRuns();
  void forkRun();
  void reproduceRun();
  void diffRuns();
  void showParallel();
  void showLineage();  // run_lineage.cpp
  // Queues `mlstudio runs ARGS --db DB`; the queue runs one process at a time.
  void runCli(QStringList args);
  void startNext();

  std::string db_;
  QString exe_;
  RunTableModel* model_;
  QTableView* table_;
  QLineEdit* filter_;
  QLabel* message_;
  bool filter_error_ = false;
  QToolButton* columns_;
  QComboBox* colour_by_;
  QComboBox* objective_;
  ColourLegend* legend_bar_;
  QTabWidget* lower_;
  QSplitter* split_ = nullptr;
  bool split_moved_ = false;
  QPlainTextEdit* log_;
  ParallelCoords* parallel_;
  GraphDiffView* diff_;
  QTreeWidget* lineage_;
  int lineage_request_ = 0;
  std::map<QString, QPushButton*> buttons_;
  std::vector<std::string> param_keys_, metric_keys_;
  QTimer selection_timer_;
  int curves_request_ = 0;
  std::vector<RunCurves> curves_;
  std::map<int64_t, std::map<std::string, std::string>> curve_params_;  // run -> params
  QString legend_;
  ParamColours colours_;
  std::deque<QStringList> queue_;
  QPointer<QProcess> process_;
};

}  // namespace mls::editor
