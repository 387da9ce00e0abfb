// Dear ImGui inside Qt: a host draws at its frame rate and only while visible, sees the
// widget's logical size, turns Qt clicks and keys into ImGui input; the charts' axis maths,
// and the charts' hover results where the mouse is put.
#include <imgui.h>

#include <QClipboard>
#include <QGuiApplication>
#include <QImage>
#include <cmath>
#include <functional>

#include "editor/imgui_host.h"
#include "editor/imgui_plot.h"
#include "tests/editor/editor_test_util.h"

using namespace mls::editor;

namespace {

// Counts its frames and keeps what ImGui saw of the widget; a button and a text field.
class ProbeHost : public ImGuiHost {
 public:
  int draws = 0;
  ImVec2 display;
  int clicks = 0;
  ImVec2 button_min, button_max;
  char text[64] = "";
  ImVec2 text_min, text_max;
  std::function<void()> extra;  // more to draw in the window

  QPoint buttonCentre() const {
    return QPoint(int((button_min.x + button_max.x) / 2), int((button_min.y + button_max.y) / 2));
  }
  QPoint textCentre() const {
    return QPoint(int((text_min.x + text_max.x) / 2), int((text_min.y + text_max.y) / 2));
  }

 protected:
  void draw() override {
    ++draws;
    display = ImGui::GetIO().DisplaySize;
    if (beginFullWindow("probe")) {
      ImGui::SetCursorPos(ImVec2(40, 40));
      if (ImGui::Button("Press me", ImVec2(120, 40))) ++clicks;
      button_min = ImGui::GetItemRectMin();
      button_max = ImGui::GetItemRectMax();
      ImGui::SetCursorPos(ImVec2(40, 120));
      ImGui::SetNextItemWidth(200);
      ImGui::InputText("##text", text, sizeof text);
      text_min = ImGui::GetItemRectMin();
      text_max = ImGui::GetItemRectMax();
      if (extra) extra();
    }
    endFullWindow();
  }
};

// The tests that draw need OpenGL: under Xvfb, not in the offscreen platform (no display).
bool have_gl() {
  mls::test::qt_app();
  if (ImGuiHost::isSupported()) return true;
  WARN("no OpenGL on the " << QGuiApplication::platformName().toStdString()
                           << " platform: ImGuiHost not tested");
  return false;
}

// Shows the host (made after have_gl()) at 400 x 300 and waits for its first frame.
void show(ProbeHost& h) {
  h.resize(400, 300);
  h.show();
  REQUIRE(QTest::qWaitForWindowExposed(&h));
  for (int i = 0; i < 200 && h.draws == 0; ++i) QTest::qWait(10);
  REQUIRE(h.draws > 0);
}

// Waits (drawing) until `done` or about 2 s.
template <class F>
bool wait_until(F done) {
  for (int i = 0; i < 200 && !done(); ++i) QTest::qWait(10);
  return done();
}

// An ImGui context without a window or GL, to run the charts' frames directly.
struct Headless {
  ImGuiContext* ctx;
  Headless() {
    ctx = ImGui::CreateContext();
    ImGui::SetCurrentContext(ctx);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(800, 600);
    io.DeltaTime = 1.0f / 60;
    unsigned char* pixels;
    int w, h;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  }
  ~Headless() { ImGui::DestroyContext(ctx); }
  // A few frames with the mouse at `mouse` (ImGui knows a window is hovered a frame after
  // it exists); `f` draws at (10, 10) in a window over the display.
  template <class F>
  void frames(ImVec2 mouse, F f) {
    for (int i = 0; i < 3; ++i) {
      ImGui::GetIO().MousePos = mouse;
      ImGui::NewFrame();
      ImGui::SetNextWindowPos(ImVec2(0, 0));
      ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
      ImGui::Begin("charts", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove);
      ImGui::SetCursorScreenPos(ImVec2(10, 10));
      f();
      ImGui::End();
      ImGui::Render();
    }
  }
};

constexpr ImU32 kBlue = IM_COL32(80, 160, 255, 255);
constexpr ImU32 kOrange = IM_COL32(255, 150, 60, 255);
constexpr ImU32 kGreen = IM_COL32(90, 200, 120, 255);

// Pixels within 40 of the colour in each channel.
int count_color(const QImage& img, ImU32 c) {
  const int r = int(c & 0xFF), g = int((c >> 8) & 0xFF), b = int((c >> 16) & 0xFF);
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QColor p = img.pixelColor(x, y);
      if (std::abs(p.red() - r) < 40 && std::abs(p.green() - g) < 40 && std::abs(p.blue() - b) < 40)
        ++n;
    }
  return n;
}

}  // namespace

