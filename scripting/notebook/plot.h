// Figures as standalone SVG text: line/scatter/bar charts, histograms, image grids and
// heatmaps. The one renderer every front end shows (the GUI through QSvgRenderer, the HTML
// export inline, headless runs to files), so a figure looks the same everywhere. No Lua here:
// plot_lib.cpp binds it as mls.plot.
//
//   plot::Chart c;
//   c.title = "loss";
//   c.series.push_back({.name = "train", .x = {0, 1, 2}, .y = {1.0, 0.5, 0.25}});
//   Result<std::string> svg = plot::render_chart(c);  // an error for empty data
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::plot {

enum class Kind { Line, Scatter, Bars };

struct Series {
  std::string name;  // shown in the legend when the chart has several series
  std::vector<double> x, y;
};

struct Chart {
  Kind kind = Kind::Line;
  std::vector<Series> series;
  std::string title, xlabel, ylabel;
  int width = 640, height = 400;
};

// The plot area inside a chart of width x height: margins for tick labels, title and labels.
struct Area {
  double left, top, right, bottom;  // pixels; y grows downwards
};
Area plot_area(int width, int height);

// "Nice" ticks covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `target`
// of them; the first is <= lo and the last >= hi. lo == hi gives a range around the value.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// A tick's label: "0.2", "1000", "1e-05" (no trailing zeros, no "-0").
std::string tick_label(double v);

// Where data value v lands between pixels p0 (at lo) and p1 (at hi).
inline double to_pixel(double v, double lo, double hi, double p0, double p1) {
  return p0 + (v - lo) / (hi - lo) * (p1 - p0);
}

// The colour of series i: a fixed cycle of ten ("#1f77b4", "#ff7f0e", ...).
std::string series_colour(size_t i);

// SVG of a chart. Points with a NaN or infinite coordinate are skipped and counted in a
// note under the chart. Refused: no series, a series with no finite point, x and y of
// different lengths.
Result<std::string> render_chart(const Chart& c);

// Histogram: `bins` equal bins over [min, max] of the finite values (bins <= 0: the
// Freedman-Diaconis rule, clamped to 1..100). edges has bins + 1 entries; a value equal to the
// last edge counts in the last bin. Non-finite values are counted in `skipped`.
struct Histogram {
  std::vector<double> edges;
  std::vector<int64_t> counts;
  int64_t skipped = 0;
};
Result<Histogram> histogram(const std::vector<double>& values, int bins);
// A histogram as a bar chart (the SVG), refused for no finite value.
Result<std::string> render_histogram(const std::vector<double>& values, int bins,
                                     const std::string& title);

// Images, grey (channels 1) or RGB (channels 3), pixels row-major as pix[(y * w + x) * c + ch].
// The grid is scaled together to 0..255 from the min and max of all pixels.
struct Image {
  int h = 0, w = 0, channels = 1;
  std::vector<float> pix;
};
// The first `max_images` of n images laid out (N, C, H, W) in `values` (C planes of H*W each),
// as interleaved pixels: what mls.plot.image and a tensor's image grid draw.
std::vector<Image> images_from_planes(const std::vector<double>& values, int64_t n, int64_t c,
                                      int64_t h, int64_t w, int64_t max_images = INT64_MAX);
// Rows and columns of a grid of n images with at most `cols` columns.
struct Grid {
  int rows = 0, cols = 0;
};
Grid grid_shape(int n, int cols);
// SVG of the images in a grid: each pixel a <rect> (runs of one colour merged) up to 16384
// pixels in all, else each image an embedded PNG (a data: URI); refused for none, an empty one,
// pixels of the wrong count, or more than 4M pixels in all.
Result<std::string> render_images(const std::vector<Image>& images, int cols,
                                  const std::string& title);

// Heatmap of a rows x cols matrix (row-major) with a colour scale and its range. Colours run
// through viridis from "#440154" (the minimum) to "#fde725" (the maximum); non-finite cells
// are grey and counted in a note.
Result<std::string> render_heatmap(int rows, int cols, const std::vector<double>& values,
                                   const std::string& title);
// The heatmap's colour of t in [0, 1] as "#rrggbb".
std::string heat_colour(double t);

// Escapes text for SVG (& < > ").
std::string xml_escape(const std::string& s);
// A coordinate or length in a figure's SVG with `decimals` digits after the point ("12.50").
std::string svg_num(double v, int decimals = 2);
// A <text> element at (x, y), anchored "start", "middle" or "end", its text escaped; `attrs`
// adds attributes ("font-size=\"14\""), `decimals` is the coordinates' precision.
std::string svg_text(double x, double y, const std::string& s, const char* anchor = "middle",
                     const std::string& attrs = "", int decimals = 2);
// The opening of a figure's SVG: its size, the font, and a white background in pixels (Qt's
// renderer draws none given as 100%, and a dark theme would show through). Every figure of
// the notebook starts with it.
std::string svg_open(int width, int height);
// Bytes as base64 (RFC 4648, padded): what a data: URI carries.
std::string base64(const std::string& bytes);

}  // namespace mls::plot
