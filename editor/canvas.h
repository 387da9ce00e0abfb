// The canvas: a QGraphicsScene that mirrors the DocumentModel (it never edits the document
// itself: a drag, a drop or a delete becomes an edit command pushed on the model) and the
// view around it (pan, zoom, drops from the palette).
//
//   CanvasScene scene(&model);          // redraws on model.changed()
//   CanvasView view(&scene);
//   view.dropNodeType("mls.relu", QPointF(300, 120));   // what a drop from the palette does
//   scene.connectPorts({"fc1", "out", true}, {"relu1", "in", false});
#pragma once

#include <QGraphicsScene>
#include <QGraphicsView>
#include <map>
#include <optional>

#include "editor/document_model.h"
#include "editor/frame_item.h"
#include "editor/node_item.h"

namespace mls::editor {

// The MIME type of a palette drag: the node type id as UTF-8.
inline constexpr const char* kNodeTypeMime = "application/x-mlstudio-node-type";

// A node's body on the canvas, by id: what wires are routed around.
struct NodeBody {
  std::string id;
  QRectF rect;
};

class CanvasScene : public QGraphicsScene {
  Q_OBJECT
 public:
  explicit CanvasScene(DocumentModel* model, QObject* parent = nullptr);

  NodeItem* nodeItem(const std::string& id) const;
  std::vector<WireItem*> wires() const;
  std::vector<std::string> selectedNodeIds() const;
  void selectNode(const std::string& id);

  // Edits, each one undo step; a refusal is reported through message() and returned.
  Result<void> addNode(const std::string& type, QPointF pos);
  Result<void> connectPorts(const PortRef& a, const PortRef& b);
  void deleteSelection();
  void copySelection();
  void paste();
  void autoLayout();

  // Comment frames (each change one undo step). addFrame puts a frame around the selected
  // nodes, or at `at` when none is selected.
  void addFrame(const QString& title, QPointF at);
  Result<void> setFrame(int index, const nodes::CommentFrame& frame);
  Result<void> renameFrame(int index, const QString& title);
  const std::vector<FrameItem*>& frameItems() const { return frame_items_; }

  // The last run's figures on the nodes it measured, until another project opens or the
  // next run replaces them.
  void setRunInsights(std::map<std::string, NodeRunInfo> info);
  const std::map<std::string, NodeRunInfo>& runInsights() const { return run_info_; }

  // A fresh node id for a type: "linear1", "linear2", ...
  std::string freshId(const std::string& type) const;
  static constexpr double kGrid = 20;

 Q_SIGNALS:
  // A line for the status bar: a refused edit and its reason, or what was done.
  void message(const QString& text, bool error);
  void selectionChangedTo(const std::string& node_id);  // "" when none or several
  // A frame's title was double-clicked: the window asks for the new title.
  void frameRenameRequested(int index);
  // The nodes were placed by the automatic layout (a document without positions).
  void laidOut();

 public Q_SLOTS:
  void sync();

 protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseMoveEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseReleaseEvent(QGraphicsSceneMouseEvent* e) override;
  void drawBackground(QPainter* p, const QRectF& rect) override;

 private:
  std::optional<PortRef> portAt(QPointF scene_pos) const;
  void commitMoves();
  void rebuildWires();
  void rebuildFrames();
  void followNodes();  // wires' ends to their nodes' current positions
  // The wire's path around the nodes in its way (`bodies`: every node's rectangle, by id),
  // and its label where no node hides it.
  void routeWire(WireItem* w, const std::vector<NodeBody>& bodies);
  void clearHighlights();

  DocumentModel* model_;
  std::map<std::string, NodeItem*> items_;
  // Where the nodes were when the mouse went down: a click that moves none records nothing
  // (not even the automatic layout of a document that has none).
  std::map<std::string, QPointF> press_pos_;
  std::map<std::string, NodeRunInfo> run_info_;
  std::vector<FrameItem*> frame_items_;
  std::vector<WireItem*> wires_;
  // A wire being dragged from a port.
  std::optional<PortRef> drag_from_;
  QGraphicsPathItem* drag_wire_ = nullptr;
};

class CanvasView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit CanvasView(CanvasScene* scene, QWidget* parent = nullptr);
  CanvasScene* canvas() const { return scene_; }
  // Adds a node of `type` at a scene position (what a palette drop does).
  Result<void> dropNodeType(const std::string& type, QPointF scene_pos);
  void zoomBy(double factor);
  // Shows the whole graph (zooming out as far as that takes, in no further than 100 %); it
  // stays fitted through resizes and automatic layouts until the user works on the canvas (a click,
  // a key, the wheel).
  void fitAll();

 protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dragMoveEvent(QDragMoveEvent* e) override;
  void dropEvent(QDropEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void keyReleaseEvent(QKeyEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  CanvasScene* scene_;
  bool fitted_ = false;
};

}  // namespace mls::editor
