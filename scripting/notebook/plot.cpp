// Figures as SVG text (see plot.h).
#include "scripting/notebook/plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include <stb_image_write.h>

namespace mls::plot {

namespace {

std::string skipped_note(int64_t skipped, const char* what, double y) {
  if (skipped == 0) return {};
  return svg_text(
      8, y,
      std::to_string(skipped) + " " + what + (skipped == 1 ? "" : "s") + " skipped (NaN or Inf)",
      "start", "class=\"note\" fill=\"#a00\"");
}

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data),
                                             static_cast<size_t>(size));
}

bool finite_point(double x, double y) {
  return std::isfinite(x) && std::isfinite(y);
}

// The smallest gap between distinct sorted x values (a bar's width), 1 when there is none.
double min_gap(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  double g = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i] > xs[i - 1]) g = std::min(g, xs[i] - xs[i - 1]);
  return std::isfinite(g) ? g : 1.0;
}

}  // namespace

std::string base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const auto b = [&](size_t k) { return k < in.size() ? static_cast<unsigned char>(in[k]) : 0u; };
    const unsigned v = (b(i) << 16) | (b(i + 1) << 8) | b(i + 2);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::vector<Image> images_from_planes(const std::vector<double>& values, int64_t n, int64_t c,
                                      int64_t h, int64_t w, int64_t max_images) {
  std::vector<Image> images;
  for (int64_t i = 0; i < std::min(n, max_images); ++i) {
    Image im{.h = static_cast<int>(h),
             .w = static_cast<int>(w),
             .channels = static_cast<int>(c),
             .pix = {}};
    im.pix.resize(static_cast<size_t>(h * w * c));
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p)
        im.pix[static_cast<size_t>(p * c + ch)] =
            static_cast<float>(values[static_cast<size_t>((i * c + ch) * h * w + p)]);
    images.push_back(std::move(im));
  }
  return images;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Area plot_area(int width, int height) {
  return {64.0, 36.0, static_cast<double>(width) - 16.0, static_cast<double>(height) - 48.0};
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  target = std::max(target, 2);
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double mult = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  const double step = mult * mag;
  const double k0 = std::floor(lo / step + 1e-9);
  const double k1 = std::ceil(hi / step - 1e-9);
  std::vector<double> out;
  for (double k = k0; k <= k1 + 0.5; k += 1) {
    double v = k * step;
    if (std::abs(v) < step * 1e-9) v = 0;
    out.push_back(v);
  }
  return out;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  if (s == "-0") s = "0";
  return s;
}

std::string series_colour(size_t i) {
  static const std::array<const char*, 10> kCycle = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                     "#bcbd22", "#17becf"};
  return kCycle[i % kCycle.size()];
}

