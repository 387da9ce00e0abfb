// A Dear ImGui panel inside the Qt window: a QOpenGLWidget with its own ImGui context, fed
// with Qt's mouse, keyboard and focus events, redrawn by a timer while it is visible.
// Immediate-mode suits views that change every frame (live charts, a memory timeline) and
// would cost a QWidget tree to keep in sync.
//
//   class LossPanel : public ImGuiHost {
//     void draw() override {                     // the context is current; once a frame
//       if (beginFullWindow("loss")) {           // an ImGui window filling the widget
//         if (ImGui::Button("Reset")) reset();
//         plot_lines("##loss", series, opts);    // editor/imgui_plot.h
//       }
//       endFullWindow();                         // always, like ImGui::End
//     }
//   };
//   auto* p = new LossPanel;  p->setFrameRate(30);  // 0: redraw only on input / update()
//   p->framesPerSecond();                        // frames drawn in the last second
//   if (!ImGuiHost::isSupported()) ...           // no OpenGL: show something else instead
#pragma once

#include <QElapsedTimer>
#include <QOpenGLWidget>
#include <QTimer>
#include <cstdint>
#include <deque>
#include <vector>

struct ImGuiContext;

namespace mls::editor {

class ImGuiHost : public QOpenGLWidget {
  Q_OBJECT
 public:
  explicit ImGuiHost(QWidget* parent = nullptr);
  ~ImGuiHost() override;

  // Whether this platform makes OpenGL contexts (needs the QGuiApplication). Not under
  // QT_QPA_PLATFORM=offscreen, where Qt 6.4 crashes flushing a window that holds an
  // OpenGL widget: there, callers leave the panel out.
  static bool isSupported();

  // Frames a second while visible (default 30); 0 draws only after input or update().
  void setFrameRate(int fps);
  int frameRate() const { return fps_; }
  // Frames drawn during the last second, and since the widget was created.
  double framesPerSecond() const;
  int64_t frameCount() const { return frames_; }
  // This widget's ImGui context (null until the widget is first shown). Make it current
  // (ImGui::SetCurrentContext) before any ImGui call outside draw().
  ImGuiContext* imguiContext() const { return ctx_; }

 protected:
  // Issues this frame's ImGui calls; the widget's context is current. Default: nothing.
  virtual void draw() {}
  // An ImGui window over the whole widget, without title bar, move or resize. Call
  // endFullWindow() whatever this returns (false: nothing of it is visible).
  bool beginFullWindow(const char* id);
  void endFullWindow();

  void initializeGL() override;
  void paintGL() override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void leaveEvent(QEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void keyReleaseEvent(QKeyEvent* e) override;
  void focusInEvent(QFocusEvent* e) override;
  void focusOutEvent(QFocusEvent* e) override;
  void showEvent(QShowEvent* e) override;
  void hideEvent(QHideEvent* e) override;
  // Tab stays in the panel while ImGui edits text; otherwise it moves Qt's focus on.
  bool focusNextPrevChild(bool next) override;

 private:
  // ImGui 1.86 reads input as state (io.MouseDown, io.KeysDown), not as events: a press and
  // its release within one frame would be lost. Events queue here and each frame takes
  // them until a button or key would change twice (as 1.87's input queue trickles them).
  struct Input {
    enum Kind { kMousePos, kMouseButton, kWheel, kKey, kText, kFocus } kind;
    float x = 0, y = 0;  // position, or the wheel's horizontal and vertical steps
    int code = 0;        // mouse button, or ImGui key index (-1: only the modifiers)
    bool down = false;   // button or key pressed; focus gained
    Qt::KeyboardModifiers mods;
    QByteArray text;
  };
  void queue(Input in);
  void queueMouse(QMouseEvent* e, bool down);
  void queueKey(QKeyEvent* e, bool down);
  void applyInput();
  void loadFont(double dpr);
  void releaseGL();
  void updateCursor();

  ImGuiContext* ctx_ = nullptr;
  bool gl_ready_ = false;
  bool fonts_uploaded_ = false;  // the backend made its font texture (on its first frame)
  double font_dpr_ = 0;
  QMetaObject::Connection gl_teardown_;
  std::deque<Input> input_;
  int extra_frames_ = 0;  // frames still owed after input (a click needs a few)
  int fps_ = 30;
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_frame_ns_ = -1;
  std::deque<qint64> recent_ms_;  // when the frames of the last second were drawn
  int64_t frames_ = 0;
  int cursor_ = 0;  // the ImGuiMouseCursor shown
  QByteArray clipboard_;
};

}  // namespace mls::editor
