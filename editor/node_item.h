// One document node drawn on the canvas: title, type, ports, what the analysis says
// (output shape and parameter count, or the error at this node) and, on layers, a badge
// saying whether the node exports to ONNX. Holds no document state
// of its own beyond what the scene copied in on the last sync.
#pragma once

#include <QFont>
#include <QGraphicsItem>
#include <QPainterPath>
#include <QString>
#include <QStringList>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/node_stats.h"
#include "nodes/analysis.h"
#include "nodes/catalogue.h"

namespace mls::editor {

struct PortRef {
  std::string node, port;
  bool output = false;
  std::string key() const { return node + ":" + port; }
};

// What the last run measured at a node (RunRequest::inspect): its share of the step's kernel
// time and its output's statistics on a test batch.
struct NodeRunInfo {
  double time_share = -1;  // of the step's kernel time, forward + backward (< 0: not timed)
  double ms_per_step = 0, backward_ms = 0;
  std::optional<OutputStats> output;  // on a test batch
};

class NodeItem : public QGraphicsItem {
 public:
  static constexpr double kWidth = 150, kHeader = 38, kRow = 20, kFooter = 22, kPortRadius = 5.5,
                          kFooterLine = 14;
  enum { Type = UserType + 1 };

  NodeItem(std::string id, const nodes::NodeTypeDef* def);
  int type() const override { return Type; }
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

  const std::string& id() const { return id_; }
  const nodes::NodeTypeDef* def() const { return def_; }
  void setId(std::string id) {
    id_ = std::move(id);
    updateFooter();
    update();
  }
  void setAnalysis(const nodes::NodeAnalysis& a);
  // The last run's figures, drawn as a second footer line (nullopt: none).
  void setRunInfo(const std::optional<NodeRunInfo>& info);
  const std::optional<NodeRunInfo>& runInfo() const { return run_; }
  // Whether this layer exports to ONNX: "" it does, else why not (nodes::onnx_export_problem);
  // nullopt: no badge (inputs, labels and losses are handled around the exported graph).
  void setExportProblem(std::optional<std::string> problem);
  const std::optional<std::string>& exportProblem() const { return export_problem_; }
  // A lab's locked node in a student's copy (nodes/lab.h): a lock on its header; its
  // parameters and inputs cannot be edited (the document's commands refuse them).
  void setLocked(bool locked) {
    if (locked == locked_) return;
    locked_ = locked;
    setToolTip(locked ? "Locked by the lab: its type, parameters and inputs stay as given"
                      : QString());
    update();
  }
  bool locked() const { return locked_; }
  // The run footer's text, as drawn ("31.2% time · mean 0.42 · std 0.91 · 48% zeros").
  QString runText() const;

  // The node's body (without the ports' overhang) in scene coordinates: what a wire must not
  // cross.
  QRectF bodySceneRect() const { return mapRectToScene(QRectF(0, 0, width(), height())); }
  // The footer's text (the output shape and parameter count, or the error, or what it waits
  // for), the lines it is drawn in (shape and count on two lines where one is too narrow),
  // and the rectangles the footer and the title are drawn in, in item coordinates.
  QString footerText() const;
  const QStringList& footerLines() const { return footer_lines_; }
  QRectF footerRect() const;
  QRectF titleRect() const;
  QRectF badgeRect() const;  // the ONNX badge, in item coordinates (null: none)
  static QFont titleFont();
  static QFont footerFont();

  // The port under a scene position (within a few pixels), if any.
  std::optional<PortRef> portAt(const QPointF& scene_pos) const;
  QPointF portScenePos(bool output, const std::string& port) const;
  // Colour the ports a dragged wire may end on.
  void setHighlight(const std::optional<PortRef>& port) {
    highlight_ = port;
    update();
  }

 private:
  double height() const;
  double width() const { return kWidth; }
  void updateFooter();   // the footer's lines for the current analysis
  void updateToolTip();  // the type's documentation, the analysis, the last run
  QPointF portLocalPos(bool output, size_t index) const;

  std::string id_;
  const nodes::NodeTypeDef* def_;
  nodes::NodeAnalysis analysis_;
  std::optional<NodeRunInfo> run_;
  bool locked_ = false;
  std::optional<std::string> export_problem_;
  std::optional<PortRef> highlight_;
  QStringList footer_lines_;
};

// A link, drawn as a cubic curve from an output port to an input port, with the shape
// that flows along it written at its middle.
class WireItem : public QGraphicsItem {
 public:
  enum { Type = UserType + 2 };
  WireItem(nodes::LinkDoc link, QPointF from, QPointF to, QString label, bool ok);
  int type() const override { return Type; }
  QRectF boundingRect() const override;
  QPainterPath shape() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  const nodes::LinkDoc& link() const { return link_; }
  // Moves the ends (a node being dragged); the label and link stay.
  void setEnds(QPointF from, QPointF to);
  // The path as routed by the scene (around nodes) and where its label goes (scene
  // coordinates; null: at the path's middle).
  void setRoute(QPainterPath path, QRectF label_rect);
  const QString& label() const { return label_; }
  // The label's size, and where it is drawn (scene coordinates; empty without a label).
  QSizeF labelSize() const;
  QRectF labelRect() const;
  static QFont labelFont();
  const QPainterPath& path() const { return path_; }
  static QPainterPath curve(QPointF from, QPointF to);

 private:
  nodes::LinkDoc link_;
  QPainterPath path_;
  QString label_;
  QRectF label_rect_;  // null: centred on the path's middle
  bool ok_;
};

// The header colour of a palette category ("Layers", "Losses", ...).
QColor categoryColor(const std::string& category);

}  // namespace mls::editor
