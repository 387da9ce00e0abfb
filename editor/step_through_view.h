// The step-through panel: pick a batch and press Step; the training step advances one
// document node at a time on the canvas (forward, then backward, then the optimizer update),
// and the pane shows the tensor on the wire out of the current node: its statistics, a
// histogram and a heatmap (2-D) or an image grid (image batches); in backward the gradient on
// the wire and of the node's parameters; in the update a table of every parameter's change.
// The step itself is runner/step_through.h (no Qt); it runs off the GUI thread.
//
//   auto* v = new StepThroughView(&model, scene);   // scene: the canvas it highlights on
//   // a person types a batch, presses Step, Step back, "To end of phase", "Next batch"
//   v->stepThrough();                               // the core, once a step is evaluated
#pragma once

#include <QFutureWatcher>
#include <QWidget>
#include <functional>
#include <map>
#include <memory>

#include "editor/document_model.h"
#include "engine/train/preflight.h"
#include "runner/step_through.h"

class QCheckBox;
class QComboBox;
class QGraphicsRectItem;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace mls::editor {

class CanvasScene;
class MemoryView;
class SvgView;  // an SVG drawn to fit, keeping its aspect (step_through_view.cpp)

class StepThroughView : public QWidget {
  Q_OBJECT
 public:
  StepThroughView(DocumentModel* model, CanvasScene* canvas, QWidget* parent = nullptr);
  ~StepThroughView() override;

  // The evaluated step (null until the first Step, and after the document changes).
  const runner::StepThrough* stepThrough() const { return busy_ ? nullptr : st_.get(); }
  bool busy() const { return busy_; }
  QString positionText() const;
  // Document node -> its placement colour's name ("device", "host", "cpu"), as drawn.
  std::map<std::string, std::string> placementShown() const;
  // The value shown (nullptr: none).
  const runner::StepValue* shownValue() const;
  // The step's memory by category (null until a project was opened for stepping).
  std::shared_ptr<const PreflightEstimate> memoryEstimate() const { return estimate_; }

 Q_SIGNALS:
  // A step was evaluated (or failed: the position label says why), or the cursor moved.
  void updated();

 private:
  enum class Action { Step, Back, PhaseEnd, NextBatch };
  void act(Action a);
  // Runs `job` on a worker thread (the project opened first when need be), then `then`.
  void runJob(std::function<Result<void>(runner::StepThrough&)> job, std::function<void()> then);
  void show();
  void showValue();
  void showChanges();
  void setBusy(bool on);
  // The canvas coloured by placement (a halo behind each node), when the box is ticked.
  void paintPlacement();
  void clearPlacement();

  DocumentModel* model_;
  CanvasScene* canvas_;
  std::unique_ptr<runner::StepThrough> st_;
  QFutureWatcher<Result<void>> watcher_;
  bool busy_ = false, stale_ = false;
  QString error_;
  QSpinBox* batch_;
  QPushButton *step_, *back_, *phase_end_, *next_;
  QLabel *position_, *info_, *stats_;
  QComboBox* values_;
  SvgView *histogram_, *picture_;
  QLabel* picture_note_;
  QTableWidget* changes_;
  QCheckBox* placement_;
  QLabel* placement_legend_;
  std::vector<QGraphicsRectItem*> halos_;  // in the canvas's scene, which owns them
  // The compiled training step's memory by category at its peak (the pre-flight estimate of
  // the project at its batch size), made when the project is opened for stepping.
  MemoryView* memory_;
  std::shared_ptr<const PreflightEstimate> estimate_;
};

}  // namespace mls::editor
