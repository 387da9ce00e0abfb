#include "editor/imgui_host.h"

#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <QClipboard>
#include <QGuiApplication>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QWheelEvent>
#include <algorithm>
#include <bitset>
#include <cfloat>
#include <cmath>

namespace mls::editor {

namespace {

// ImGui's default font (ProggyClean) is drawn for 13 px; text keeps that size in logical
// pixels and is rasterised at the screen's resolution.
constexpr float kFontPx = 13.0f;

// The ImGui 1.86 key (an index into io.KeysDown, mapped 1:1 by io.KeyMap) of a Qt key;
// -1 for the keys ImGui does not ask about (letters arrive as text).
int imguiKey(int key) {
  switch (key) {
    case Qt::Key_Tab:
    case Qt::Key_Backtab:
      return ImGuiKey_Tab;
    case Qt::Key_Left:
      return ImGuiKey_LeftArrow;
    case Qt::Key_Right:
      return ImGuiKey_RightArrow;
    case Qt::Key_Up:
      return ImGuiKey_UpArrow;
    case Qt::Key_Down:
      return ImGuiKey_DownArrow;
    case Qt::Key_PageUp:
      return ImGuiKey_PageUp;
    case Qt::Key_PageDown:
      return ImGuiKey_PageDown;
    case Qt::Key_Home:
      return ImGuiKey_Home;
    case Qt::Key_End:
      return ImGuiKey_End;
    case Qt::Key_Insert:
      return ImGuiKey_Insert;
    case Qt::Key_Delete:
      return ImGuiKey_Delete;
    case Qt::Key_Backspace:
      return ImGuiKey_Backspace;
    case Qt::Key_Space:
      return ImGuiKey_Space;
    case Qt::Key_Return:
      return ImGuiKey_Enter;
    case Qt::Key_Enter:
      return ImGuiKey_KeyPadEnter;
    case Qt::Key_Escape:
      return ImGuiKey_Escape;
    case Qt::Key_A:
      return ImGuiKey_A;
    case Qt::Key_C:
      return ImGuiKey_C;
    case Qt::Key_V:
      return ImGuiKey_V;
    case Qt::Key_X:
      return ImGuiKey_X;
    case Qt::Key_Y:
      return ImGuiKey_Y;
    case Qt::Key_Z:
      return ImGuiKey_Z;
    default:
      return -1;
  }
}

int imguiButton(Qt::MouseButton b) {
  switch (b) {
    case Qt::LeftButton:
      return ImGuiMouseButton_Left;
    case Qt::RightButton:
      return ImGuiMouseButton_Right;
    case Qt::MiddleButton:
      return ImGuiMouseButton_Middle;
    case Qt::BackButton:
      return 3;
    case Qt::ForwardButton:
      return 4;
    default:
      return -1;
  }
}

void setModifiers(ImGuiIO& io, Qt::KeyboardModifiers m) {
  io.KeyCtrl = m.testFlag(Qt::ControlModifier);
  io.KeyShift = m.testFlag(Qt::ShiftModifier);
  io.KeyAlt = m.testFlag(Qt::AltModifier);
  io.KeySuper = m.testFlag(Qt::MetaModifier);
}

// The GLSL the backend's shaders are written in, for the context Qt made.
const char* glslVersion(const QOpenGLContext& ctx) {
  const QSurfaceFormat f = ctx.format();
  const int v = f.majorVersion() * 10 + f.minorVersion();
  if (ctx.isOpenGLES()) return v >= 30 ? "#version 300 es" : "#version 100";
  if (f.profile() == QSurfaceFormat::CoreProfile && v >= 32) return "#version 150";
  return v >= 30 ? "#version 130" : "#version 120";
}

}  // namespace

ImGuiHost::ImGuiHost(QWidget* parent) : QOpenGLWidget(parent) {
  setMouseTracking(true);  // hover highlights and tooltips need moves without a button
  setFocusPolicy(Qt::StrongFocus);
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(1000 / fps_);
  connect(&timer_, &QTimer::timeout, this, [this] {
    if (isVisible()) update();
  });
  clock_.start();
}

ImGuiHost::~ImGuiHost() {
  // ~QOpenGLWidget destroys the GL context later, when this part of the object is gone.
  disconnect(gl_teardown_);
  releaseGL();
  if (ctx_) ImGui::DestroyContext(ctx_);  // restores whichever context was current
}

bool ImGuiHost::isSupported() {
  static const bool supported = [] {
    QOpenGLContext probe;
    return probe.create();
  }();
  return supported;
}

void ImGuiHost::setFrameRate(int fps) {
  fps_ = std::max(0, fps);
  if (fps_ == 0) {
    timer_.stop();
    return;
  }
  // A coarse timer may fire 5% late: 30 asked would draw 28. Precise keeps the rate asked.
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(std::max(1, 1000 / fps_));
  if (isVisible()) timer_.start();
}

double ImGuiHost::framesPerSecond() const {
  const qint64 since = clock_.elapsed() - 1000;
  return double(recent_ms_.end() - std::upper_bound(recent_ms_.begin(), recent_ms_.end(), since));
}

void ImGuiHost::initializeGL() {
  if (!ctx_) {
    IMGUI_CHECKVERSION();
    ctx_ = ImGui::CreateContext();
    ImGui::SetCurrentContext(ctx_);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // the layout is the widget's: nothing to keep between runs
    io.LogFilename = nullptr;
    io.BackendPlatformName = "mlstudio_qt";
    io.BackendFlags |= ImGuiBackendFlags_HasMouseCursors;
    for (int k = 0; k < ImGuiKey_COUNT; ++k) io.KeyMap[k] = k;
    // The system clipboard, not ImGui's private one.
    io.ClipboardUserData = this;
    io.SetClipboardTextFn = [](void*, const char* text) {
      QGuiApplication::clipboard()->setText(QString::fromUtf8(text));
    };
    io.GetClipboardTextFn = [](void* self) -> const char* {
      auto* host = static_cast<ImGuiHost*>(self);
      host->clipboard_ = QGuiApplication::clipboard()->text().toUtf8();
      return host->clipboard_.constData();
    };
    ImGui::StyleColorsDark();
  }
  ImGui::SetCurrentContext(ctx_);
  loadFont(devicePixelRatioF());
  if (!ImGui_ImplOpenGL3_Init(glslVersion(*context()))) {
    qWarning("ImGuiHost: the OpenGL 3 renderer did not start; the panel stays empty");
    return;
  }
  gl_ready_ = true;
  fonts_uploaded_ = false;
  // Qt makes a new context when the widget moves to another window: the backend's GL
  // objects go with the old one and are made again in the next initializeGL.
  gl_teardown_ = connect(
      context(), &QOpenGLContext::aboutToBeDestroyed, this, [this] { releaseGL(); },
      Qt::DirectConnection);
}

void ImGuiHost::releaseGL() {
  if (!gl_ready_) return;
  makeCurrent();
  ImGui::SetCurrentContext(ctx_);
  ImGui_ImplOpenGL3_Shutdown();
  doneCurrent();
  gl_ready_ = false;
  fonts_uploaded_ = false;
}

void ImGuiHost::loadFont(double dpr) {
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ImFontConfig cfg;
  cfg.SizePixels = std::max(kFontPx, std::round(kFontPx * float(dpr)));
  io.Fonts->AddFontDefault(&cfg);
  io.FontGlobalScale = kFontPx / cfg.SizePixels;
  font_dpr_ = dpr;
}

void ImGuiHost::paintGL() {
  if (!gl_ready_) return;
  ImGui::SetCurrentContext(ctx_);
  ImGuiIO& io = ImGui::GetIO();
  const double dpr = devicePixelRatioF();
  if (dpr != font_dpr_) {  // moved to a screen of another scale
    loadFont(dpr);
    if (fonts_uploaded_) {
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
    }
  }
  io.DisplaySize = ImVec2(float(width()), float(height()));
  io.DisplayFramebufferScale = ImVec2(float(dpr), float(dpr));
  const qint64 now_ns = clock_.nsecsElapsed();
  io.DeltaTime =
      last_frame_ns_ < 0 ? 1.0f / 60 : std::max(1e-6f, float(now_ns - last_frame_ns_) * 1e-9f);
  last_frame_ns_ = now_ns;
  applyInput();

  ImGui_ImplOpenGL3_NewFrame();
  fonts_uploaded_ = true;
  ImGui::NewFrame();
  draw();
  ImGui::Render();

  QOpenGLFunctions* gl = context()->functions();
  const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  gl->glClearColor(bg.x, bg.y, bg.z, 1.0f);
  gl->glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  updateCursor();

  ++frames_;
  const qint64 now_ms = now_ns / 1000000;
  recent_ms_.push_back(now_ms);
  while (recent_ms_.front() < now_ms - 1000) recent_ms_.pop_front();
  // Input left for later frames, or a widget that reacts a frame after the input (a click
  // is seen on press and acted on at release): draw again even without the timer.
  if (!input_.empty() || extra_frames_ > 0) {
    extra_frames_ = std::max(0, extra_frames_ - 1);
    update();
  }
}

void ImGuiHost::applyInput() {
  ImGuiIO& io = ImGui::GetIO();
  unsigned buttons_changed = 0;
  std::bitset<ImGuiKey_COUNT> keys_changed;
  while (!input_.empty()) {
    const Input& in = input_.front();
    switch (in.kind) {
      case Input::kMousePos:
        if (buttons_changed) return;  // the click is seen where it happened
        io.MousePos = ImVec2(in.x, in.y);
        break;
      case Input::kMouseButton:
        if (buttons_changed & (1u << in.code)) return;
        if (io.MouseDown[in.code] != in.down) buttons_changed |= 1u << in.code;
        io.MouseDown[in.code] = in.down;
        setModifiers(io, in.mods);
        break;
      case Input::kWheel:
        io.MouseWheelH += in.x;
        io.MouseWheel += in.y;
        break;
      case Input::kKey:
        if (in.code >= 0) {
          if (keys_changed[size_t(in.code)]) return;
          if (io.KeysDown[in.code] != in.down) keys_changed.set(size_t(in.code));
          io.KeysDown[in.code] = in.down;
        }
        setModifiers(io, in.mods);
        break;
      case Input::kText:
        setModifiers(io, in.mods);
        io.AddInputCharactersUTF8(in.text.constData());
        break;
      case Input::kFocus:
        io.AddFocusEvent(in.down);
        break;
    }
    input_.pop_front();
  }
}

void ImGuiHost::queue(Input in) {
  // Nothing draws while the panel is hidden or has no GL: keep the queue bounded.
  if (input_.size() >= 1024) input_.pop_front();
  input_.push_back(std::move(in));
  extra_frames_ = 2;
  update();
}

void ImGuiHost::queueMouse(QMouseEvent* e, bool down) {
  const QPointF p = e->position();
  queue({.kind = Input::kMousePos, .x = float(p.x()), .y = float(p.y())});
  const int b = imguiButton(e->button());
  if (b >= 0) queue({.kind = Input::kMouseButton, .code = b, .down = down, .mods = e->modifiers()});
  e->accept();
}

void ImGuiHost::mouseMoveEvent(QMouseEvent* e) {
  const QPointF p = e->position();
  queue({.kind = Input::kMousePos, .x = float(p.x()), .y = float(p.y())});
}

void ImGuiHost::mousePressEvent(QMouseEvent* e) {
  queueMouse(e, true);
}
void ImGuiHost::mouseReleaseEvent(QMouseEvent* e) {
  queueMouse(e, false);
}
// ImGui times double-clicks itself: to it, Qt's double-click is the second press.
void ImGuiHost::mouseDoubleClickEvent(QMouseEvent* e) {
  queueMouse(e, true);
}

void ImGuiHost::wheelEvent(QWheelEvent* e) {
  // One notch (120 eighths of a degree) is one ImGui wheel step.
  const QPoint d = e->angleDelta();
  queue({.kind = Input::kWheel, .x = float(d.x()) / 120.0f, .y = float(d.y()) / 120.0f});
  e->accept();
}

void ImGuiHost::leaveEvent(QEvent* e) {
  queue({.kind = Input::kMousePos, .x = -FLT_MAX, .y = -FLT_MAX});  // ImGui's "no mouse"
  QOpenGLWidget::leaveEvent(e);
}

void ImGuiHost::queueKey(QKeyEvent* e, bool down) {
  // ImGui repeats held keys itself; Qt's auto-repeat would look like quick re-presses.
  // Keys ImGui does not know (Ctrl, Shift themselves) still bring the modifiers' state.
  if (!e->isAutoRepeat())
    queue({.kind = Input::kKey, .code = imguiKey(e->key()), .down = down, .mods = e->modifiers()});
  if (down && !e->modifiers().testFlag(Qt::ControlModifier)) {
    QString printable;
    for (QChar c : e->text())
      if (c.isPrint()) printable += c;  // control characters come as keys above
    if (!printable.isEmpty())
      queue({.kind = Input::kText, .mods = e->modifiers(), .text = printable.toUtf8()});
  }
  e->accept();
}

void ImGuiHost::keyPressEvent(QKeyEvent* e) {
  queueKey(e, true);
}
void ImGuiHost::keyReleaseEvent(QKeyEvent* e) {
  queueKey(e, false);
}

void ImGuiHost::focusInEvent(QFocusEvent* e) {
  queue({.kind = Input::kFocus, .down = true});
  QOpenGLWidget::focusInEvent(e);
}

void ImGuiHost::focusOutEvent(QFocusEvent* e) {
  queue({.kind = Input::kFocus, .down = false});  // ImGui releases the keys it holds
  QOpenGLWidget::focusOutEvent(e);
}

bool ImGuiHost::focusNextPrevChild(bool next) {
  if (ctx_) {
    ImGui::SetCurrentContext(ctx_);
    if (ImGui::GetIO().WantTextInput) return false;  // Tab reaches keyPressEvent
  }
  return QOpenGLWidget::focusNextPrevChild(next);
}

void ImGuiHost::showEvent(QShowEvent* e) {
  if (fps_ > 0) timer_.start();
  QOpenGLWidget::showEvent(e);
}

void ImGuiHost::hideEvent(QHideEvent* e) {
  timer_.stop();
  QOpenGLWidget::hideEvent(e);
}

bool ImGuiHost::beginFullWindow(const char* id) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowBorderSize, 0.0f);
  const bool open =
      ImGui::Begin(id, nullptr,
                   ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize |
                       ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                       ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::PopStyleVar(2);
  return open;
}

