// A sweep's trials as parallel coordinates: one vertical axis per swept parameter and one for
// the objective (the last), each run a polyline across them, coloured by its objective (the
// best runs brightest). An axis whose values span a decade or more is logarithmic; one of
// words (an optimizer's name) places its values evenly. Hovering a line names its run;
// clicking it emits runClicked (the run browser selects it in the table).
//
//   auto* pc = new ParallelCoords;
//   pc->setData({"params.lr", "params.batch_size", "metrics.val/loss.best"}, rows,
//               /*higher_is_better=*/false);   // rows: store::RunTable::rows over those columns
//   connect(pc, &ParallelCoords::runClicked, browser, &RunBrowser::selectRun);
#pragma once

#include <QWidget>
#include <string>
#include <vector>

#include "store/run_table.h"

namespace mls::editor {

struct ParallelAxis {
  std::string field;
  QString label;
  bool log = false;                     // values span >= 10x, all positive
  bool words = false;                   // text values, placed evenly in sorted order
  std::vector<std::string> categories;  // words: the values, sorted
  double min = 0, max = 1;
  // Where a value falls on the axis, 0 (bottom) .. 1 (top); < 0 for a missing value.
  double position(const store::Cell& c) const;
};

// The axes for `fields` over `rows` (rows[i].cells[k] is fields[k]'s value).
std::vector<ParallelAxis> parallel_axes(const std::vector<std::string>& fields,
                                        const std::vector<store::RunRow>& rows);

class ParallelCoords : public QWidget {
  Q_OBJECT
 public:
  explicit ParallelCoords(QWidget* parent = nullptr);

  // The last field is the objective. Params that do not vary among the rows are left out
  // (a sweep's fixed settings).
  void setData(const std::vector<std::string>& fields, std::vector<store::RunRow> rows,
               bool higher_is_better);
  void setSelected(const std::vector<int64_t>& run_ids);
  // Shown above the axes ("sweep 3: 8 trials").
  void setTitle(const QString& title);

  const std::vector<ParallelAxis>& axes() const { return axes_; }
  size_t lineCount() const { return rows_.size(); }
  // The run whose line passes within a few pixels of `p` (0: none); and where its line
  // crosses axis `axis` (for tests that point at it).
  int64_t runAt(QPointF p) const;
  QPointF pointOf(int64_t run_id, size_t axis) const;
  int64_t hovered() const { return hovered_; }

  QSize sizeHint() const override { return {640, 320}; }

 Q_SIGNALS:
  void runClicked(int64_t run_id);

 protected:
  void paintEvent(QPaintEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void leaveEvent(QEvent* e) override;

 private:
  QRectF plotRect() const;
  double axisX(size_t axis) const;
  QColor lineColour(size_t row) const;

  std::vector<ParallelAxis> axes_;
  std::vector<size_t> columns_;  // axes_[k] reads cells[columns_[k]]
  std::vector<store::RunRow> rows_;
  std::vector<int64_t> selected_;
  bool higher_is_better_ = false;
  QString title_;
  int64_t hovered_ = 0;
};

// A colour on a perceptual scale (dark blue .. teal .. yellow, viridis-like), t in 0..1.
QColor scale_colour(double t);

}  // namespace mls::editor