TEST_CASE("an ImGui host draws at its frame rate, only while visible, at its logical size",
          "[editor][imgui]") {
  if (!have_gl()) return;
  ProbeHost h;
  h.setFrameRate(60);
  show(h);
  const int64_t before = h.frameCount();
  QTest::qWait(1000);
  CHECK(h.frameCount() - before >= 30);
  CHECK(h.framesPerSecond() >= 30);
  CHECK(h.framesPerSecond() <= 70);  // the timer paces it: not as fast as it can
  CHECK(h.draws == h.frameCount());
  CHECK(h.display.x == 400);
  CHECK(h.display.y == 300);

  h.hide();
  QTest::qWait(100);
  const int64_t hidden = h.frameCount();
  QTest::qWait(300);
  CHECK(h.frameCount() == hidden);
}

TEST_CASE("a click on an ImGui button inside the host clicks it", "[editor][imgui]") {
  if (!have_gl()) return;
  ProbeHost h;
  h.setFrameRate(60);
  show(h);
  QTest::mouseClick(&h, Qt::LeftButton, {}, h.buttonCentre());
  REQUIRE(wait_until([&] { return h.clicks > 0; }));
  QTest::qWait(200);
  CHECK(h.clicks == 1);
  // Outside the button: nothing.
  QTest::qWait(600);  // not a double click
  QTest::mouseClick(&h, Qt::LeftButton, {}, QPoint(300, 250));
  QTest::qWait(200);
  CHECK(h.clicks == 1);
}

TEST_CASE("at frame rate 0 the host draws only for input, and a click still lands",
          "[editor][imgui]") {
  if (!have_gl()) return;
  ProbeHost h;
  h.setFrameRate(0);
  show(h);
  QTest::qWait(300);  // the frames owed to showing
  const int64_t idle = h.frameCount();
  QTest::qWait(300);
  CHECK(h.frameCount() == idle);
  QTest::mouseClick(&h, Qt::LeftButton, {}, h.buttonCentre());
  REQUIRE(wait_until([&] { return h.clicks > 0; }));
  CHECK(h.clicks == 1);
  CHECK(h.frameCount() > idle);
}

TEST_CASE("keys and text typed into the host edit an ImGui text field, Ctrl+A Ctrl+C copies",
          "[editor][imgui]") {
  if (!have_gl()) return;
  ProbeHost h;
  h.setFrameRate(60);
  show(h);
  h.activateWindow();
  h.setFocus();
  QTest::mouseClick(&h, Qt::LeftButton, {}, h.textCentre());
  QTest::qWait(100);
  QTest::keyClicks(&h, "abc");
  REQUIRE(wait_until([&] { return std::string(h.text) == "abc"; }));
  QTest::keyClick(&h, Qt::Key_Backspace);
  REQUIRE(wait_until([&] { return std::string(h.text) == "ab"; }));
  QTest::keyClick(&h, Qt::Key_Left);
  QTest::keyClicks(&h, "X");
  REQUIRE(wait_until([&] { return std::string(h.text) == "aXb"; }));
  QGuiApplication::clipboard()->clear();
  QTest::keyClick(&h, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClick(&h, Qt::Key_C, Qt::ControlModifier);
  CHECK(wait_until([] { return QGuiApplication::clipboard()->text() == "aXb"; }));
}

TEST_CASE("charts drawn in a host put their series on screen", "[editor][imgui]") {
  std::vector<double> xs(50), a(50), b(50);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = double(i);
    a[i] = std::sin(double(i) / 8) + 2;
    b[i] = std::cos(double(i) / 8) + 2;
  }
  const PlotSeries lines[] = {{"train", xs.data(), a.data(), xs.size(), kBlue},
                              {"val", xs.data(), b.data(), xs.size(), kOrange, true}};
  const PlotSeries layers[] = {{"weights", xs.data(), a.data(), xs.size(), kGreen}};
  const Span spans[] = {{0, 10, 0, kOrange, "matmul"}, {12, 30, 1, kBlue, "conv"}};
  if (!have_gl()) return;
  ProbeHost h;
  h.extra = [&] {
    PlotOptions o;
    o.size = ImVec2(0, 120);
    plot_lines("##lines", lines, o);
    plot_stacked("##stacked", layers, o);
    plot_spans("##spans", spans, PlotOptions{});
  };
  h.resize(500, 700);
  show(h);
  const QImage img = h.grabFramebuffer();
  CHECK(count_color(img, kBlue) > 100);
  CHECK(count_color(img, kOrange) > 100);
  CHECK(count_color(img, kGreen) > 100);
}

