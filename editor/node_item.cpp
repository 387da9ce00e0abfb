#include "editor/node_item.h"
#include "editor/theme.h"

#include <map>

#include <QApplication>
#include <QFontMetricsF>
#include <QPainter>
#include <QPalette>
#include <QStringList>
#include <QStyleOptionGraphicsItem>
#include <algorithm>
#include <cmath>

namespace mls::editor {

QColor categoryColor(const std::string& category) {
  if (category == "Data") return QColor(0x3d, 0x8b, 0x5a);
  if (category == "Layers") return QColor(0x3a, 0x6e, 0xa5);
  if (category == "Activations") return QColor(0xb0, 0x7b, 0x2c);
  if (category == "Losses") return QColor(0xa8, 0x3e, 0x4a);
  if (category == "Merge") return QColor(0x6d, 0x55, 0xa3);
  if (category == "Sequence") return QColor(0x2e, 0x8a, 0x8a);
  return QColor(0x66, 0x66, 0x66);
}

namespace {

const QString kFooterSeparator = QStringLiteral("  ·  ");

QString withThousands(int64_t n) {
  QString s = QString::number(n);
  for (int i = s.size() - 3; i > 0; i -= 3) s.insert(i, ',');
  return s;
}

QString shapeText(const Shape& s) {
  return QString::fromStdString(nodes::format_shape(s));
}

}  // namespace

NodeItem::NodeItem(std::string id, const nodes::NodeTypeDef* def) : id_(std::move(id)), def_(def) {
  updateFooter();
  setFlags(ItemIsMovable | ItemIsSelectable | ItemSendsGeometryChanges);
  setAcceptHoverEvents(true);
  setZValue(1);
}

double NodeItem::height() const {
  size_t rows = def_ ? std::max(def_->inputs.size(), def_->outputs.size()) : 1;
  return kHeader + static_cast<double>(std::max<size_t>(rows, 1)) * kRow + kFooter +
         static_cast<double>(std::max<qsizetype>(footer_lines_.size(), 1) - 1) * kFooterLine +
         (run_ ? 2 * kFooter : 0);
}

void NodeItem::updateFooter() {
  // The shape and the parameter count on one line where they fit the node, else on two: a
  // node keeps its width, so a saved layout's spacing still holds.
  const QString line = footerText();
  QStringList lines{line};
  if (analysis_.error.empty() && analysis_.inferred &&
      QFontMetricsF(footerFont()).horizontalAdvance(line) > width() - 16)
    lines = line.split(kFooterSeparator);
  if (lines == footer_lines_) return;
  prepareGeometryChange();
  footer_lines_ = lines;
}

QFont NodeItem::titleFont() {
  QFont f = QApplication::font();
  f.setBold(true);
  f.setPointSizeF(9.5);
  return f;
}

QFont NodeItem::footerFont() {
  QFont f = QApplication::font();
  f.setPointSizeF(8);
  return f;
}

QRectF NodeItem::titleRect() const {
  return QRectF(8, 3, width() - (locked_ ? 54 : 36), 17);
}

QRectF NodeItem::footerRect() const {
  const double extra =
      static_cast<double>(std::max<qsizetype>(footer_lines_.size(), 1) - 1) * kFooterLine;
  return QRectF(8, height() - kFooter - extra, width() - 16, kFooter - 3 + extra);
}

QRectF NodeItem::badgeRect() const {
  return export_problem_ ? QRectF(width() - 6 - 44, 21, 44, 13) : QRectF();
}

QString NodeItem::footerText() const {
  if (!analysis_.error.empty()) return "⚠ " + QString::fromStdString(analysis_.error);
  if (!analysis_.inferred) return QString::fromStdString(analysis_.waiting);
  QString line;
  if (!analysis_.outputs.empty()) line = shapeText(analysis_.outputs[0]);
  if (analysis_.params > 0)
    line += (line.isEmpty() ? "" : kFooterSeparator) + withThousands(analysis_.params) + " params";
  return line;
}

void NodeItem::setRunInfo(const std::optional<NodeRunInfo>& info) {
  prepareGeometryChange();
  run_ = info;
  updateToolTip();
  update();
}

QString NodeItem::runText() const {
  if (!run_) return {};
  QString time = run_->time_share >= 0
                     ? QString("%1% of step time").arg(100 * run_->time_share, 0, 'f', 1)
                     : QString("not timed");
  QStringList parts;
  if (const auto& out = run_->output) {
    parts << QString("μ %1").arg(out->mean, 0, 'g', 2) << QString("σ %1").arg(out->std, 0, 'g', 2);
    // Dead units show as zeros at a ReLU: the figure a student looks for.
    if (def_ && def_->id == "mls.relu")
      parts << QString("%1% zeros").arg(100 * out->zero_fraction, 0, 'f', 0);
  }
  return time + "\n" + parts.join(" ");
}

QRectF NodeItem::boundingRect() const {
  return QRectF(-kPortRadius - 2, -2, width() + 2 * kPortRadius + 4, height() + 4);
}

QPointF NodeItem::portLocalPos(bool output, size_t index) const {
  return QPointF(output ? width() : 0, kHeader + (static_cast<double>(index) + 0.5) * kRow);
}

QPointF NodeItem::portScenePos(bool output, const std::string& port) const {
  if (!def_) return scenePos();
  const int i = output ? def_->output_index(port) : def_->input_index(port);
  return mapToScene(portLocalPos(output, static_cast<size_t>(std::max(i, 0))));
}

std::optional<PortRef> NodeItem::portAt(const QPointF& scene_pos) const {
  if (!def_) return std::nullopt;
  const QPointF local = mapFromScene(scene_pos);
  auto near = [&](QPointF c) { return QLineF(c, local).length() <= kPortRadius + 5; };
  for (size_t i = 0; i < def_->inputs.size(); ++i)
    if (near(portLocalPos(false, i))) return PortRef{id_, def_->inputs[i].name, false};
  for (size_t i = 0; i < def_->outputs.size(); ++i)
    if (near(portLocalPos(true, i))) return PortRef{id_, def_->outputs[i].name, true};
  return std::nullopt;
}

void NodeItem::setExportProblem(std::optional<std::string> problem) {
  if (problem == export_problem_) return;  // the scene syncs often; repaint only on a change
  export_problem_ = std::move(problem);
  updateFooter();
  updateToolTip();
  update();
}

void NodeItem::setAnalysis(const nodes::NodeAnalysis& a) {
  analysis_ = a;
  updateFooter();
  updateToolTip();
  update();
}

void NodeItem::updateToolTip() {
  QString tip =
      def_ ? QString::fromStdString(def_->display_name + " (" + def_->id + ")\n" + def_->doc)
           : QString();
  if (!analysis_.error.empty())
    tip += "\n\nError: " + QString::fromStdString(analysis_.error);
  else if (!analysis_.waiting.empty())
    tip += "\n\n" + QString::fromStdString(analysis_.waiting);
  if (export_problem_)
    tip += export_problem_->empty()
               ? QString("\n\nONNX: exports")
               : "\n\nONNX: does not export: " + QString::fromStdString(*export_problem_);
  if (run_) {
    tip += "\n\nLast run";
    if (run_->time_share >= 0)
      tip += QString("\n  %1% of the step's kernel time: %2 ms per step (%3 ms of it backward)")
                 .arg(100 * run_->time_share, 0, 'f', 1)
                 .arg(run_->ms_per_step, 0, 'f', 3)
                 .arg(run_->backward_ms, 0, 'f', 3);
    if (const auto& out = run_->output)
      tip += QString("\n  output on a test batch: mean %1, std %2, min %3, max %4, %5% exact zeros")
                 .arg(out->mean, 0, 'g', 4)
                 .arg(out->std, 0, 'g', 4)
                 .arg(out->min, 0, 'g', 4)
                 .arg(out->max, 0, 'g', 4)
                 .arg(100 * out->zero_fraction, 0, 'f', 1);
  }
  setToolTip(tip);
}

void NodeItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  const QPalette pal = QApplication::palette();
  const bool dark = pal.color(QPalette::Window).lightness() < 128;
  const QRectF body(0, 0, width(), height());
  const bool selected = option->state & QStyle::State_Selected;
  const bool failed = !analysis_.error.empty();
  p->setRenderHint(QPainter::Antialiasing);

