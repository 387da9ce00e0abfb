#include "editor/param_colours.h"

#include <QLinearGradient>
#include <QPainter>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <set>

namespace mls::editor {

namespace {

// Blue (low) .. teal .. amber .. red (high): readable on the dark and the light dashboard.
uint32_t overlay_colour(double t) {
  static const int kStops[][3] = {{66, 133, 244}, {40, 190, 170}, {245, 185, 40}, {232, 65, 60}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 3;
  const int i = std::min(2, static_cast<int>(t));
  const double f = t - i;
  auto mix = [&](int c) {
    return static_cast<uint32_t>(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c]));
  };
  return mix(0) << 16 | mix(1) << 8 | mix(2);
}

const uint32_t kWords[] = {0x4285f4, 0xe8413c, 0x34a853, 0xf5b928,
                           0xa142f4, 0x24c1e0, 0xff7b2e, 0x9aa0a6};
constexpr uint32_t kNoValue = 0x909090;

bool as_number(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*v);
}

QColor qcolour(uint32_t c) {
  return QColor(c >> 16 & 0xff, c >> 8 & 0xff, c & 0xff);
}

}  // namespace

uint32_t ParamColours::colour(const std::string& value) const {
  if (value.empty() || key.empty()) return kNoValue;
  if (words) {
    auto it = std::lower_bound(values.begin(), values.end(), value);
    if (it == values.end() || *it != value) return kNoValue;
    return kWords[static_cast<size_t>(it - values.begin()) % std::size(kWords)];
  }
  double v = 0;
  if (!as_number(value, &v)) return kNoValue;
  if (max <= min) return overlay_colour(0.5);
  const double t = log && v > 0 ? (std::log(v) - std::log(min)) / (std::log(max) - std::log(min))
                                : (v - min) / (max - min);
  return overlay_colour(t);
}

std::string ParamColours::legend() const {
  if (key.empty()) return "";
  if (words) {
    std::string s = key + ":";
    for (size_t i = 0; i < values.size(); ++i) {
      static const char* const kNames[] = {"blue",   "red",  "green",  "yellow",
                                           "purple", "cyan", "orange", "grey"};
      s += (i ? ", " : " ") + values[i] + " " + kNames[i % std::size(kNames)];
    }
    return s;
  }
  auto num = [](double v) { return QString::number(v, 'g', 4).toStdString(); };
  return key + ": blue " + num(min) + " .. red " + num(max) + (log ? " (log scale)" : "");
}

ParamColours param_colours(const std::string& key, const std::vector<std::string>& values) {
  ParamColours c;
  c.key = key;
  std::set<std::string> distinct;
  double lo = INFINITY, hi = -INFINITY;
  for (const std::string& s : values) {
    if (s.empty()) continue;
    distinct.insert(s);
    double v = 0;
    if (!as_number(s, &v)) {
      c.words = true;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (c.words || !std::isfinite(lo)) {
    c.words = true;
    c.values.assign(distinct.begin(), distinct.end());
    return c;
  }
  c.min = lo;
  c.max = hi;
  c.log = lo > 0 && hi / lo >= 10;  // a decade or more
  return c;
}

ColourLegend::ColourLegend(QWidget* parent) : QWidget(parent) {
  setMinimumSize(180, 22);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void ColourLegend::set(const ParamColours& c) {
  colours_ = c;
  setToolTip(QString::fromStdString(c.legend()));
  update();
}

void ColourLegend::paintEvent(QPaintEvent*) {
  if (colours_.key.empty()) return;
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF bar(2, 3, width() - 4, 8);
  QFont f = font();
  f.setPointSizeF(std::max(7.0, f.pointSizeF() - 1.5));
  p.setFont(f);
  p.setPen(palette().text().color());
  if (colours_.words) {
    const size_t n = std::max<size_t>(1, colours_.values.size());
    const double w = bar.width() / static_cast<double>(n);
    for (size_t i = 0; i < colours_.values.size(); ++i) {
      p.fillRect(QRectF(bar.left() + w * i, bar.top(), w - 2, bar.height()),
                 qcolour(kWords[i % std::size(kWords)]));
      p.drawText(QRectF(bar.left() + w * i, bar.bottom(), w, 12), Qt::AlignLeft,
                 QString::fromStdString(colours_.values[i]));
    }
    return;
  }
  QLinearGradient g(bar.topLeft(), bar.topRight());
  for (int i = 0; i <= 8; ++i) g.setColorAt(i / 8.0, qcolour(overlay_colour(i / 8.0)));
  p.fillRect(bar, g);
  p.drawText(QRectF(bar.left(), bar.bottom(), bar.width(), 12), Qt::AlignLeft,
             QString::number(colours_.min, 'g', 3));
  p.drawText(QRectF(bar.left(), bar.bottom(), bar.width(), 12), Qt::AlignRight,
             QString::number(colours_.max, 'g', 3) + (colours_.log ? " (log)" : ""));
}

}  // namespace mls::editor