TEST_CASE("nice ticks are 1, 2 or 5 times a power of ten", "[editor][imgui]") {
  const std::vector<double> unit = nice_ticks(0, 1);
  REQUIRE(unit.size() == 6);
  for (size_t i = 0; i < unit.size(); ++i) CHECK(unit[i] == Approx(0.2 * double(i)));
  CHECK(nice_ticks(0, 97) == std::vector<double>{0, 20, 40, 60, 80});
  CHECK(nice_step(97) == 20);
  CHECK(nice_step(1e6) == 200000);
  CHECK(nice_step(0.03) == Approx(0.005));
  const std::vector<double> neg = nice_ticks(-3.2, 7.9);
  CHECK(neg == std::vector<double>{-2, 0, 2, 4, 6});
  CHECK(nice_ticks(5, 5) == std::vector<double>{5});
  CHECK(nice_ticks(0, NAN).empty());
  // Log axes: decades over a wide range, 1-2-5 over a narrow one.
  CHECK(log_ticks(1e-4, 10) == std::vector<double>{1e-4, 1e-3, 1e-2, 1e-1, 1, 10});
  const std::vector<double> wide = log_ticks(1e-12, 1e3);
  CHECK(wide == std::vector<double>{1e-12, 1e-9, 1e-6, 1e-3, 1, 1e3});
  const std::vector<double> narrow = log_ticks(0.04, 2.5);
  REQUIRE(narrow.size() == 6);
  CHECK(narrow[0] == Approx(0.05));
  CHECK(narrow[5] == Approx(2));
  CHECK(log_ticks(0, 1).empty());
}

TEST_CASE("numbers on the axes are compact", "[editor][imgui]") {
  CHECK(format_compact(0) == "0");
  CHECK(format_compact(1234) == "1.23k");
  CHECK(format_compact(-1234) == "-1.23k");
  CHECK(format_compact(12345) == "12.3k");
  CHECK(format_compact(999950) == "1M");
  CHECK(format_compact(3.4e6) == "3.4M");
  CHECK(format_compact(2.5e9) == "2.5G");
  CHECK(format_compact(97.5) == "97.5");
  CHECK(format_compact(123.4) == "123");
  CHECK(format_compact(0.001) == "0.001");
  CHECK(format_compact(0.2) == "0.2");
  CHECK(format_compact(1e-5) == "1e-05");
  CHECK(format_compact(NAN) == "nan");
  // Ticks: the decimals the step needs, no more.
  CHECK(format_tick(0.6000000000000001, 0.2) == "0.6");
  CHECK(format_tick(40, 20) == "40");
  CHECK(format_tick(1200, 200) == "1.2k");
  CHECK(format_tick(2000, 1000) == "2k");
  CHECK(format_tick(1000.2, 0.2) == "1.0002k");
  CHECK(format_tick(1.5e-4, 5e-5) == "0.00015");
  CHECK(format_tick(1e-17, 0.2) == "0");
}

TEST_CASE("the nearest point is found by binary search on x", "[editor][imgui]") {
  const double xs[] = {0, 1, 2, 4, 8};
  CHECK(nearest_index(xs, -5) == 0u);
  CHECK(nearest_index(xs, 0.4) == 0u);
  CHECK(nearest_index(xs, 0.5) == 0u);  // a tie goes to the lower
  CHECK(nearest_index(xs, 0.6) == 1u);
  CHECK(nearest_index(xs, 2.9) == 2u);
  CHECK(nearest_index(xs, 3.1) == 3u);
  CHECK(nearest_index(xs, 100) == 4u);
  CHECK_FALSE(nearest_index({}, 1).has_value());
  CHECK_FALSE(nearest_index(xs, NAN).has_value());
}