Result<std::string> render_chart(const Chart& c) {
  if (c.series.empty()) return make_error("plot: no data (no series)");
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  int64_t skipped = 0;
  for (size_t s = 0; s < c.series.size(); ++s) {
    const Series& se = c.series[s];
    const std::string who = c.series.size() > 1 ? "plot: series " + std::to_string(s + 1) : "plot";
    if (se.x.size() != se.y.size())
      return make_error(who + ": x has " + std::to_string(se.x.size()) + " values and y " +
                        std::to_string(se.y.size()));
    if (se.y.empty()) return make_error(who + ": empty data");
    bool any = false;
    for (size_t i = 0; i < se.x.size(); ++i) {
      if (!finite_point(se.x[i], se.y[i])) {
        ++skipped;
        continue;
      }
      any = true;
      xlo = std::min(xlo, se.x[i]);
      xhi = std::max(xhi, se.x[i]);
      ylo = std::min(ylo, se.y[i]);
      yhi = std::max(yhi, se.y[i]);
    }
    if (!any) return make_error(who + ": no finite point (all NaN or Inf)");
  }
  double bar_w = 0;
  if (c.kind == Kind::Bars) {
    ylo = std::min(ylo, 0.0);
    yhi = std::max(yhi, 0.0);
    std::vector<double> xs;
    for (const Series& se : c.series) xs.insert(xs.end(), se.x.begin(), se.x.end());
    bar_w = min_gap(xs);
    xlo -= bar_w / 2;
    xhi += bar_w / 2;
  }
  const std::vector<double> xt = nice_ticks(xlo, xhi), yt = nice_ticks(ylo, yhi);
  const double x0 = xt.front(), x1 = xt.back(), y0 = yt.front(), y1 = yt.back();
  const Area a = plot_area(c.width, c.height);
  auto px = [&](double x) { return to_pixel(x, x0, x1, a.left, a.right); };
  auto py = [&](double y) { return to_pixel(y, y0, y1, a.bottom, a.top); };

  std::string out = svg_open(c.width, c.height);
  if (!c.title.empty()) out += svg_text(c.width / 2.0, 22, c.title, "middle", "font-size=\"14\"");
  // Grid lines and ticks.
  for (double t : xt) {
    const double p = px(t);
    out += "<line x1=\"" + svg_num(p) + "\" y1=\"" + svg_num(a.top) + "\" x2=\"" + svg_num(p) +
           "\" y2=\"" + svg_num(a.bottom) + "\" stroke=\"#eee\"/>\n";
    out += svg_text(p, a.bottom + 14, tick_label(t));
  }
  for (double t : yt) {
    const double p = py(t);
    out += "<line x1=\"" + svg_num(a.left) + "\" y1=\"" + svg_num(p) + "\" x2=\"" +
           svg_num(a.right) + "\" y2=\"" + svg_num(p) + "\" stroke=\"#eee\"/>\n";
    out += svg_text(a.left - 4, p + 4, tick_label(t), "end");
  }
  out += "<rect x=\"" + svg_num(a.left) + "\" y=\"" + svg_num(a.top) + "\" width=\"" +
         svg_num(a.right - a.left) + "\" height=\"" + svg_num(a.bottom - a.top) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  if (!c.xlabel.empty()) out += svg_text((a.left + a.right) / 2, a.bottom + 32, c.xlabel);
  if (!c.ylabel.empty()) {
    const double cy = (a.top + a.bottom) / 2;
    out += "<text x=\"14\" y=\"" + svg_num(cy) +
           "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + svg_num(cy) + ")\">" +
           xml_escape(c.ylabel) + "</text>\n";
  }
  // The data.
  for (size_t s = 0; s < c.series.size(); ++s) {
    const Series& se = c.series[s];
    const std::string col = series_colour(s);
    if (c.kind == Kind::Line) {
      out += "<polyline class=\"series\" fill=\"none\" stroke=\"" + col +
             "\" stroke-width=\"1.5\" points=\"";
      bool first = true;
      for (size_t i = 0; i < se.x.size(); ++i) {
        if (!finite_point(se.x[i], se.y[i])) continue;
        if (!first) out += ' ';
        first = false;
        out += svg_num(px(se.x[i])) + "," + svg_num(py(se.y[i]));
      }
      out += "\"/>\n";
    } else {
      for (size_t i = 0; i < se.x.size(); ++i) {
        if (!finite_point(se.x[i], se.y[i])) continue;
        if (c.kind == Kind::Scatter) {
          out += "<circle class=\"point\" cx=\"" + svg_num(px(se.x[i])) + "\" cy=\"" +
                 svg_num(py(se.y[i])) + "\" r=\"3\" fill=\"" + col + "\"/>\n";
        } else {
          const double l = px(se.x[i] - bar_w / 2), r = px(se.x[i] + bar_w / 2);
          const double t = py(std::max(se.y[i], 0.0)), b = py(std::min(se.y[i], 0.0));
          out += "<rect class=\"bar\" x=\"" + svg_num(l) + "\" y=\"" + svg_num(t) + "\" width=\"" +
                 svg_num(r - l) + "\" height=\"" + svg_num(b - t) + "\" fill=\"" + col +
                 "\" stroke=\"white\" stroke-width=\"0.5\"/>\n";
        }
      }
    }
  }
  // The legend, for several series.
  if (c.series.size() > 1) {
    double y = a.top + 14;
    for (size_t s = 0; s < c.series.size(); ++s, y += 16) {
      const std::string name =
          c.series[s].name.empty() ? "series " + std::to_string(s + 1) : c.series[s].name;
      out += "<rect class=\"legend\" x=\"" + svg_num(a.right - 110) + "\" y=\"" + svg_num(y - 8) +
             "\" width=\"10\" height=\"10\" fill=\"" + series_colour(s) + "\"/>\n";
      out += svg_text(a.right - 96, y + 1, name, "start");
    }
  }
  out += skipped_note(skipped, "point", c.height - 6.0);
  out += "</svg>\n";
  return out;
}

Result<Histogram> histogram(const std::vector<double>& values, int bins) {
  std::vector<double> v;
  Histogram h;
  for (double x : values) {
    if (std::isfinite(x))
      v.push_back(x);
    else
      ++h.skipped;
  }
  if (v.empty())
    return make_error(values.empty() ? "plot.hist: empty data" : "plot.hist: no finite value");
  std::sort(v.begin(), v.end());
  double lo = v.front(), hi = v.back();
  if (bins <= 0) {
    auto q = [&](double p) {
      const double pos = p * static_cast<double>(v.size() - 1);
      const size_t i = static_cast<size_t>(pos);
      const double f = pos - static_cast<double>(i);
      return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
    };
    const double bw = 2 * (q(0.75) - q(0.25)) / std::cbrt(static_cast<double>(v.size()));
    bins = bw > 0 && hi > lo ? static_cast<int>(std::ceil((hi - lo) / bw)) : 1;
    bins = std::clamp(bins, 1, 100);
  }
  if (hi == lo) {
    lo -= 0.5;
    hi += 0.5;
  }
  h.counts.assign(static_cast<size_t>(bins), 0);
  for (int i = 0; i <= bins; ++i) h.edges.push_back(lo + (hi - lo) * i / bins);
  for (double x : v) {
    int b = static_cast<int>(std::floor((x - lo) / (hi - lo) * bins));
    h.counts[static_cast<size_t>(std::clamp(b, 0, bins - 1))]++;
  }
  return h;
}

