#include "editor/theme.h"

#include <QApplication>
#include <QFile>
#include <QIconEngine>
#include <QPainter>
#include <QStyle>
#include <QStyleFactory>
#include <QSvgRenderer>
#include <map>

namespace mls::editor {

namespace {

// Renders an SVG at the size asked for, times the device pixel ratio: no scaled bitmaps.
class SvgIconEngine final : public QIconEngine {
 public:
  SvgIconEngine(QByteArray normal, QByteArray disabled)
      : normal_(std::move(normal)), disabled_(std::move(disabled)) {}

  void paint(QPainter* p, const QRect& rect, QIcon::Mode mode, QIcon::State) override {
    QSvgRenderer r(mode == QIcon::Disabled ? disabled_ : normal_);
    r.render(p, rect);
  }
  QPixmap pixmap(const QSize& size, QIcon::Mode mode, QIcon::State state) override {
    return scaledPixmap(size, mode, state, 1.0);
  }
  // QIcon asks with `size` in device pixels already (the logical size times `scale`).
  QPixmap scaledPixmap(const QSize& size, QIcon::Mode mode, QIcon::State state,
                       qreal scale) override {
    QPixmap pm(size);
    pm.fill(Qt::transparent);
    {
      QPainter p(&pm);
      p.setRenderHint(QPainter::Antialiasing);
      paint(&p, QRect(QPoint(0, 0), pm.size()), mode, state);
    }
    pm.setDevicePixelRatio(scale);
    return pm;
  }
  QIconEngine* clone() const override { return new SvgIconEngine(normal_, disabled_); }
  QString key() const override { return "mls.svg"; }

 private:
  QByteArray normal_, disabled_;
};

QByteArray tinted(QByteArray svg, const QColor& c) {
  return svg.replace("currentColor", c.name(QColor::HexRgb).toLatin1());
}

}  // namespace

QPalette dark_palette() {
  QPalette p;
  const QColor window(0x25, 0x26, 0x2a), base(0x1d, 0x1e, 0x21), text(0xdc, 0xde, 0xe2),
      accent(0x3a, 0x7b, 0xd5);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x32, 0x37));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x84, 0x88, 0x90));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor(0x2e, 0x30, 0x35));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::Highlight, accent);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, accent.lighter(130));
  p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x6a, 0x6d, 0x73));
  p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x6a, 0x6d, 0x73));
  p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x6a, 0x6d, 0x73));
  return p;
}

void apply_theme(bool dark) {
  QApplication::setStyle(QStyleFactory::create("Fusion"));
  QApplication::setPalette(dark ? dark_palette() : QApplication::style()->standardPalette());
}

QIcon icon(const QString& name, const QColor& color) {
  QFile f(":/icons/" + name + ".svg");
  if (!f.open(QIODevice::ReadOnly)) return {};
  const QByteArray svg = f.readAll();
  const QPalette pal = QApplication::palette();
  const QColor c = color.isValid() ? color : pal.color(QPalette::ButtonText);
  const QColor off = color.isValid() ? QColor(0x80, 0x80, 0x80)
                                     : pal.color(QPalette::Disabled, QPalette::ButtonText);
  return QIcon(new SvgIconEngine(tinted(svg, c), tinted(svg, off)));
}

QIcon category_icon(const std::string& category, const QColor& color) {
  static const std::map<std::string, QString> kFiles = {
      {"Data", "data"},   {"Layers", "layers"},     {"Activations", "activations"},
      {"Merge", "merge"}, {"Sequence", "sequence"}, {"Losses", "losses"}};
  const auto it = kFiles.find(category);
  return icon(it == kFiles.end() ? QString("layers") : it->second, color);
}

QIcon app_icon() {
  QFile f(":/icons/mlstudio.svg");
  if (!f.open(QIODevice::ReadOnly)) return {};
  const QByteArray svg = f.readAll();
  return QIcon(new SvgIconEngine(svg, svg));
}

}  // namespace mls::editor
