#include "editor/parallel_coords.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "editor/run_table_model.h"

namespace mls::editor {

QColor scale_colour(double t) {
  // Five stops of matplotlib's viridis; linear between them.
  static const double kStops[][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  auto mix = [&](int c) {
    return static_cast<int>(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c]));
  };
  return QColor(mix(0), mix(1), mix(2));
}

namespace {

// A cell's number: a number cell, or a text that is one whole number (params are kept as
// text: "0.01", "64").
bool cell_number(const store::Cell& c, double* v) {
  if (c.kind == store::Cell::Kind::Number) {
    *v = c.number;
    return std::isfinite(c.number);
  }
  if (c.kind != store::Cell::Kind::Text || c.text.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(c.text.c_str(), &end);
  return end == c.text.c_str() + c.text.size() && std::isfinite(*v);
}

}  // namespace

double ParallelAxis::position(const store::Cell& c) const {
  if (c.kind == store::Cell::Kind::Null) return -1;
  if (words) {
    const std::string v = c.display();
    auto it = std::lower_bound(categories.begin(), categories.end(), v);
    if (it == categories.end() || *it != v) return -1;
    return categories.size() < 2 ? 0.5
                                 : static_cast<double>(it - categories.begin()) /
                                       static_cast<double>(categories.size() - 1);
  }
  double v = 0;
  if (!cell_number(c, &v)) return -1;
  double t;
  if (log)
    t = (std::log(v) - std::log(min)) / (std::log(max) - std::log(min));
  else
    t = (v - min) / (max - min);
  return std::clamp(t, 0.0, 1.0);
}

std::vector<ParallelAxis> parallel_axes(const std::vector<std::string>& fields,
                                        const std::vector<store::RunRow>& rows) {
  std::vector<ParallelAxis> axes;
  for (size_t k = 0; k < fields.size(); ++k) {
    ParallelAxis a;
    a.field = fields[k];
    a.label = run_column_label(fields[k]);
    std::set<std::string> words;
    double lo = INFINITY, hi = -INFINITY;
    bool any_word = false;
    for (const store::RunRow& r : rows) {
      if (k >= r.cells.size() || r.cells[k].kind == store::Cell::Kind::Null) continue;
      const store::Cell& c = r.cells[k];
      words.insert(c.display());
      double v = 0;
      if (cell_number(c, &v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      } else {
        any_word = true;
      }
    }
    // Any value that is not a number makes the axis one of words (numbers among them too).
    if (any_word) {
      a.words = true;
      a.categories.assign(words.begin(), words.end());
    } else if (std::isfinite(lo)) {
      a.log = lo > 0 && hi / lo >= 10;  // a decade or more
      if (hi == lo) {                   // one value: in the middle of the axis
        a.min = a.log || lo > 0 ? lo / 2 : lo - 0.5;
        a.max = a.log || lo > 0 ? lo * 2 : hi + 0.5;
      } else {
        a.min = lo;
        a.max = hi;
      }
    }
    axes.push_back(std::move(a));
  }
  return axes;
}

ParallelCoords::ParallelCoords(QWidget* parent) : QWidget(parent) {
  setObjectName("runs.parallel");
  setMouseTracking(true);
  setMinimumHeight(100);
}

void ParallelCoords::setData(const std::vector<std::string>& fields,
                             std::vector<store::RunRow> rows, bool higher_is_better) {
  rows_ = std::move(rows);
  higher_is_better_ = higher_is_better;
  std::vector<ParallelAxis> all = parallel_axes(fields, rows_);
  axes_.clear();
  columns_.clear();
  for (size_t k = 0; k < all.size(); ++k) {
    const bool objective = k + 1 == all.size();
    if (!objective) {
      // A setting every run shares says nothing about the sweep.
      std::set<std::string> seen;
      for (const store::RunRow& r : rows_)
        if (k < r.cells.size() && r.cells[k].kind != store::Cell::Kind::Null)
          seen.insert(r.cells[k].display());
      if (seen.size() < 2) continue;
      // Nor does one that is a word of its own for every run (a path, a name).
      if (all[k].words && rows_.size() > 3 && seen.size() == rows_.size()) continue;
    }
    axes_.push_back(std::move(all[k]));
    columns_.push_back(k);
  }
  hovered_ = 0;
  update();
}

void ParallelCoords::setSelected(const std::vector<int64_t>& run_ids) {
  selected_ = run_ids;
  update();
}

void ParallelCoords::setTitle(const QString& title) {
  title_ = title;
  update();
}

QRectF ParallelCoords::plotRect() const {
  return QRectF(60, 46, std::max(10, width() - 120), std::max(10, height() - 46 - 40));
}

double ParallelCoords::axisX(size_t axis) const {
  const QRectF r = plotRect();
  if (axes_.size() < 2) return r.center().x();
  return r.left() + r.width() * static_cast<double>(axis) / static_cast<double>(axes_.size() - 1);
}

QPointF ParallelCoords::pointOf(int64_t run_id, size_t axis) const {
  if (axis >= axes_.size()) return {};
  for (const store::RunRow& r : rows_) {
    if (r.id != run_id) continue;
    const size_t col = columns_[axis];
    const double t = col < r.cells.size() ? axes_[axis].position(r.cells[col]) : -1;
    if (t < 0) return {};
    const QRectF pr = plotRect();
    return {axisX(axis), pr.bottom() - t * pr.height()};
  }
  return {};
}

QColor ParallelCoords::lineColour(size_t row) const {
  if (axes_.empty() || columns_.back() >= rows_[row].cells.size()) return QColor(128, 128, 128);
  const double t = axes_.back().position(rows_[row].cells[columns_.back()]);
  if (t < 0) return QColor(128, 128, 128);
  // The scale's darkest fifth is left out: it would vanish on a dark background.
  return scale_colour(0.2 + 0.8 * (higher_is_better_ ? t : 1 - t));
}

int64_t ParallelCoords::runAt(QPointF p) const {
  double best = 5.0;
  int64_t found = 0;
  for (const store::RunRow& r : rows_) {
    QPointF prev;
    bool have = false;
    for (size_t a = 0; a < axes_.size(); ++a) {
      const QPointF q = pointOf(r.id, a);
      if (q.isNull()) {
        have = false;
        continue;
      }
      if (have) {
        // The distance from p to the segment prev..q.
        const QPointF d = q - prev;
        const double len2 = QPointF::dotProduct(d, d);
        const double u =
            len2 > 0 ? std::clamp(QPointF::dotProduct(p - prev, d) / len2, 0.0, 1.0) : 0.0;
        const QPointF c = prev + u * d;
        const double dist = std::hypot(p.x() - c.x(), p.y() - c.y());
        if (dist < best) {
          best = dist;
          found = r.id;
        }
      } else if (std::hypot(p.x() - q.x(), p.y() - q.y()) < best) {
        best = std::hypot(p.x() - q.x(), p.y() - q.y());
        found = r.id;
      }
      prev = q;
      have = true;
    }
  }
  return found;
}

static QString tick(double v) {
  return QString::number(v, 'g', 3);
}

void ParallelCoords::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), palette().base());
  const QColor fg = palette().text().color();
  if (!title_.isEmpty()) {
    p.setPen(fg);
    p.drawText(QRectF(8, 4, width() - 16, 18), Qt::AlignLeft | Qt::AlignVCenter, title_);
  }
  if (axes_.empty() || rows_.empty()) {
    p.setPen(palette().placeholderText().color());
    p.drawText(rect(), Qt::AlignCenter,
               "Select a sweep's run (or filter the table) and press Parallel coordinates");
    return;
  }
  const QRectF pr = plotRect();
  // The lines, the worst first so the best stay on top; selected and hovered last.
  std::vector<size_t> order(rows_.size());
  std::iota(order.begin(), order.end(), 0);
  auto quality = [&](size_t i) {
    if (columns_.back() >= rows_[i].cells.size()) return -1.0;
    const double t = axes_.back().position(rows_[i].cells[columns_.back()]);
    return t < 0 ? -1.0 : (higher_is_better_ ? t : 1 - t);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return quality(a) < quality(b); });
  auto draw_line = [&](size_t i, QPen pen) {
    QPainterPath path;
    bool have = false;
    for (size_t a = 0; a < axes_.size(); ++a) {
      const QPointF q = pointOf(rows_[i].id, a);
      if (q.isNull()) {
        have = false;
        continue;
      }
      if (have)
        path.lineTo(q);
      else
        path.moveTo(q);
      have = true;
    }
    p.setPen(pen);
    p.drawPath(path);
  };
  for (size_t i : order) {
    QColor c = lineColour(i);
    c.setAlpha(rows_.size() > 200 ? 110 : 200);
    draw_line(i, QPen(c, 1.6));
  }
  for (size_t i = 0; i < rows_.size(); ++i) {
    const bool sel = std::find(selected_.begin(), selected_.end(), rows_[i].id) != selected_.end();
    if (sel) draw_line(i, QPen(QColor(240, 80, 80), 3));
    if (rows_[i].id == hovered_) draw_line(i, QPen(fg, 3));
  }
  // The axes over the lines, with their names above and their ranges.
  QFont small = font();
  small.setPointSizeF(std::max(7.0, small.pointSizeF() - 1));
  for (size_t a = 0; a < axes_.size(); ++a) {
    const ParallelAxis& ax = axes_[a];
    const double x = axisX(a);
    const bool objective = a + 1 == axes_.size();
    p.setPen(QPen(fg, objective ? 2 : 1.2));
    p.drawLine(QPointF(x, pr.top()), QPointF(x, pr.bottom()));
    p.setFont(font());
    QString name = ax.label + (ax.log ? " (log)" : "");
    if (objective) name += higher_is_better_ ? "  ▲ better" : "  ▼ better";
    // Centred over its axis, kept inside the widget (the first and last axes' names).
    QRectF label(x - 90, pr.top() - 22, 180, 18);
    if (label.left() < 2) label.moveLeft(2);
    if (label.right() > width() - 2) label.moveRight(width() - 2);
    p.drawText(label, Qt::AlignCenter, name);
    p.setFont(small);
    auto label_at = [&](double t, const QString& text) {
      const double y = pr.bottom() - t * pr.height();
      p.drawLine(QPointF(x - 3, y), QPointF(x + 3, y));
      p.drawText(QRectF(x + 5, y - 8, 80, 16), Qt::AlignLeft | Qt::AlignVCenter, text);
    };
    if (ax.words) {
      for (size_t k = 0; k < ax.categories.size(); ++k)
        label_at(ax.categories.size() < 2
                     ? 0.5
                     : static_cast<double>(k) / static_cast<double>(ax.categories.size() - 1),
                 QString::fromStdString(ax.categories[k]));
    } else {
      label_at(0, tick(ax.min));
      label_at(1, tick(ax.max));
      if (ax.log)  // the decades between
        for (double d = std::ceil(std::log10(ax.min)); d < std::log10(ax.max); d += 1) {
          const double v = std::pow(10.0, d);
          if (v > ax.min * 1.5 && v < ax.max / 1.5)
            label_at((std::log(v) - std::log(ax.min)) / (std::log(ax.max) - std::log(ax.min)),
                     tick(v));
        }
    }
  }
  p.setFont(font());
  p.setPen(palette().placeholderText().color());
  p.drawText(QRectF(8, height() - 22, width() - 16, 18), Qt::AlignLeft | Qt::AlignVCenter,
             QString("%1 runs · coloured by %2 (bright: better) · click a line to select its run")
                 .arg(rows_.size())
                 .arg(axes_.back().label));
}

void ParallelCoords::mouseMoveEvent(QMouseEvent* e) {
  const int64_t id = runAt(e->position());
  if (id != hovered_) {
    hovered_ = id;
    update();
  }
  if (!id) return QToolTip::hideText();
  QString text = QString("run %1").arg(id);
  for (const store::RunRow& r : rows_) {
    if (r.id != id) continue;
    for (size_t a = 0; a < axes_.size(); ++a)
      if (columns_[a] < r.cells.size())
        text += QString("\n%1 = %2")
                    .arg(axes_[a].label)
                    .arg(QString::fromStdString(r.cells[columns_[a]].display()));
  }
  QToolTip::showText(e->globalPosition().toPoint(), text, this);
}

void ParallelCoords::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  if (const int64_t id = runAt(e->position())) Q_EMIT runClicked(id);
}

void ParallelCoords::leaveEvent(QEvent*) {
  hovered_ = 0;
  update();
}

}  // namespace mls::editor