TEST_CASE("hovering a line chart names the nearest series and point", "[editor][imgui]") {
  Headless g;
  std::vector<double> xs(11), up(11), down(11);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = double(i), up[i] = double(i), down[i] = 10 - double(i);
  const PlotSeries s[] = {{"up", xs.data(), up.data(), xs.size(), kBlue},
                          {"down", xs.data(), down.data(), xs.size(), kOrange}};
  const ImVec2 size(600, 300);  // at (10, 10)
  PlotHover h;
  // A quarter across, near the top: "down" is high there.
  g.frames(ImVec2(10 + 600 * 0.25f, 40), [&] { h = plot_lines("##l", s, {.size = size}); });
  REQUIRE(h.active);
  CHECK(h.series == 1);
  CHECK(h.index >= 1);
  CHECK(h.index <= 4);
  CHECK(h.x == xs[h.index]);
  // Same x near the bottom: "up".
  g.frames(ImVec2(10 + 600 * 0.25f, 10 + 300 - 40),
           [&] { h = plot_lines("##l", s, {.size = size}); });
  REQUIRE(h.active);
  CHECK(h.series == 0);
  // Outside the chart: nothing.
  g.frames(ImVec2(700, 500), [&] { h = plot_lines("##l", s, {.size = size}); });
  CHECK_FALSE(h.active);
  // Log axis, gaps and empty series draw without trouble.
  std::vector<double> gappy = {1, NAN, 0, -1, 5, 1e-3, INFINITY, 2, 3, 4, 5};
  const PlotSeries odd[] = {{"gappy", xs.data(), gappy.data(), xs.size(), kGreen},
                            {"empty", xs.data(), gappy.data(), 0, kBlue}};
  g.frames(ImVec2(300, 150),
           [&] { h = plot_lines("##log", odd, {.log_y = true, .size = size, .mark_x = 4}); });
  CHECK(h.active);
  g.frames(ImVec2(300, 150), [&] { h = plot_lines("##none", {}, {.size = size}); });
  CHECK_FALSE(h.active);
}

TEST_CASE("hovering a stacked chart names the layer under the mouse", "[editor][imgui]") {
  Headless g;
  std::vector<double> xs(11), one(11, 1.0);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = double(i);
  const PlotSeries layers[] = {{"weights", xs.data(), one.data(), xs.size(), kBlue},
                               {"activations", xs.data(), one.data(), xs.size(), kOrange},
                               {"gradients", xs.data(), one.data(), xs.size(), kGreen}};
  const ImVec2 size(600, 300);
  PlotHover h;
  // Stacked 0..3: near the bottom is the first layer, near the top the last.
  g.frames(ImVec2(310, 10 + 300 - 40), [&] { h = plot_stacked("##s", layers, {.size = size}); });
  REQUIRE(h.active);
  CHECK(h.series == 0);
  CHECK(h.index >= 4);
  CHECK(h.index <= 6);
  CHECK(h.x == xs[h.index]);
  g.frames(ImVec2(310, 40), [&] { h = plot_stacked("##s", layers, {.size = size, .mark_x = 5}); });
  REQUIRE(h.active);
  CHECK(h.series == 2);
}

TEST_CASE("hovering a span timeline names the span under the mouse", "[editor][imgui]") {
  Headless g;
  const Span spans[] = {{0, 4, 0, kBlue, "a"}, {5, 10, 0, kOrange, "b"}, {2, 8, 1, kGreen, "c"}};
  const ImVec2 size(600, 100);  // two rows of about 40 px
  std::optional<size_t> k;
  const float x7 = 10 + 600 * 0.7f;  // about x = 7
  g.frames(ImVec2(x7, 10 + 20), [&] { k = plot_spans("##t", spans, {.size = size}); });
  CHECK(k == 1u);
  g.frames(ImVec2(x7, 10 + 62), [&] { k = plot_spans("##t", spans, {.size = size}); });
  CHECK(k == 2u);
  g.frames(ImVec2(10 + 600 * 0.95f, 10 + 62),
           [&] { k = plot_spans("##t", spans, {.size = size}); });
  CHECK_FALSE(k.has_value());  // row 1 ends at 8
  g.frames(ImVec2(700, 500), [&] { k = plot_spans("##t", spans, {.size = size}); });
  CHECK_FALSE(k.has_value());
}
