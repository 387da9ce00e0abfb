// The SVG figures of scripting/notebook/plot.h: ticks, pixel mapping, histograms, heatmap
// colours, image grids and the refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "scripting/notebook/plot.h"

using namespace mls;
using namespace mls::plot;

namespace {

// Balanced tags: every <name ...> is closed by </name> in order, or is self-closing.
bool well_formed(const std::string& svg) {
  std::vector<std::string> stack;
  size_t p = 0;
  while ((p = svg.find('<', p)) != std::string::npos) {
    const size_t e = svg.find('>', p);
    if (e == std::string::npos) return false;
    const std::string tag = svg.substr(p + 1, e - p - 1);
    p = e + 1;
    if (tag.empty()) return false;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return false;
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  return stack.empty() && svg.rfind("<svg", 0) == 0;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

TEST_CASE("Nice ticks use 1-2-5 steps covering the range", "[notebook][plot]") {
  const std::vector<double> t = nice_ticks(0, 1);
  REQUIRE(t.size() == 6);
  for (size_t i = 0; i < t.size(); ++i) CHECK(t[i] == Approx(0.2 * static_cast<double>(i)));
  CHECK(tick_label(t[3]) == "0.6");
  const std::vector<double> u = nice_ticks(3, 97);
  CHECK(u.front() == 0);
  CHECK(u.back() == 100);
  CHECK(u[1] == 20);
  const std::vector<double> v = nice_ticks(-0.013, 0.041);
  CHECK(v.front() == Approx(-0.02));
  // (0.041 + 0.013) / 5 = 0.0108 rounds up to a step of 0.02.
  CHECK(v.back() == Approx(0.06));
  CHECK(v[1] - v[0] == Approx(0.02));
  CHECK(tick_label(-0.0) == "0");
  CHECK(tick_label(1e-5) == "1e-05");
  // A constant range still gets an axis around it.
  const std::vector<double> c = nice_ticks(5, 5);
  CHECK(c.front() < 5);
  CHECK(c.back() > 5);
}

TEST_CASE("A line's points map data to pixels", "[notebook][plot]") {
  Chart c;
  c.title = "loss <a&b>";
  c.series.push_back({.name = "", .x = {0, 0.5, 1}, .y = {0, 1, 0.25}});
  Result<std::string> svg = render_chart(c);
  REQUIRE(svg.ok());
  CHECK(well_formed(*svg));
  CHECK(svg->find("loss &lt;a&amp;b&gt;") != std::string::npos);
  const Area a = plot_area(640, 400);
  CHECK(a.left == 64);
  CHECK(a.right == 624);
  // Axes 0..1 both ways: (0,0) bottom left, (0.5,1) top middle, (1,0.25) a quarter up.
  const std::string pts = px(64) + "," + px(352) + " " + px(344) + "," + px(36) + " " + px(624) +
                          "," + px(352 - 0.25 * 316);
  CHECK(svg->find("points=\"" + pts + "\"") != std::string::npos);
  CHECK(count(*svg, "class=\"legend\"") == 0);  // one series: no legend
  CHECK(svg->find(">0.6</text>") != std::string::npos);
}

TEST_CASE("Several series get a legend and the colour cycle, NaN points are skipped",
          "[notebook][plot]") {
  Chart c;
  c.kind = Kind::Scatter;
  c.series.push_back({.name = "train", .x = {1, 2, 3}, .y = {1, NAN, 3}});
  c.series.push_back({.name = "val", .x = {1, 2}, .y = {INFINITY, 2}});
  Result<std::string> svg = render_chart(c);
  REQUIRE(svg.ok());
  CHECK(well_formed(*svg));
  CHECK(count(*svg, "class=\"legend\"") == 2);
  CHECK(count(*svg, "class=\"point\"") == 3);
  CHECK(count(*svg, "fill=\"" + series_colour(0) + "\"") == 3);  // two points and the legend
  CHECK(count(*svg, "fill=\"" + series_colour(1) + "\"") == 2);
  CHECK(series_colour(0) != series_colour(1));
  CHECK(svg->find("2 points skipped (NaN or Inf)") != std::string::npos);
}

TEST_CASE("Empty or mismatched data is refused with a message", "[notebook][plot]") {
  Chart c;
  Result<std::string> r = render_chart(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("no data") != std::string::npos);
  c.series.push_back({.name = "", .x = {1, 2}, .y = {1}});
  r = render_chart(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "plot: x has 2 values and y 1");
  c.series[0] = {.name = "", .x = {1}, .y = {NAN}};
  r = render_chart(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("no finite point") != std::string::npos);
  CHECK_FALSE(plot::histogram({}, 10).ok());
  CHECK_FALSE(render_heatmap(0, 3, {}, "").ok());
  Result<std::string> h = render_heatmap(2, 2, {1, 2, 3}, "");
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().message == "plot.heatmap: 3 values for 2x2");
  CHECK_FALSE(render_images({}, 8, "").ok());
  Result<std::string> im =
      render_images({Image{.h = 2, .w = 2, .channels = 1, .pix = {1, 2, 3}}}, 8, "");
  REQUIRE_FALSE(im.ok());
  CHECK(im.error().message == "plot.image: image 1 has 3 values, 4 expected");
}

TEST_CASE("Histogram counts match a hand count", "[notebook][plot]") {
  // 0..10 in 5 bins of width 2: [0,2) {0, 1, 1.5}, [2,4) {2, 3}, [4,6) {}, [6,8) {7}, [8,10] {9,
  // 10}.
  Result<plot::Histogram> h = plot::histogram({0, 1, 1.5, 2, 3, 7, 9, 10, NAN}, 5);
  REQUIRE(h.ok());
  CHECK(h->counts == std::vector<int64_t>{3, 2, 0, 1, 2});
  CHECK(h->edges == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(h->skipped == 1);
  // Freedman-Diaconis on 1..100: IQR 49.5, width 2*49.5/100^(1/3) = 21.33, so 5 bins.
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  Result<plot::Histogram> fd = plot::histogram(v, 0);
  REQUIRE(fd.ok());
  CHECK(fd->counts.size() == 5);
  int64_t total = 0;
  for (int64_t n : fd->counts) total += n;
  CHECK(total == 100);
  Result<std::string> svg = render_histogram({0, 1, 1.5, 2, 3, 7, 9, 10, NAN}, 5, "h");
  REQUIRE(svg.ok());
  CHECK(well_formed(*svg));
  CHECK(count(*svg, "class=\"bar\"") == 5);
  CHECK(svg->find("1 value skipped") != std::string::npos);
}

TEST_CASE("A heatmap's colours run from the minimum to the maximum", "[notebook][plot]") {
  CHECK(heat_colour(0) == "#440154");
  CHECK(heat_colour(1) == "#fde725");
  Result<std::string> svg = render_heatmap(2, 3, {5, 1, 2, 3, 4, 9}, "m");
  REQUIRE(svg.ok());
  CHECK(well_formed(*svg));
  CHECK(count(*svg, "class=\"cell\"") == 6);
  // Cells in row-major order: the second (1) is the minimum, the last (9) the maximum.
  std::vector<std::string> fills;
  for (size_t p = svg->find("class=\"cell\""); p != std::string::npos;
       p = svg->find("class=\"cell\"", p + 1)) {
    const size_t f = svg->find("fill=\"", p) + 6;
    fills.push_back(svg->substr(f, 7));
  }
  REQUIRE(fills.size() == 6);
  CHECK(fills[1] == "#440154");
  CHECK(fills[5] == "#fde725");
  CHECK(fills[0] == heat_colour(0.5));
  CHECK(svg->find(">9</text>") != std::string::npos);
  CHECK(svg->find(">1</text>") != std::string::npos);
}

TEST_CASE("An image grid lays out N images in rows of cols", "[notebook][plot]") {
  CHECK(grid_shape(10, 4).rows == 3);
  CHECK(grid_shape(10, 4).cols == 4);
  CHECK(grid_shape(3, 8).cols == 3);
  CHECK(grid_shape(3, 8).rows == 1);
  std::vector<Image> ims;
  for (int i = 0; i < 10; ++i)
    ims.push_back({.h = 2, .w = 2, .channels = 1, .pix = {0, 1, 1, static_cast<float>(i)}});
  Result<std::string> svg = render_images(ims, 4, "");
  REQUIRE(svg.ok());
  CHECK(well_formed(*svg));
  CHECK(count(*svg, "class=\"img\"") == 10);
  // Pixel scale floor(560 / (4 * 2)) = 70 clamped to 16: cells 32 px with 4 px gaps.
  CHECK(svg->find("width=\"" + std::to_string(4 + 4 * 36) + "\" height=\"" +
                  std::to_string(4 + 3 * 36) + "\"") != std::string::npos);
  CHECK(svg->find("translate(40.00,40.00)") != std::string::npos);  // image 6: column 1, row 1
  // Grey levels over the whole grid: 0 is black, 9 white; a run of equal pixels is one rect.
  CHECK(svg->find("fill=\"#000000\"") != std::string::npos);
  CHECK(svg->find("fill=\"#ffffff\"") != std::string::npos);
  Image rgb{.h = 1, .w = 1, .channels = 3, .pix = {1, 0, 0}};
  Result<std::string> r = render_images({rgb}, 8, "rgb");
  REQUIRE(r.ok());
  CHECK(r->find("fill=\"#ff0000\"") != std::string::npos);
  // Past 16384 pixels each image is an embedded PNG, not rects.
  std::vector<Image> big(
      24, Image{.h = 28, .w = 28, .channels = 1, .pix = std::vector<float>(784, 0.5f)});
  big[0].pix[0] = 1;
  Result<std::string> b = render_images(big, 8, "");
  REQUIRE(b.ok());
  CHECK(well_formed(*b));
  CHECK(count(*b, "class=\"png\"") == 24);
  CHECK(count(*b, "data:image/png;base64,iVBORw0KGgo") == 24);  // the PNG signature
  CHECK(count(*b, "<rect") == 1);                               // the background only
}