Result<std::string> render_histogram(const std::vector<double>& values, int bins,
                                     const std::string& title) {
  Result<Histogram> h = histogram(values, bins);
  if (!h) return h.error();
  Chart c;
  c.kind = Kind::Bars;
  c.title = title;
  c.ylabel = "count";
  Series s;
  for (size_t i = 0; i < h->counts.size(); ++i) {
    s.x.push_back((h->edges[i] + h->edges[i + 1]) / 2);
    s.y.push_back(static_cast<double>(h->counts[i]));
  }
  c.series.push_back(std::move(s));
  Result<std::string> svg = render_chart(c);
  if (!svg || h->skipped == 0) return svg;
  std::string out = std::move(*svg);
  out.insert(out.size() - 7, skipped_note(h->skipped, "value", c.height - 6.0));
  return out;
}

Grid grid_shape(int n, int cols) {
  if (n <= 0) return {};
  const int c = std::clamp(cols, 1, n);
  return {(n + c - 1) / c, c};
}

Result<std::string> render_images(const std::vector<Image>& images, int cols,
                                  const std::string& title) {
  constexpr int64_t kRectPixels = 16384;  // above it, images are embedded PNGs
  if (images.empty()) return make_error("plot.image: no image");
  const int h = images[0].h, w = images[0].w;
  int64_t total = 0;
  float lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    if (im.h <= 0 || im.w <= 0)
      return make_error("plot.image: image " + std::to_string(i + 1) + " is empty");
    if (im.channels != 1 && im.channels != 3)
      return make_error("plot.image: " + std::to_string(im.channels) +
                        " channels (1 or 3 expected)");
    const size_t n =
        static_cast<size_t>(im.h) * static_cast<size_t>(im.w) * static_cast<size_t>(im.channels);
    if (im.pix.size() != n)
      return make_error("plot.image: image " + std::to_string(i + 1) + " has " +
                        std::to_string(im.pix.size()) + " values, " + std::to_string(n) +
                        " expected");
    total += static_cast<int64_t>(im.h) * im.w;
    for (float p : im.pix)
      if (std::isfinite(p)) lo = std::min(lo, p), hi = std::max(hi, p);
  }
  if (total > (int64_t{1} << 22)) return make_error("plot.image: more than 4M pixels");
  if (!(lo <= hi)) lo = 0, hi = 1;
  const Grid g = grid_shape(static_cast<int>(images.size()), cols);
  int maxw = std::max(w, 1), maxh = std::max(h, 1);
  for (const Image& im : images) maxw = std::max(maxw, im.w), maxh = std::max(maxh, im.h);
  const double s = std::clamp(std::floor(560.0 / (g.cols * maxw)), 1.0, 16.0);
  const double pad = 4, top = title.empty() ? 0 : 24;
  const int width = static_cast<int>(pad + g.cols * (maxw * s + pad));
  const int height = static_cast<int>(top + pad + g.rows * (maxh * s + pad));
  std::string out = svg_open(width, height);
  if (!title.empty()) out += svg_text(width / 2.0, 17, title, "middle", "font-size=\"14\"");
  auto level = [&](float p) {
    if (!std::isfinite(p)) return 0;
    return hi > lo ? static_cast<int>(std::lround((p - lo) / (hi - lo) * 255.0)) : 128;
  };
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    const int col = static_cast<int>(i) % g.cols, row = static_cast<int>(i) / g.cols;
    out += "<g class=\"img\" transform=\"translate(" + svg_num(pad + col * (maxw * s + pad)) + "," +
           svg_num(top + pad + row * (maxh * s + pad)) + ")\">\n";
    if (total > kRectPixels) {
      // Large grids: each image an embedded PNG (a <rect> per pixel would be megabytes).
      std::vector<unsigned char> px(static_cast<size_t>(im.h) * im.w * im.channels);
      for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<unsigned char>(level(im.pix[k]));
      std::string png;
      stbi_write_png_to_func(append_bytes, &png, im.w, im.h, im.channels, px.data(),
                             im.w * im.channels);
      out += "<image class=\"png\" x=\"0\" y=\"0\" width=\"" + svg_num(im.w * s) + "\" height=\"" +
             svg_num(im.h * s) +
             "\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64," +
             base64(png) + "\"/>\n</g>\n";
      continue;
    }
    for (int y = 0; y < im.h; ++y) {
      // Runs of one colour on a row share a <rect>.
      int x = 0;
      while (x < im.w) {
        auto colour = [&](int xx) {
          const size_t o = (static_cast<size_t>(y) * im.w + xx) * im.channels;
          char buf[8];
          const int r = level(im.pix[o]);
          const int gg = im.channels == 3 ? level(im.pix[o + 1]) : r;
          const int b = im.channels == 3 ? level(im.pix[o + 2]) : r;
          std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, gg, b);
          return std::string(buf);
        };
        const std::string c = colour(x);
        int e = x + 1;
        while (e < im.w && colour(e) == c) ++e;
        out += "<rect x=\"" + svg_num(x * s) + "\" y=\"" + svg_num(y * s) + "\" width=\"" +
               svg_num((e - x) * s) + "\" height=\"" + svg_num(s) + "\" fill=\"" + c + "\"/>\n";
        x = e;
      }
    }
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

