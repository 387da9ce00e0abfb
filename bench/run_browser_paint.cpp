// The run browser (editor/run_browser.h) on a large experiment database, as wall time from
// the user's action to the table painted with the rows it asked for (issue 28: first paint
// under 1 s; scrolling to the end, sorting by a metric's best value and filtering each under
// 100 ms). Run it under Xvfb on the database bench/runs_store_bench.cpp generates:
//
//   build/bench/runs_store_bench --mlstudio build/app/mlstudio --db /tmp/runs-bench.db --keep
//   xvfb-run -a build/bench/run_browser_paint /tmp/runs-bench.db [--reps 5]
//           [--where "params.lr < 0.001 AND metrics.val/loss.best < 0.6"]
//
// Each figure is the median of --reps tries. The actions are real events on the widgets
// (Ctrl+End in the table, a click on a header, keys in the filter line and Enter), and "painted"
// means the table's viewport repainted after the last page the view asked for arrived.
#include <QApplication>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLineEdit>
#include <QTableView>
#include <QTest>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "editor/run_browser.h"
#include "editor/run_table_model.h"

using namespace mls::editor;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Events are processed until the model has no query running and `done` holds (30 s at most);
// then the table's viewport is painted. False on a timeout.
template <class Done>
bool settle_and_paint(RunBrowser& b, Done done) {
  QElapsedTimer t;
  t.start();
  for (;;) {
    QApplication::processEvents(QEventLoop::AllEvents, 5);
    if (!b.model()->busy() && done()) {
      // The view asks for the rows it shows while painting: paint, then check again.
      b.table()->viewport()->repaint();
      QApplication::processEvents(QEventLoop::AllEvents, 5);
      if (!b.model()->busy() && done()) return true;
    }
    if (t.elapsed() > 30000) return false;
  }
}

