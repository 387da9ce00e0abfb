// The teaching views: the training step drawn as a graph, as the trainer compiles it
// (engine/train/step_graph.h: build_step). A student picks the forward alone, the step with
// the backward autodiff appended (backward nodes in orange), the step after any one of the
// compiler's passes, or the optimised step that runs (fused kernels in violet).
//
//   StepView* v = new StepView(&model);
//   v->showStage(StepView::kBackward);   // rebuilt whenever the document changes
//   v->drawnNodes();                     // IR nodes on screen (forward + backward)
//   connect(v, &StepView::nodeActivated, ...);   // a click names the document node
#pragma once

#include <QGraphicsView>
#include <QLabel>
#include <QTimer>
#include <QWidget>
#include <optional>
#include <string>

#include "editor/document_model.h"
#include "engine/train/step_graph.h"

class QComboBox;

namespace mls::editor {

// Top-to-bottom layered positions for a graph's nodes and the values they start from
// (inputs, parameters); constants are left out. Pure, for tests: every edge goes down.
struct IrLayout {
  std::vector<QPointF> node_pos;                  // per IR node (unset when not drawn)
  std::vector<std::optional<QPointF>> value_pos;  // per value: inputs and params drawn as sources
  std::vector<bool> drawn;                        // per IR node
};
IrLayout layout_ir(const Graph& g, bool forward_only);

class StepView : public QWidget {
  Q_OBJECT
 public:
  // Stages in the combo box: 0 forward, 1 forward + backward, then one per pass; the last
  // is the optimised step.
  static constexpr int kForward = 0;
  static constexpr int kBackward = 1;

  explicit StepView(DocumentModel* model, QWidget* parent = nullptr);
  void showStage(int stage);
  void showOptimised();
  int stageCount() const;
  int stage() const;
  // The step as last built (nullopt while the graph cannot be built; message() says why).
  const std::optional<StepGraph>& step() const { return step_; }
  QString message() const { return message_; }
  QString summary() const;
  int drawnNodes() const { return drawn_nodes_; }
  QGraphicsScene* graphScene() { return scene_; }
  QGraphicsView* graphView() { return view_; }
  // Rebuilds now (otherwise shortly after the document changes, when visible).
  void rebuild();

 Q_SIGNALS:
  // A node of the drawn graph was clicked: the document node it came from.
  void nodeActivated(const QString& document_node);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void draw();
  DocumentModel* model_;
  QComboBox* stages_;
  QLabel* summary_;
  QGraphicsScene* scene_;
  QGraphicsView* view_;
  QTimer rebuild_timer_;
  std::optional<StepGraph> step_;
  QString message_;
  int drawn_nodes_ = 0;
  bool stale_ = true;
};

}  // namespace mls::editor
