// Charts drawn with Dear ImGui's draw lists (there is no ImPlot): line charts with a legend
// and a hover crosshair, stacked areas (memory by category), and a timeline of spans (a
// Gantt chart of kernels). No Qt, no engine: they take plain arrays, and the axis maths
// below is free functions so it can be tested without drawing.
//
//   const PlotSeries s[] = {{"train", steps, train, n, IM_COL32(80, 160, 255, 255)},
//                           {"val", steps, val, n, IM_COL32(255, 150, 60, 255), /*dashed=*/true}};
//   PlotOptions o;  o.title = "loss";  o.x_label = "step";  o.log_y = true;
//   PlotHover h = plot_lines("##loss", s, o);    // inside an ImGui window, once a frame
//   if (h.active) ImGui::SetTooltip("%s: %g", s[h.series].label.c_str(), s[h.series].ys[h.index]);
//
//   std::optional<size_t> k = plot_spans("##kernels", spans, o);  // shows its own tooltip
//   nice_ticks(0, 97);                           // {0, 20, 40, 60, 80}
//   format_compact(1234);                        // "1.23k"
#pragma once

#include <imgui.h>

#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mls::editor {

// One line: n points (xs ascending; hovering finds points by binary search). Points with a
// non-finite value (or y <= 0 on a log axis) are gaps.
struct PlotSeries {
  std::string label;
  const double* xs;
  const double* ys;
  size_t n;
  ImU32 color;
  bool dashed = false;
};

struct PlotOptions {
  const char* title = nullptr;  // above the chart
  const char* x_label = nullptr;
  const char* y_label = nullptr;  // above the y axis (ImGui draws no rotated text)
  bool log_y = false;             // ignored by plot_stacked
  ImVec2 size = ImVec2(0, 0);     // 0: the available width / a default height
  bool show_legend = true;
  double mark_x = NAN;  // a vertical marker line (the peak, the best epoch); NaN: none
};

// The point under the mouse: the series whose point at the nearest x is closest to it (for
// plot_stacked, the layer the mouse is over). Inactive while the mouse is elsewhere.
struct PlotHover {
  bool active = false;
  double x = 0;  // xs[index] of that series
  size_t series = 0;
  size_t index = 0;
};

PlotHover plot_lines(const char* id, std::span<const PlotSeries> series, const PlotOptions& opt);

// Layers share the first layer's xs and are stacked bottom-up (layer 0 at the bottom) as
// filled areas; negative and non-finite values count as 0.
PlotHover plot_stacked(const char* id, std::span<const PlotSeries> layers, const PlotOptions& opt);

// A box from start to end on a row (0 at the top); the label is drawn inside when it fits.
struct Span {
  double start, end;
  int row;
  ImU32 color;
  std::string label;
};
// Rows of boxes over a shared x axis; on hover, a tooltip with the label and duration.
// Returns the index of the span under the mouse.
std::optional<size_t> plot_spans(const char* id, std::span<const Span> spans,
                                 const PlotOptions& opt);

// --- Axis maths ---

// The 1, 2 or 5 x 10^k step that cuts `range` into about `target` parts.
double nice_step(double range, int target = 5);
// The multiples of nice_step(hi - lo) within [lo, hi]: 0..1 gives 0, 0.2, ..., 1.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// Ticks for a log axis over [lo, hi] (values, not logs; lo > 0): powers of ten when three or
// more fall inside (every n-th, at most target + 1, over many decades), else 1, 2, 5 x 10^k.
std::vector<double> log_ticks(double lo, double hi, int target = 5);
// The span of a linear y axis over values in [lo, hi], out to the ticks on either side. A
// constant series gets a band of 10% of its size around it (1 around 0), so a learning rate
// of 0.001 fills the chart instead of lying flat between -1 and 1.
std::pair<double, double> linear_y_range(double lo, double hi);
// Three significant digits with a k, M, G, T suffix: 1234 -> "1.23k", 3.4e6 -> "3.4M",
// 0.001 -> "0.001", 1e-5 -> "1e-05"; no trailing zeros.
std::string format_compact(double v);
// A tick's label: the suffix of format_compact with as many decimals as `step` needs, so
// neighbouring ticks differ (1000.2 in steps of 0.2 -> "1.0002k").
std::string format_tick(double v, double step);
// The index of the x nearest to `x` in ascending xs (ties go to the lower); nullopt when xs
// is empty or x is NaN.
std::optional<size_t> nearest_index(std::span<const double> xs, double x);

}  // namespace mls::editor