  QColor fill = dark ? QColor(0x2b, 0x2d, 0x31) : QColor(0xfb, 0xfb, 0xfc);
  QPen border(failed     ? QColor(0xd6, 0x3c, 0x3c)
              : selected ? QColor(0xf0, 0xb4, 0x29)
                         : (dark ? QColor(0x50, 0x53, 0x58) : QColor(0xb8, 0xbc, 0xc2)),
              failed || selected ? 2.2 : 1.0);
  p->setPen(border);
  p->setBrush(fill);
  p->drawRoundedRect(body, 7, 7);

  // Header in the category's colour.
  const QColor head = categoryColor(def_ ? def_->category : "");
  QPainterPath hp;
  hp.addRoundedRect(QRectF(0, 0, width(), kHeader), 7, 7);
  QPainterPath cut;
  cut.addRect(QRectF(0, kHeader - 8, width(), 8));
  p->setPen(Qt::NoPen);
  p->setBrush(head);
  p->drawPath(hp.united(cut));
  p->setPen(Qt::white);
  QFont f = titleFont();
  p->setFont(f);
  const QRectF title = titleRect();
  p->drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
              QFontMetrics(f).elidedText(QString::fromStdString(id_), Qt::ElideRight,
                                         static_cast<int>(title.width())));
  // The category's icon, white on the header (drawn from SVG at the view's scale).
  static std::map<std::string, QIcon> header_icons;
  const std::string category = def_ ? def_->category : "";
  auto icon_it = header_icons.find(category);
  if (icon_it == header_icons.end())
    icon_it = header_icons.emplace(category, category_icon(category, Qt::white)).first;
  icon_it->second.paint(p, QRect(static_cast<int>(width()) - 26, 4, 18, 18));
  if (locked_) {  // a lab's locked node: a padlock left of the icon (drawn: no font needed)
    const double x = width() - 44, y = 6;
    p->setPen(QPen(Qt::white, 1.6));
    p->setBrush(Qt::NoBrush);
    p->drawArc(QRectF(x + 3, y, 8, 9), 0, 180 * 16);
    p->drawLine(QPointF(x + 3, y + 4.5), QPointF(x + 3, y + 7));
    p->drawLine(QPointF(x + 11, y + 4.5), QPointF(x + 11, y + 7));
    p->setPen(Qt::NoPen);
    p->setBrush(Qt::white);
    p->drawRoundedRect(QRectF(x, y + 7, 14, 9), 1.5, 1.5);
  }
  f = footerFont();
  p->setFont(f);
  p->setPen(QColor(255, 255, 255, 210));
  const double badge_w = export_problem_ ? 44 : 0;
  p->drawText(
      QRectF(8, 19, width() - 16 - badge_w, 15), Qt::AlignLeft | Qt::AlignVCenter,
      QFontMetrics(f).elidedText(QString::fromStdString(def_ ? def_->display_name : "unknown type"),
                                 Qt::ElideRight, static_cast<int>(width() - 16 - badge_w)));
  // The ONNX badge: a quiet outline when the layer exports, red when it does not.
  if (export_problem_) {
    const bool exports = export_problem_->empty();
    const QRectF badge = badgeRect();
    p->setPen(QPen(QColor(255, 255, 255, exports ? 150 : 0), 1));
    p->setBrush(exports ? QColor(255, 255, 255, 40) : QColor(0xd6, 0x3c, 0x3c));
    p->drawRoundedRect(badge, 6, 6);
    QFont bf = f;
    bf.setPointSizeF(6.5);
    bf.setBold(true);
    p->setFont(bf);
    p->setPen(Qt::white);
    p->drawText(badge, Qt::AlignCenter, exports ? "ONNX ✓" : "ONNX ✗");
    p->setFont(f);
  }

  // Ports.
  const QColor text = pal.color(QPalette::WindowText);
  auto drawPort = [&](bool output, size_t i, const nodes::PortDef& port) {
    const QPointF c = portLocalPos(output, i);
    const bool lit = highlight_ && highlight_->output == output && highlight_->port == port.name;
    const QColor pc =
        port.kind == nodes::PortKind::Labels ? QColor(0xd9, 0x8e, 0x3a) : QColor(0x4e, 0xa0, 0xe6);
    p->setPen(QPen(lit ? QColor(0xf0, 0xb4, 0x29) : pc.darker(130), lit ? 2.5 : 1.2));
    p->setBrush(lit ? QColor(0xf0, 0xb4, 0x29) : pc);
    p->drawEllipse(c, kPortRadius, kPortRadius);
    p->setPen(text);
    const QRectF r = output ? QRectF(width() / 2, c.y() - 9, width() / 2 - 10, 18)
                            : QRectF(10, c.y() - 9, width() / 2 - 10, 18);
    p->drawText(r, (output ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter,
                QString::fromStdString(port.name));
  };
  if (def_) {
    for (size_t i = 0; i < def_->inputs.size(); ++i) drawPort(false, i, def_->inputs[i]);
    for (size_t i = 0; i < def_->outputs.size(); ++i) drawPort(true, i, def_->outputs[i]);
  }

  // The last run's line: a bar for the time share under the figures.
  if (run_) {
    const QRectF time_line(8, footerRect().top() - 2 * kFooter + 2, width() - 16, kFooter - 3);
    const QRectF stats_line = time_line.translated(0, kFooter - 2);
    if (run_->time_share >= 0) {
      QRectF bar = time_line;
      bar.setTop(bar.bottom() - 3);
      p->fillRect(bar, pal.color(QPalette::Mid));
      bar.setWidth(bar.width() * std::clamp(run_->time_share, 0.0, 1.0));
      p->fillRect(bar, QColor(0xe0, 0x8a, 0x2c));
    }
    p->setPen(text);
    const QStringList lines = runText().split('\n');
    const QFontMetrics fm(p->font());
    p->drawText(time_line.adjusted(0, 0, 0, -3), Qt::AlignLeft | Qt::AlignVCenter,
                fm.elidedText(lines.value(0), Qt::ElideRight, static_cast<int>(time_line.width())));
    p->drawText(
        stats_line, Qt::AlignLeft | Qt::AlignVCenter,
        fm.elidedText(lines.value(1), Qt::ElideRight, static_cast<int>(stats_line.width())));
  }

  // Footer: the output shape and parameter count, or why there is none.
  const QRectF foot = footerRect();
  p->setPen(failed               ? QColor(0xd6, 0x3c, 0x3c)
            : analysis_.inferred ? text
                                 : pal.color(QPalette::PlaceholderText));
  // One line per footer line (an error too long for the node is elided; the tooltip has it).
  QRectF row(foot.left(), foot.top(), foot.width(), kFooter - 3);
  for (const QString& line : footer_lines_) {
    p->drawText(
        row, Qt::AlignLeft | Qt::AlignVCenter,
        QFontMetrics(p->font()).elidedText(line, Qt::ElideRight, static_cast<int>(row.width())));
    row.translate(0, kFooterLine);
  }
}

