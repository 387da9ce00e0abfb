#include "editor/gui.h"

#include <QApplication>
#include <QTimer>

#include "editor/main_window.h"

namespace mls::editor {

int run_gui(int argc, char** argv, const std::string& path) {
  QApplication::setApplicationName("mlstudio");
  QApplication::setOrganizationName("mlstudio");
  QApplication::setApplicationVersion(MLSTUDIO_VERSION);
  QApplication app(argc, argv);
  MainWindow w;
  if (!path.empty()) (void)w.openFile(QString::fromStdString(path));
  w.show();
  QTimer::singleShot(0, w.view(), &CanvasView::fitAll);  // once the window has its size
  return QApplication::exec();
}

}  // namespace mls::editor
