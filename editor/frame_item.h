// A comment frame on the canvas: a titled, translucent rectangle behind the nodes that
// groups and explains part of a model (nodes/edit.h: CommentFrame). Drag it by its body
// (the nodes wholly inside it come along), resize it by its bottom-right corner,
// double-click the title to rename it; each ends in one undoable edit through the scene.
#pragma once

#include <QGraphicsItem>
#include <QString>
#include <functional>
#include <utility>
#include <vector>

#include "nodes/edit.h"

namespace mls::editor {

class FrameItem : public QGraphicsItem {
 public:
  enum { Type = UserType + 3 };
  static constexpr double kTitle = 26, kGrip = 14;
  // Called when a drag or resize ends, with the frame's new rectangle in scene coordinates.
  using Commit = std::function<void(int index, QRectF rect)>;
  using Rename = std::function<void(int index)>;

  FrameItem(int index, const nodes::CommentFrame& frame, Commit commit, Rename rename);
  int type() const override { return Type; }
  int index() const { return index_; }
  QString title() const { return title_; }
  QRectF frameRect() const { return QRectF(pos(), size_); }
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

 protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseMoveEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseReleaseEvent(QGraphicsSceneMouseEvent* e) override;
  void mouseDoubleClickEvent(QGraphicsSceneMouseEvent* e) override;
  void hoverMoveEvent(QGraphicsSceneHoverEvent* e) override;

 private:
  bool onGrip(QPointF local) const;
  int index_;
  QString title_;
  QSizeF size_;
  Commit commit_;
  Rename rename_;
  bool resizing_ = false;
  QPointF press_pos_;
  std::vector<std::pair<QGraphicsItem*, QPointF>> carried_;  // nodes moving with it, from
};

}  // namespace mls::editor