WireItem::WireItem(nodes::LinkDoc link, QPointF from, QPointF to, QString label, bool ok)
    : link_(std::move(link)), path_(curve(from, to)), label_(std::move(label)), ok_(ok) {
  setZValue(0);
  setToolTip(QString::fromStdString(link_.from_node + ":" + link_.from_port + " → " +
                                    link_.to_node + ":" + link_.to_port) +
             (label_.isEmpty() ? QString() : "\nshape " + label_));
  setFlags(ItemIsSelectable);
}

void WireItem::setEnds(QPointF from, QPointF to) {
  setRoute(curve(from, to), QRectF());
}

void WireItem::setRoute(QPainterPath path, QRectF label_rect) {
  prepareGeometryChange();
  path_ = std::move(path);
  label_rect_ = label_rect;
}

QFont WireItem::labelFont() {
  QFont f = QApplication::font();
  f.setPointSizeF(7.5);
  return f;
}

QSizeF WireItem::labelSize() const {
  if (label_.isEmpty()) return {};
  const QFontMetricsF fm(labelFont());
  return QSizeF(std::ceil(fm.horizontalAdvance(label_)) + 10, std::ceil(fm.height()) + 2);
}

QRectF WireItem::labelRect() const {
  if (label_.isEmpty()) return {};
  if (!label_rect_.isNull()) return label_rect_;
  QRectF r(QPointF(), labelSize());
  r.moveCenter(path_.pointAtPercent(0.5));
  return r;
}

