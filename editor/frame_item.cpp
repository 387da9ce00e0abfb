#include "editor/frame_item.h"

#include <QGraphicsScene>

#include <QApplication>
#include <QCursor>
#include <QGraphicsSceneMouseEvent>
#include <QPainter>
#include <QPalette>
#include <QStyleOptionGraphicsItem>
#include <algorithm>

#include "editor/node_item.h"

namespace mls::editor {

FrameItem::FrameItem(int index, const nodes::CommentFrame& frame, Commit commit, Rename rename)
    : index_(index),
      title_(QString::fromStdString(frame.title)),
      size_(frame.w, frame.h),
      commit_(std::move(commit)),
      rename_(std::move(rename)) {
  setPos(frame.x, frame.y);
  setZValue(-2);  // behind wires (0) and nodes (1)
  setFlags(ItemIsMovable | ItemIsSelectable);
  setAcceptHoverEvents(true);
  setToolTip(
      "Comment frame: drag to move, drag the corner to resize, double-click the title to rename");
}

QRectF FrameItem::boundingRect() const {
  return QRectF(QPointF(0, 0), size_).adjusted(-2, -2, 2, 2);
}

void FrameItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  const QPalette pal = QApplication::palette();
  const bool dark = pal.color(QPalette::Window).lightness() < 128;
  const bool selected = option->state & QStyle::State_Selected;
  const QRectF r(QPointF(0, 0), size_);
  p->setRenderHint(QPainter::Antialiasing);
  QColor fill = dark ? QColor(120, 140, 170, 38) : QColor(90, 120, 170, 30);
  QColor edge = selected ? QColor(0xf0, 0xb4, 0x29)
                         : (dark ? QColor(120, 140, 170, 140) : QColor(90, 120, 170, 150));
  p->setPen(QPen(edge, selected ? 2 : 1.2, Qt::DashLine));
  p->setBrush(fill);
  p->drawRoundedRect(r, 10, 10);
  QFont f = p->font();
  f.setBold(true);
  f.setPointSizeF(f.pointSizeF() * 1.1);
  p->setFont(f);
  p->setPen(pal.color(QPalette::WindowText));
  const QRectF title(12, 4, r.width() - 24, kTitle - 6);
  p->drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
              QFontMetrics(f).elidedText(title_.isEmpty() ? QString("(untitled)") : title_,
                                         Qt::ElideRight, static_cast<int>(title.width())));
  // The resize grip: three short diagonals in the corner.
  p->setPen(QPen(edge, 1.2));
  for (int k = 1; k <= 3; ++k) {
    const double d = 4.0 * k;
    p->drawLine(QPointF(r.right() - d, r.bottom() - 2), QPointF(r.right() - 2, r.bottom() - d));
  }
}

bool FrameItem::onGrip(QPointF local) const {
  return local.x() > size_.width() - kGrip && local.y() > size_.height() - kGrip;
}

void FrameItem::hoverMoveEvent(QGraphicsSceneHoverEvent* e) {
  setCursor(onGrip(e->pos()) ? Qt::SizeFDiagCursor : Qt::ArrowCursor);
  QGraphicsItem::hoverMoveEvent(e);
}

void FrameItem::mousePressEvent(QGraphicsSceneMouseEvent* e) {
  resizing_ = e->button() == Qt::LeftButton && onGrip(e->pos());
  press_pos_ = pos();
  carried_.clear();
  if (resizing_) {
    e->accept();
    return;
  }
  QGraphicsItem::mousePressEvent(e);
  // The nodes wholly inside the frame travel with it (selected ones Qt moves already).
  if (e->button() == Qt::LeftButton && scene())
    for (QGraphicsItem* it : scene()->items(frameRect(), Qt::ContainsItemBoundingRect))
      if (it->type() == NodeItem::Type && !it->isSelected()) carried_.push_back({it, it->pos()});
}

void FrameItem::mouseMoveEvent(QGraphicsSceneMouseEvent* e) {
  if (!resizing_) {
    QGraphicsItem::mouseMoveEvent(e);
    const QPointF delta = pos() - press_pos_;
    for (const auto& [item, start] : carried_) item->setPos(start + delta);
    return;
  }
  prepareGeometryChange();
  size_ = QSizeF(std::max(120.0, e->pos().x()), std::max(kTitle + 40, e->pos().y()));
  update();
}

void FrameItem::mouseReleaseEvent(QGraphicsSceneMouseEvent* e) {
  const bool was_resizing = std::exchange(resizing_, false);
  if (!was_resizing) QGraphicsItem::mouseReleaseEvent(e);
  carried_.clear();
  if (was_resizing || pos() != press_pos_) commit_(index_, frameRect());
}

void FrameItem::mouseDoubleClickEvent(QGraphicsSceneMouseEvent* e) {
  if (e->pos().y() <= kTitle)
    rename_(index_);
  else
    QGraphicsItem::mouseDoubleClickEvent(e);
}

}  // namespace mls::editor