std::string heat_colour(double t) {
  static const std::array<std::array<double, 3>, 5> kStops = {
      {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const int i = std::min(static_cast<int>(t), 3);
  const double f = t - i;
  char buf[8];
  int rgb[3];
  for (int k = 0; k < 3; ++k)
    rgb[k] = static_cast<int>(std::lround(kStops[i][k] * (1 - f) + kStops[i + 1][k] * f));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

Result<std::string> render_heatmap(int rows, int cols, const std::vector<double>& values,
                                   const std::string& title) {
  if (rows <= 0 || cols <= 0) return make_error("plot.heatmap: empty data");
  if (values.size() != static_cast<size_t>(rows) * static_cast<size_t>(cols))
    return make_error("plot.heatmap: " + std::to_string(values.size()) + " values for " +
                      std::to_string(rows) + "x" + std::to_string(cols));
  if (values.size() > (size_t{1} << 20)) return make_error("plot.heatmap: more than 1M cells");
  double lo = INFINITY, hi = -INFINITY;
  int64_t skipped = 0;
  for (double v : values) {
    if (std::isfinite(v))
      lo = std::min(lo, v), hi = std::max(hi, v);
    else
      ++skipped;
  }
  if (skipped == static_cast<int64_t>(values.size()))
    return make_error("plot.heatmap: no finite value");
  const double cell = std::max(1.0, std::min(480.0 / cols, 320.0 / rows));
  const double left = 16, top = title.empty() ? 16 : 36;
  const double gw = cell * cols, gh = cell * rows;
  const int width = static_cast<int>(left + gw + 100), height = static_cast<int>(top + gh + 32);
  std::string out = svg_open(width, height);
  if (!title.empty()) out += svg_text(width / 2.0, 22, title, "middle", "font-size=\"14\"");
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const double v = values[static_cast<size_t>(r) * cols + c];
      const std::string fill =
          !std::isfinite(v) ? "#999999" : heat_colour(hi > lo ? (v - lo) / (hi - lo) : 0.5);
      out += "<rect class=\"cell\" x=\"" + svg_num(left + c * cell) + "\" y=\"" +
             svg_num(top + r * cell) + "\" width=\"" + svg_num(cell) + "\" height=\"" +
             svg_num(cell) + "\" fill=\"" + fill + "\"/>\n";
    }
  }
  // The colour scale: ten steps from the minimum (bottom) to the maximum (top).
  const double sx = left + gw + 16;
  for (int k = 0; k < 10; ++k) {
    out += "<rect class=\"scale\" x=\"" + svg_num(sx) + "\" y=\"" +
           svg_num(top + gh * (9 - k) / 10) + "\" width=\"16\" height=\"" + svg_num(gh / 10) +
           "\" fill=\"" + heat_colour((k + 0.5) / 10) + "\"/>\n";
  }
  out += svg_text(sx + 20, top + 10, tick_label(hi), "start", "class=\"max\"");
  out += svg_text(sx + 20, top + gh, tick_label(lo), "start", "class=\"min\"");
  out += skipped_note(skipped, "cell", height - 6.0);
  out += "</svg>\n";
  return out;
}

std::string svg_num(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string svg_text(double x, double y, const std::string& s, const char* anchor,
                     const std::string& attrs, int decimals) {
  return "<text x=\"" + svg_num(x, decimals) + "\" y=\"" + svg_num(y, decimals) +
         "\" text-anchor=\"" + anchor + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" +
         xml_escape(s) + "</text>\n";
}

std::string svg_open(int width, int height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect x=\"0\" y=\"0\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" fill=\"white\"/>\n";
}

}  // namespace mls::plot