QPainterPath WireItem::curve(QPointF from, QPointF to) {
  QPainterPath path(from);
  const double dx = std::max(40.0, std::abs(to.x() - from.x()) * 0.5);
  path.cubicTo(from + QPointF(dx, 0), to - QPointF(dx, 0), to);
  return path;
}

QRectF WireItem::boundingRect() const {
  return path_.boundingRect().adjusted(-4, -4, 4, 4).united(labelRect().adjusted(-2, -2, 2, 2));
}

QPainterPath WireItem::shape() const {
  QPainterPathStroker s;
  s.setWidth(10);
  return s.createStroke(path_);
}

void WireItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  const bool dark = QApplication::palette().color(QPalette::Window).lightness() < 128;
  p->setRenderHint(QPainter::Antialiasing);
  const bool selected = option->state & QStyle::State_Selected;
  QColor c =
      ok_ ? (dark ? QColor(0x8a, 0xa4, 0xc8) : QColor(0x55, 0x6f, 0x94)) : QColor(0x99, 0x99, 0x99);
  if (selected) c = QColor(0xf0, 0xb4, 0x29);
  p->setPen(QPen(c, selected ? 3 : 2));
  p->setBrush(Qt::NoBrush);
  p->drawPath(path_);
  if (label_.isEmpty()) return;
  p->setFont(labelFont());
  const QRectF r = labelRect();
  p->setPen(Qt::NoPen);
  p->setBrush(dark ? QColor(0x1e, 0x1f, 0x22, 230) : QColor(0xff, 0xff, 0xff, 235));
  p->drawRoundedRect(r, 4, 4);
  p->setPen(dark ? QColor(0xc8, 0xd4, 0xe6) : QColor(0x33, 0x44, 0x5c));
  p->drawText(r, Qt::AlignCenter, label_);
}

}  // namespace mls::editor
