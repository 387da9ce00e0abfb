// Debug > Compare devices: one training step of the project on each device against a float64
// reference (runner/device_compare.h), run on a worker thread, and the canvas painted by each
// node's difference: a colour scale from green (well under the threshold) through yellow to
// red (above it), a legend, and the node's figures per device in its halo's tooltip and in the
// dock's table.
//
//   auto* v = new DeviceDiffView(&model, scene);
//   v->run();                         // the devices ticked; paints when the worker is done
//   v->setThreshold(1e-4);            // repaints
//   v->paintedColour("fc1");          // what the canvas shows for a node
#pragma once

#include <QColor>
#include <QFutureWatcher>
#include <QGraphicsObject>
#include <QPointer>
#include <QWidget>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/device_compare.h"

class QComboBox;
class QLabel;
class QListWidget;
class QPushButton;
class QTableWidget;

namespace mls::editor {

class CanvasScene;
class DocumentModel;
class RealSpinBox;

// The colour for a difference against the threshold: green at or below threshold / 1000,
// yellow at threshold / 10 (log scale between), red above the threshold.
QColor diff_colour(double value, double threshold);

// A halo behind a node in the difference's colour, with its figures as the tooltip.
class DiffHalo : public QGraphicsObject {
  Q_OBJECT
 public:
  DiffHalo(QGraphicsItem* node, QRectF body, QColor colour, QString tip);
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;
  QColor colour() const { return colour_; }

 private:
  QRectF body_;
  QColor colour_;
};

// The legend: the colour scale with the threshold marked.
class DiffLegend : public QWidget {
 public:
  explicit DiffLegend(QWidget* parent = nullptr);
  void setScale(double threshold, QString unit);

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  double threshold_ = 1e-4;
  QString unit_;
};

class DeviceDiffView : public QWidget {
  Q_OBJECT
 public:
  DeviceDiffView(DocumentModel* model, CanvasScene* scene, QWidget* parent = nullptr);
  ~DeviceDiffView() override;

  // Runs the comparison of the document as it is held, on a worker thread.
  void run();
  bool busy() const { return watcher_.isRunning(); }
  void setThreshold(double t);
  double threshold() const;
  const std::optional<runner::CompareReport>& report() const { return report_; }
  // Per document node, the value painted (the largest over forward and backward of the shown
  // device) and its colour; empty before a comparison.
  const std::map<std::string, double>& painted() const { return painted_; }
  std::optional<QColor> paintedColour(const std::string& node) const;
  QString tooltipOf(const std::string& node) const;
  void clearPaint();

 Q_SIGNALS:
  void finished(bool ok, const QString& summary);

 private:
  void repaint();
  void fillTable();

  DocumentModel* model_;
  CanvasScene* scene_;
  QFutureWatcher<Result<runner::CompareReport>> watcher_;
  std::optional<runner::CompareReport> report_;
  std::map<std::string, double> painted_;
  std::vector<QPointer<DiffHalo>> halos_;
  QListWidget* devices_;
  QComboBox *shown_, *metric_, *which_;
  RealSpinBox* threshold_;
  QPushButton* run_;
  QLabel* status_;
  DiffLegend* legend_;
  QTableWidget* table_;
};

}  // namespace mls::editor