void ImGuiHost::endFullWindow() {
  ImGui::End();
}

void ImGuiHost::updateCursor() {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.ConfigFlags & ImGuiConfigFlags_NoMouseCursorChange) return;
  const int c = ImGui::GetMouseCursor();
  if (c == cursor_) return;
  cursor_ = c;
  switch (c) {
    case ImGuiMouseCursor_None:
      setCursor(Qt::BlankCursor);
      break;
    case ImGuiMouseCursor_TextInput:
      setCursor(Qt::IBeamCursor);
      break;
    case ImGuiMouseCursor_ResizeAll:
      setCursor(Qt::SizeAllCursor);
      break;
    case ImGuiMouseCursor_ResizeNS:
      setCursor(Qt::SizeVerCursor);
      break;
    case ImGuiMouseCursor_ResizeEW:
      setCursor(Qt::SizeHorCursor);
      break;
    case ImGuiMouseCursor_ResizeNESW:
      setCursor(Qt::SizeBDiagCursor);
      break;
    case ImGuiMouseCursor_ResizeNWSE:
      setCursor(Qt::SizeFDiagCursor);
      break;
    case ImGuiMouseCursor_Hand:
      setCursor(Qt::PointingHandCursor);
      break;
    case ImGuiMouseCursor_NotAllowed:
      setCursor(Qt::ForbiddenCursor);
      break;
    default:
      unsetCursor();
      break;
  }
}

}  // namespace mls::editor
