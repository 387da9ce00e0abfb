// SVG figures to PNG through Qt SVG (a build without the GUI has no Qt: --png is refused).
#include "app/figure_png.h"

#include <cstdlib>
#include <filesystem>
#include <memory>

#ifdef MLSTUDIO_WITH_GUI
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QSvgRenderer>
#endif

namespace mls::app {

namespace fs = std::filesystem;

#ifdef MLSTUDIO_WITH_GUI

namespace {

// QPainter draws text only under a QGuiApplication; the command line has none.
void ensure_gui_app() {
  if (QCoreApplication::instance()) return;
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  static int argc = 1;
  static char name[] = "mlstudio";
  static char* argv[] = {name, nullptr};
  static std::unique_ptr<QGuiApplication> app = std::make_unique<QGuiApplication>(argc, argv);
}

}  // namespace

Result<size_t> rasterise_figures(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> todo;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".svg") continue;
    fs::path png = e.path();
    png.replace_extension(".png");
    if (fs::exists(png, ec) && fs::last_write_time(png, ec) >= fs::last_write_time(e.path(), ec))
      continue;
    todo.push_back(e.path());
  }
  if (ec) return make_error("cannot read " + dir + ": " + ec.message());
  if (todo.empty()) return size_t{0};
  ensure_gui_app();
  for (const auto& svg : todo) {
    QSvgRenderer renderer(QString::fromStdString(svg.string()));
    if (!renderer.isValid()) return make_error(svg.string() + ": not an SVG Qt can read");
    const QSize size = renderer.defaultSize();
    if (size.isEmpty()) return make_error(svg.string() + ": the SVG has no size");
    QImage image(size, QImage::Format_RGB32);
    image.fill(Qt::white);
    {
      QPainter painter(&image);
      painter.setRenderHint(QPainter::Antialiasing);
      painter.setRenderHint(QPainter::TextAntialiasing);
      renderer.render(&painter, QRectF(0, 0, size.width(), size.height()));
    }
    fs::path png = svg;
    png.replace_extension(".png");
    if (!image.save(QString::fromStdString(png.string()), "PNG"))
      return make_error("cannot write " + png.string());
  }
  return todo.size();
}

#else

Result<size_t> rasterise_figures(const std::string& dir) {
  return make_error(
      "--png: this mlstudio was built without Qt (MLSTUDIO_BUILD_GUI=OFF); the "
      "figures in " +
      dir + " are SVG only");
}

#endif

}  // namespace mls::app
