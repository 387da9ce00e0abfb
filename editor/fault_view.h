// The paused run, as the editor shows it: when a breakpoint fires (engine/train/breakpoints.h)
// the canvas marks the node at fault with a red outline and a badge, and the Debugger dock
// says what happened: the BreakHit's message, the faulty tensor's statistics and histogram
// (FaultSite::stats, drawn as the step-through view draws a wire), its operands, and what to
// do next: Resume (train on from the checkpoint, with that breakpoint off) or fork the run
// from the command line with a lower learning rate.
//
//   auto* v = new FaultView(scene);
//   v->showBreak(hit, {.run_id = 7, .db = "runs.db", .lr = 1000});  // marks and centres
//   connect(v, &FaultView::resumeRequested, ...);
//   v->clear();                                     // a new run: the mark goes
#pragma once

#include <QGraphicsObject>
#include <QPointer>
#include <QWidget>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/breakpoints.h"

class QLabel;
class QListWidget;
class QPushButton;
class QLineEdit;

namespace mls::editor {

class CanvasScene;

// The document node a break names: the first bad node's label, else the layer a layer
// breakpoint named ("" when neither: a spike with no node at fault).
std::string fault_node(const BreakHit& hit);
// The status bar's line: "paused at step 12: nan at fc1 (matmul, forward) ...".
QString paused_status(const BreakHit& hit);
// A tensor's statistics as the step-through view writes them (HTML).
QString stats_html(const QString& caption, const TensorStats& s);

// A red outline and a "step N: nan" badge around a node, drawn as a child of its item (it
// moves and goes with the node). Clicks pass through to the node.
class FaultMarker : public QGraphicsObject {
  Q_OBJECT
 public:
  FaultMarker(QGraphicsItem* node, QRectF body, QString badge);
  QRectF boundingRect() const override;
  QPainterPath shape() const override;  // the ring and the badge, not the node's body
  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override;
  const QString& badge() const { return badge_; }

 private:
  QRectF body_;
  QString badge_;
};

// A histogram's bars (counts of equal bins between lo and hi).
class HistogramBars : public QWidget {
 public:
  explicit HistogramBars(QWidget* parent = nullptr);
  void setCounts(std::vector<int64_t> counts, double lo, double hi, QString caption);
  const std::vector<int64_t>& counts() const { return counts_; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<int64_t> counts_;
  double lo_ = 0, hi_ = 0;
  QString caption_;
};

class FaultView : public QWidget {
  Q_OBJECT
 public:
  struct RunInfo {
    int64_t run_id = 0;
    std::string db;
    double lr = 0;           // the run's learning rate (the fork suggests a tenth of it)
    std::string project;     // the project file ("" untitled)
    // Where Fork here starts: the last checkpoint kept before the failing step
    // (RunOutcome::healthy_checkpoint; the failing step's own state when there is none).
    std::string checkpoint;
    int64_t fork_step = 0;  // its step
  };
  explicit FaultView(CanvasScene* scene, QWidget* parent = nullptr);

  // Shows the break, marks its node on the canvas, selects and centres it.
  void showBreak(const BreakHit& hit, const RunInfo& run);
  void clear();
  const std::optional<BreakHit>& shown() const { return hit_; }
  // The node marked on the canvas ("" none) and its marker (null: none).
  const std::string& markedNode() const { return marked_; }
  FaultMarker* marker() const { return marker_; }
  QString forkCommand() const;
  // Marks the node again after the scene rebuilt its items (a document change).
  void remark();

 Q_SIGNALS:
  // Resume: train on from the paused run's checkpoint with the breakpoint that fired off.
  void resumeRequested(int64_t run_id, const mls::BreakHit& hit);
  // Fork here: a new run, child of `run_id`, from the state before the failing step, trained
  // with the settings the canvas has now (a lower learning rate typed into the toolbar).
  void forkRequested(int64_t run_id, const QString& checkpoint);

 private:
  void mark();

  CanvasScene* scene_;
  std::optional<BreakHit> hit_;
  RunInfo run_;
  std::string marked_;
  QPointer<FaultMarker> marker_;
  QLabel *title_, *message_, *stats_, *next_;
  HistogramBars* histogram_;
  QListWidget* inputs_;
  QPushButton *resume_, *fork_here_, *copy_;
  QLineEdit* fork_;
};

}  // namespace mls::editor