void report(const char* what, const std::vector<double>& ms, double budget) {
  std::printf("%-48s median %7.1f ms  (min %.1f, max %.1f; budget %.0f ms)%s\n", what, median(ms),
              *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
              budget, median(ms) <= budget ? "" : "  OVER BUDGET");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: run_browser_paint DB [--reps N] [--where EXPR] [--sort FIELD]\n");
    return 2;
  }
  const std::string db = argv[1];
  int reps = 5;
  std::string where = "params.lr < 0.001 AND metrics.val/loss.best < 0.6";
  std::string sort_field = "metrics.val/loss.best";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--where")) where = argv[i + 1];
    if (!std::strcmp(argv[i], "--sort")) sort_field = argv[i + 1];
  }
  if (!std::filesystem::exists(db)) {
    std::fprintf(stderr, "run_browser_paint: %s: no such file\n", db.c_str());
    return 1;
  }
  QApplication app(argc, argv);
  std::printf("database %s: %.1f MiB\n", db.c_str(),
              static_cast<double>(std::filesystem::file_size(db)) / (1024.0 * 1024.0));

  // 1. First paint: a browser created, shown and opened on the file, to its first rows drawn.
  std::vector<double> first;
  for (int r = 0; r < reps; ++r) {
    QElapsedTimer t;
    t.start();
    RunBrowser b;
    b.resize(1400, 900);
    b.setDatabase(db);
    b.show();
    if (!settle_and_paint(b, [&] { return b.model()->isOpen() && b.model()->runId(0) != 0; }))
      return std::fprintf(stderr, "first paint: timed out (%s)\n",
                          b.messageText().toStdString().c_str()),
             1;
    first.push_back(t.nsecsElapsed() / 1e6);
  }

  RunBrowser b;
  b.resize(1400, 900);
  b.setDatabase(db);
  b.show();
  if (!QTest::qWaitForWindowExposed(&b) ||
      !settle_and_paint(b, [&] { return b.model()->isOpen() && b.model()->runId(0) != 0; }))
    return std::fprintf(stderr, "open: %s\n", b.messageText().toStdString().c_str()), 1;
  RunTableModel* m = b.model();
  std::printf("%lld runs; pages of %d rows\n", static_cast<long long>(m->total()),
              RunTableModel::kPage);
  QTableView* table = b.table();
  // A click on the first row: the table has the focus and a current row, as for a person.
  auto click_first = [&] {
    table->scrollToTop();
    settle_and_paint(b, [&] { return m->runId(0) != 0; });
    QTest::mouseClick(table->viewport(), Qt::LeftButton, Qt::NoModifier,
                      table->visualRect(m->index(0, 0)).center());
  };

  // 2. Ctrl+End: the last page read and drawn (again below, sorted by the metric).
  auto scroll_to_end = [&](std::vector<double>& out) {
    for (int r = 0; r < reps; ++r) {
      // Enter in the (empty) filter line: the query read again from its first page, so the
      // last page is read cold each time, not from the pages held.
      QTest::keyClick(b.filterEdit(), Qt::Key_Return);
      settle_and_paint(b, [&] { return m->rowsHeld() <= RunTableModel::kPage; });
      click_first();
      settle_and_paint(b, [] { return true; });
      const int64_t pages = m->pagesRead();
      QElapsedTimer t;
      t.start();
      QTest::keyClick(table, Qt::Key_End, Qt::ControlModifier);
      if (!settle_and_paint(b, [&] { return m->runId(static_cast<int>(m->total()) - 1) != 0; }))
        return false;
      out.push_back(t.nsecsElapsed() / 1e6);
      if (r == 0)
        std::printf("scrolling to the end read %lld page(s); %lld rows held\n",
                    static_cast<long long>(m->pagesRead() - pages),
                    static_cast<long long>(m->rowsHeld()));
    }
    return true;
  };
  std::vector<double> end, end_sorted;
  if (!scroll_to_end(end)) return std::fprintf(stderr, "scroll to the end: timed out\n"), 1;

  // 3. A header click sorting by the metric's best value (each click turns the order).
  auto cols = m->columns();
  if (std::find(cols.begin(), cols.end(), sort_field) == cols.end()) {
    cols.push_back(sort_field);
    m->setColumns(cols);
    settle_and_paint(b, [] { return true; });
  }
  const int col = static_cast<int>(std::find(m->columns().begin(), m->columns().end(), sort_field) -
                                   m->columns().begin());
  QHeaderView* h = table->horizontalHeader();
  std::vector<double> sort;
  for (int r = 0; r < reps; ++r) {
    const int64_t before = m->runId(0);
    const QPoint at(h->sectionViewportPosition(col) + h->sectionSize(col) / 2, h->height() / 2);
    QElapsedTimer t;
    t.start();
    QTest::mouseClick(h->viewport(), Qt::LeftButton, Qt::NoModifier, at);
    if (!settle_and_paint(b, [&] { return m->runId(0) != 0 && m->runId(0) != before; }))
      return std::fprintf(stderr, "sort: timed out (%s)\n", b.messageText().toStdString().c_str()),
             1;
    sort.push_back(t.nsecsElapsed() / 1e6);
  }

  if (!scroll_to_end(end_sorted))
    return std::fprintf(stderr, "scroll to the end (sorted): timed out\n"), 1;

  // 4. A filter typed and applied with Enter (timed from Enter), then cleared (also timed).
  std::vector<double> filter, clear;
  QLineEdit* line = b.filterEdit();
  int64_t matched = 0;
  for (int r = 0; r < reps; ++r) {
    line->setFocus();
    line->selectAll();
    QTest::keyClicks(line, QString::fromStdString(where));
    QElapsedTimer t;
    t.start();
    QTest::keyClick(line, Qt::Key_Return);
    if (!settle_and_paint(b, [&] { return m->query().where == where; }))
      return std::fprintf(stderr, "filter: timed out (%s)\n",
                          b.messageText().toStdString().c_str()),
             1;
    filter.push_back(t.nsecsElapsed() / 1e6);
    if (b.filterInError())
      return std::fprintf(stderr, "filter: %s\n", b.messageText().toStdString().c_str()), 1;
    matched = m->total();
    line->selectAll();
    QTest::keyClick(line, Qt::Key_Delete);
    t.restart();
    QTest::keyClick(line, Qt::Key_Return);
    if (!settle_and_paint(b, [&] { return m->query().where.empty(); }))
      return std::fprintf(stderr, "filter cleared: timed out\n"), 1;
    clear.push_back(t.nsecsElapsed() / 1e6);
  }

  report("first paint (open, count, first page, drawn)", first, 1000);
  report("scroll to the end (Ctrl+End)", end, 100);
  report(("scroll to the end, sorted by " + sort_field).c_str(), end_sorted, 100);
  report(("sort by " + sort_field + " (header click)").c_str(), sort, 100);
  report(("filter \"" + where + "\"").c_str(), filter, 100);
  std::printf("%-48s %lld runs\n", "  ...which matched", static_cast<long long>(matched));
  report("filter cleared (all runs, sorted)", clear, 100);
  return 0;
}
