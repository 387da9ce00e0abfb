#include "editor/imgui_plot.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdio>
#include <limits>
#include <tuple>

namespace mls::editor {

// --- Axis maths ---

double nice_step(double range, int target) {
  if (!(range > 0) || !std::isfinite(range)) return 0;
  const double raw = range / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  // Heckbert's thresholds: the nearest of 1, 2, 5, 10 on a log scale.
  const double nice = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return nice * mag;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) return {lo};
  const double step = nice_step(hi - lo, target);
  // Multiples of the step as k * step (not a running sum, which drifts); the slack keeps
  // a bound that is itself a multiple (1.0 = 5 * 0.2) despite rounding.
  const double k0 = std::ceil(lo / step - 1e-9), k1 = std::floor(hi / step + 1e-9);
  std::vector<double> ticks;
  for (double k = k0; k <= k1 && ticks.size() < 1000; ++k) ticks.push_back(k == 0 ? 0.0 : k * step);
  return ticks;
}

namespace {

// 10^e, exactly the literal 1e<e> (1 / 10^-e for negative e: 10^12 is exact, its reciprocal
// correctly rounded).
double pow10(int e) {
  return e >= 0 ? std::pow(10.0, e) : 1.0 / std::pow(10.0, -e);
}

}  // namespace

std::vector<double> log_ticks(double lo, double hi, int target) {
  if (!(lo > 0) || !std::isfinite(hi) || !(hi >= lo)) return {};
  const int e0 = int(std::ceil(std::log10(lo) - 1e-9)), e1 = int(std::floor(std::log10(hi) + 1e-9));
  std::vector<double> ticks;
  if (e1 - e0 + 1 >= 3) {
    // Powers of ten; over many decades every n-th, aligned so that 1 stays a tick.
    const int slots = std::max(1, target) + 1;
    const int every = std::max(1, (e1 - e0 + 1 + slots - 1) / slots);
    int e = e0;
    while (e % every != 0) ++e;
    for (; e <= e1; e += every) ticks.push_back(pow10(e));
    return ticks;
  }
  for (int e = e0 - 2; e <= e1 + 1; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * pow10(e);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  if (ticks.size() >= 2) return ticks;
  // Less than a factor of 2 or so: linear ticks read better.
  ticks.clear();
  for (double t : nice_ticks(lo, hi, target))
    if (t > 0) ticks.push_back(t);
  return ticks;
}

namespace {

// "%.*f" without trailing zeros (or a trailing dot).
std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::clamp(decimals, 0, 12), v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

int exponent10(double a) {
  return int(std::floor(std::log10(a) + 1e-12));
}

constexpr const char* kSuffix[] = {"", "k", "M", "G", "T"};

}  // namespace

std::string format_compact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  char buf[64];
  const double a = std::fabs(v);
  if (a < 1e-3 || a >= 999.5e12) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  // Round to three significant digits first: 999.95k becomes 1M, not "1000k".
  const double unit = std::pow(10.0, exponent10(a) - 2);
  const double r = std::round(v / unit) * unit;
  const int s = std::clamp(exponent10(std::fabs(r)) / 3, 0, 4);
  const double scaled = r / std::pow(1000.0, s);
  return fixed(scaled, 2 - exponent10(std::fabs(scaled))) + kSuffix[s];
}

std::string format_tick(double v, double step) {
  if (!(step > 0) || !std::isfinite(step) || !std::isfinite(v)) return format_compact(v);
  if (std::fabs(v) < step * 1e-9) return "0";
  const double a = std::fabs(v);
  if (a >= 999.5e12) return format_compact(v);
  if (step < 1e-3) {
    // Small steps in exponent form, with the digits that tell the ticks apart.
    char buf[64];
    const int sig = std::clamp(exponent10(a) - exponent10(step) + 1, 1, 6);
    std::snprintf(buf, sizeof buf, "%.*g", sig, v);
    return buf;
  }
  const int s = a >= 1e3 ? std::clamp(exponent10(a) / 3, 0, 4) : 0;
  const double scale = std::pow(1000.0, s);
  const int decimals = std::max(0, int(std::ceil(-std::log10(step / scale) - 1e-9)));
  return fixed(v / scale, decimals) + kSuffix[s];
}

std::optional<size_t> nearest_index(std::span<const double> xs, double x) {
  if (xs.empty() || std::isnan(x)) return std::nullopt;
  const auto it = std::lower_bound(xs.begin(), xs.end(), x);
  if (it == xs.begin()) return 0;
  if (it == xs.end()) return xs.size() - 1;
  const size_t i = size_t(it - xs.begin());
  return x - xs[i - 1] <= xs[i] - x ? i - 1 : i;
}

std::pair<double, double> linear_y_range(double lo, double hi) {
  if (lo == hi) {
    // Relative to the value: a fixed pad of 1 would flatten every small constant.
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  // Out to the ticks on either side, so the top and bottom grid lines are labelled.
  const double step = nice_step(hi - lo);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

// --- Drawing ---

namespace {

constexpr ImU32 kMarkColor = IM_COL32(255, 200, 80, 220);
constexpr float kLineWidth = 1.5f;

bool finite_point(const PlotSeries& s, size_t i, bool log_y) {
  return std::isfinite(s.xs[i]) && std::isfinite(s.ys[i]) && (!log_y || s.ys[i] > 0);
}

// Where the chart sits on screen and how values map to it (y in log10 on a log axis).
struct Axes {
  ImVec2 min, max;  // the plotting area
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_y = false;
  bool hovered = false;  // the mouse is over the plotting area

  float px(double x) const {
    return x1 == x0 ? (min.x + max.x) / 2 : float(min.x + (x - x0) / (x1 - x0) * (max.x - min.x));
  }
  float py(double y) const {
    const double v = log_y ? std::log10(y) : y;
    return y1 == y0 ? (min.y + max.y) / 2 : float(max.y - (v - y0) / (y1 - y0) * (max.y - min.y));
  }
  ImVec2 at(double x, double y) const { return ImVec2(px(x), py(y)); }
  double x_at(float sx) const {
    return x0 + (sx - min.x) / std::max(1.0f, max.x - min.x) * (x1 - x0);
  }
  double y_at(float sy) const {
    const double v = y0 + (max.y - sy) / std::max(1.0f, max.y - min.y) * (y1 - y0);
    return log_y ? std::pow(10.0, v) : v;
  }
};

struct Tick {
  double value;
  std::string label;
};

std::vector<Tick> label_ticks(const std::vector<double>& values, bool log) {
  std::vector<Tick> ticks;
  const double step = values.size() >= 2 ? values[1] - values[0] : 0;
  for (double v : values) ticks.push_back({v, log ? format_compact(v) : format_tick(v, step)});
  return ticks;
}

ImVec2 chart_size(const PlotOptions& opt, float default_height) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  return ImVec2(std::max(opt.size.x > 0 ? opt.size.x : avail.x, 60.0f),
                std::max(opt.size.y > 0 ? opt.size.y : default_height, 40.0f));
}

// Reserves the chart's rectangle (an invisible button: it takes the clicks, so dragging
// on a chart does not drag the window) and draws the frame, the grid, the ticks, the title
// and the axis labels. y_ticks empty: no y axis labels (the span timeline).
Axes draw_frame(const char* id, const PlotOptions& opt, ImVec2 size, Axes ax,
                const std::vector<Tick>& x_ticks, const std::vector<Tick>& y_ticks) {
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  const bool item_hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetFontSize();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = ImGui::GetColorU32(ImGuiCol_Text, 0.08f);

  float top = pos.y;
  if (opt.title) {
    const float w = ImGui::CalcTextSize(opt.title).x;
    dl->AddText(ImVec2(pos.x + std::max(0.0f, (size.x - w) / 2), top), text, opt.title);
    top += fh + 4;
  }
  if (opt.y_label) {
    dl->AddText(ImVec2(pos.x, top), dim, opt.y_label);
    top += fh + 2;
  }
  if (!y_ticks.empty()) top += fh / 2;  // the top tick's label is centred on the edge
  float y_label_w = 0;
  for (const Tick& t : y_ticks)
    y_label_w = std::max(y_label_w, ImGui::CalcTextSize(t.label.c_str()).x);
  const float bottom = pos.y + size.y - (fh + 4) - (opt.x_label ? fh + 2 : 0);
  float right_pad = 6;
  if (!x_ticks.empty())
    right_pad = std::max(right_pad, ImGui::CalcTextSize(x_ticks.back().label.c_str()).x / 2 + 2);
  ax.min = ImVec2(pos.x + (y_ticks.empty() ? 1 : y_label_w + 8), top);
  ax.max = ImVec2(std::max(ax.min.x + 10, pos.x + size.x - right_pad), std::max(top + 10, bottom));

  dl->AddRectFilled(ax.min, ax.max, ImGui::GetColorU32(ImGuiCol_FrameBg));
  for (const Tick& t : y_ticks) {
    const float y = ax.py(t.value);
    if (y < ax.min.y - 1 || y > ax.max.y + 1) continue;
    dl->AddLine(ImVec2(ax.min.x, y), ImVec2(ax.max.x, y), grid);
    const ImVec2 ts = ImGui::CalcTextSize(t.label.c_str());
    dl->AddText(ImVec2(ax.min.x - 5 - ts.x, y - ts.y / 2), dim, t.label.c_str());
  }
  float last_right = -FLT_MAX;
  for (const Tick& t : x_ticks) {
    const float x = ax.px(t.value);
    if (x < ax.min.x - 1 || x > ax.max.x + 1) continue;
    dl->AddLine(ImVec2(x, ax.min.y), ImVec2(x, ax.max.y), grid);
    dl->AddLine(ImVec2(x, ax.max.y), ImVec2(x, ax.max.y + 3), dim);
    const ImVec2 ts = ImGui::CalcTextSize(t.label.c_str());
    const float lx = std::clamp(x - ts.x / 2, pos.x, pos.x + size.x - ts.x);
    if (lx < last_right + 6) continue;  // would overlap its neighbour
    dl->AddText(ImVec2(lx, ax.max.y + 3), dim, t.label.c_str());
    last_right = lx + ts.x;
  }
  if (opt.x_label) {
    const float w = ImGui::CalcTextSize(opt.x_label).x;
    dl->AddText(ImVec2(ax.min.x + std::max(0.0f, (ax.max.x - ax.min.x - w) / 2), ax.max.y + fh + 5),
                dim, opt.x_label);
  }
  dl->AddRect(ax.min, ax.max, ImGui::GetColorU32(ImGuiCol_Border));
  const ImVec2 m = ImGui::GetIO().MousePos;
  ax.hovered =
      item_hovered && m.x >= ax.min.x && m.x <= ax.max.x && m.y >= ax.min.y && m.y <= ax.max.y;
  return ax;
}

// The frame of a chart with nothing to show.
void draw_empty(const char* id, const PlotOptions& opt, ImVec2 size) {
  const Axes ax = draw_frame(id, opt, size, Axes{}, {}, {});
  const char* msg = "no data";
  const ImVec2 ts = ImGui::CalcTextSize(msg);
  ImGui::GetWindowDrawList()->AddText(
      ImVec2((ax.min.x + ax.max.x - ts.x) / 2, (ax.min.y + ax.max.y - ts.y) / 2),
      ImGui::GetColorU32(ImGuiCol_TextDisabled), msg);
}

// A polyline, or dashes along it (6 on, 4 off, continuing across its corners).
void draw_polyline(ImDrawList* dl, const std::vector<ImVec2>& pts, ImU32 col, float thickness,
                   bool dashed) {
  if (!dashed) {
    dl->AddPolyline(pts.data(), int(pts.size()), col, ImDrawFlags_None, thickness);
    return;
  }
  constexpr float kOn = 6, kOff = 4;
  float phase = 0;  // distance into the current on+off period
  for (size_t i = 1; i < pts.size(); ++i) {
    const ImVec2 a = pts[i - 1], b = pts[i];
    const float len = std::sqrt((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y));
    float t = 0;
    while (t < len) {
      const bool on = phase < kOn;
      const float step = std::min(len - t, on ? kOn - phase : kOn + kOff - phase);
      if (on && len > 0) {
        const float u0 = t / len, u1 = (t + step) / len;
        dl->AddLine(ImVec2(a.x + (b.x - a.x) * u0, a.y + (b.y - a.y) * u0),
                    ImVec2(a.x + (b.x - a.x) * u1, a.y + (b.y - a.y) * u1), col, thickness);
      }
      t += step;
      phase += step;
      if (phase >= kOn + kOff) phase = 0;
    }
  }
}

void draw_mark(ImDrawList* dl, const Axes& ax, double mark_x) {
  if (!std::isfinite(mark_x)) return;
  const float x = ax.px(mark_x);
  if (x < ax.min.x || x > ax.max.x) return;
  draw_polyline(dl, {ImVec2(x, ax.min.y), ImVec2(x, ax.max.y)}, kMarkColor, 1.0f, true);
}

// One series as screen points: runs of finite points become polylines. With more points
// than pixels, each pixel column keeps its first, lowest, highest and last point (in
// order), so spikes survive and the vertex count follows the width, not the data.
void draw_series(ImDrawList* dl, const Axes& ax, const PlotSeries& s) {
  std::vector<ImVec2> run;
  auto end_run = [&] {
    if (run.size() >= 2) draw_polyline(dl, run, s.color, kLineWidth, s.dashed);
    if (run.size() == 1) dl->AddCircleFilled(run[0], kLineWidth + 0.5f, s.color);
    run.clear();
  };
  const bool decimate = double(s.n) > 3.0 * (ax.max.x - ax.min.x);
  struct Pick {
    size_t i;
    ImVec2 p;
  };
  Pick first{}, last{}, lo{}, hi{};
  int column = INT_MIN;
  auto end_column = [&] {
    if (column == INT_MIN) return;
    Pick picks[] = {first, lo, hi, last};
    std::sort(std::begin(picks), std::end(picks),
              [](const Pick& a, const Pick& b) { return a.i < b.i; });
    for (size_t k = 0; k < 4; ++k)
      if (k == 0 || picks[k].i != picks[k - 1].i) run.push_back(picks[k].p);
    column = INT_MIN;
  };
  for (size_t i = 0; i < s.n; ++i) {
    if (!finite_point(s, i, ax.log_y)) {
      end_column();
      end_run();
      continue;
    }
    const ImVec2 p = ax.at(s.xs[i], s.ys[i]);
    if (!decimate) {
      run.push_back(p);
      continue;
    }
    const int c = int(std::floor(p.x));
    if (c != column) {
      end_column();
      column = c;
      first = last = lo = hi = {i, p};
      continue;
    }
    last = {i, p};
    if (p.y > lo.p.y) lo = last;  // screen y grows downwards
    if (p.y < hi.p.y) hi = last;
  }
  end_column();
  end_run();
}

struct LegendEntry {
  const std::string* label;
  ImU32 color;
  bool dashed;
  bool filled;  // a square (stacked areas) instead of a line
};

void draw_legend(ImDrawList* dl, const Axes& ax, const std::vector<LegendEntry>& entries) {
  if (entries.empty()) return;
  const float fh = ImGui::GetFontSize(), swatch = 16, pad = 5;
  float w = 0;
  for (const LegendEntry& e : entries) w = std::max(w, ImGui::CalcTextSize(e.label->c_str()).x);
  const ImVec2 size(pad * 2 + swatch + 4 + w, pad * 2 + float(entries.size()) * (fh + 2) - 2);
  const ImVec2 p0(ax.max.x - size.x - 6, ax.min.y + 6);
  dl->AddRectFilled(p0, ImVec2(p0.x + size.x, p0.y + size.y),
                    ImGui::GetColorU32(ImGuiCol_PopupBg, 0.85f), 3.0f);
  dl->AddRect(p0, ImVec2(p0.x + size.x, p0.y + size.y), ImGui::GetColorU32(ImGuiCol_Border), 3.0f);
  float y = p0.y + pad;
  for (const LegendEntry& e : entries) {
    const float cy = y + fh / 2, x = p0.x + pad;
    if (e.filled)
      dl->AddRectFilled(ImVec2(x + 3, cy - 5), ImVec2(x + swatch - 3, cy + 5), e.color);
    else
      draw_polyline(dl, {ImVec2(x, cy), ImVec2(x + swatch, cy)}, e.color, 2.0f, e.dashed);
    dl->AddText(ImVec2(x + swatch + 4, y), ImGui::GetColorU32(ImGuiCol_Text), e.label->c_str());
    y += fh + 2;
  }
}

// A filled dot with a ring in the background colour, so it stands out on its own line.
void draw_dot(ImDrawList* dl, ImVec2 p, ImU32 col) {
  dl->AddCircleFilled(p, 4.5f, ImGui::GetColorU32(ImGuiCol_WindowBg));
  dl->AddCircleFilled(p, 3.2f, col);
}

void draw_crosshair(ImDrawList* dl, const Axes& ax, float x) {
  dl->AddLine(ImVec2(x, ax.min.y), ImVec2(x, ax.max.y), ImGui::GetColorU32(ImGuiCol_Text, 0.35f));
}

// The colour with its alpha scaled.
ImU32 fade(ImU32 c, float alpha) {
  const unsigned a = (c >> IM_COL32_A_SHIFT) & 0xFF;
  return (c & ~IM_COL32_A_MASK) | (ImU32(float(a) * alpha) << IM_COL32_A_SHIFT);
}

// Fills [lo, hi] over the given x positions as one strip of quads (no anti-aliased
// fringe: neighbouring quads and layers meet without seams).
void fill_band(ImDrawList* dl, const std::vector<float>& xs, const std::vector<float>& lo,
               const std::vector<float>& hi, ImU32 col) {
  const ImVec2 uv = ImGui::GetFontTexUvWhitePixel();
  constexpr size_t kChunk = 4096;  // quads per reservation, within 16-bit indices
  for (size_t start = 0; start + 1 < xs.size(); start += kChunk) {
    const size_t quads = std::min(kChunk, xs.size() - 1 - start);
    dl->PrimReserve(int(quads * 6), int(quads * 4));
    for (size_t k = start; k < start + quads; ++k) {
      const ImDrawIdx base = ImDrawIdx(dl->_VtxCurrentIdx);
      dl->PrimWriteVtx(ImVec2(xs[k], hi[k]), uv, col);
      dl->PrimWriteVtx(ImVec2(xs[k + 1], hi[k + 1]), uv, col);
      dl->PrimWriteVtx(ImVec2(xs[k + 1], lo[k + 1]), uv, col);
      dl->PrimWriteVtx(ImVec2(xs[k], lo[k]), uv, col);
      for (ImDrawIdx i : {0, 1, 2, 0, 2, 3}) dl->PrimWriteIdx(ImDrawIdx(base + i));
    }
  }
}

Axes linear_y(Axes ax, double lo, double hi) {
  std::tie(ax.y0, ax.y1) = linear_y_range(lo, hi);
  return ax;
}

Axes x_range(Axes ax, double lo, double hi, double mark) {
  if (std::isfinite(mark)) lo = std::min(lo, mark), hi = std::max(hi, mark);
  if (lo == hi) lo -= 0.5, hi += 0.5;
  ax.x0 = lo, ax.x1 = hi;
  return ax;
}

}  // namespace

PlotHover plot_lines(const char* id, std::span<const PlotSeries> series, const PlotOptions& opt) {
  const ImVec2 size = chart_size(opt, 240);
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const PlotSeries& s : series)
    for (size_t i = 0; i < s.n; ++i)
      if (finite_point(s, i, opt.log_y)) {
        xlo = std::min(xlo, s.xs[i]), xhi = std::max(xhi, s.xs[i]);
        ylo = std::min(ylo, s.ys[i]), yhi = std::max(yhi, s.ys[i]);
      }
  if (!(xlo <= xhi)) {
    draw_empty(id, opt, size);
    return {};
  }
  Axes ax = x_range(Axes{}, xlo, xhi, opt.mark_x);
  std::vector<double> y_values;
  if (opt.log_y) {
    ax.log_y = true;
    ax.y0 = std::log10(ylo), ax.y1 = std::log10(yhi);
    if (ax.y0 == ax.y1) ax.y0 -= 0.5, ax.y1 += 0.5;
    const double pad = (ax.y1 - ax.y0) * 0.05;
    ax.y0 -= pad, ax.y1 += pad;
    y_values = log_ticks(std::pow(10.0, ax.y0), std::pow(10.0, ax.y1));
  } else {
    ax = linear_y(ax, ylo, yhi);
    y_values = nice_ticks(ax.y0, ax.y1);
  }
  ax = draw_frame(id, opt, size, ax, label_ticks(nice_ticks(ax.x0, ax.x1), false),
                  label_ticks(y_values, opt.log_y));

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(ax.min, ax.max, true);
  draw_mark(dl, ax, opt.mark_x);
  for (const PlotSeries& s : series) draw_series(dl, ax, s);

  PlotHover hover;
  if (ax.hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const double mx = ax.x_at(m.x);
    float best = FLT_MAX;
    std::vector<std::pair<ImVec2, ImU32>> dots;
    for (size_t k = 0; k < series.size(); ++k) {
      const PlotSeries& s = series[k];
      const std::optional<size_t> i = nearest_index({s.xs, s.n}, mx);
      if (!i || !finite_point(s, *i, opt.log_y)) continue;
      const ImVec2 p = ax.at(s.xs[*i], s.ys[*i]);
      dots.push_back({p, s.color});
      const float d = (p.x - m.x) * (p.x - m.x) + (p.y - m.y) * (p.y - m.y);
      if (d < best) best = d, hover = {true, s.xs[*i], k, *i};
    }
    if (hover.active) draw_crosshair(dl, ax, ax.px(hover.x));
    for (const auto& [p, c] : dots) draw_dot(dl, p, c);
  }
  dl->PopClipRect();

  if (opt.show_legend) {
    std::vector<LegendEntry> entries;
    for (const PlotSeries& s : series)
      if (!s.label.empty()) entries.push_back({&s.label, s.color, s.dashed, false});
    draw_legend(dl, ax, entries);
  }
  return hover;
}

PlotHover plot_stacked(const char* id, std::span<const PlotSeries> layers, const PlotOptions& opt) {
  const ImVec2 size = chart_size(opt, 240);
  size_t n = layers.empty() ? 0 : layers[0].n;
  for (const PlotSeries& l : layers) n = std::min(n, l.n);
  const double* xs = layers.empty() ? nullptr : layers[0].xs;
  // What each layer adds at point i: negative and missing values add nothing.
  auto value = [&](size_t layer, size_t i) {
    const double v = layers[layer].ys[i];
    return std::isfinite(v) && v > 0 ? v : 0.0;
  };
  std::vector<double> total(n, 0.0);
  double xlo = INFINITY, xhi = -INFINITY, top = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(xs[i])) continue;
    for (size_t l = 0; l < layers.size(); ++l) total[i] += value(l, i);
    xlo = std::min(xlo, xs[i]), xhi = std::max(xhi, xs[i]), top = std::max(top, total[i]);
  }
  if (!(xlo <= xhi)) {
    draw_empty(id, opt, size);
    return {};
  }
  Axes ax = linear_y(x_range(Axes{}, xlo, xhi, opt.mark_x), 0, top > 0 ? top : 1);
  ax = draw_frame(id, opt, size, ax, label_ticks(nice_ticks(ax.x0, ax.x1), false),
                  label_ticks(nice_ticks(ax.y0, ax.y1), false));

  // The points drawn: all of them, or per pixel column the one with the highest stack (the
  // peaks are what a memory chart is read for).
  std::vector<size_t> picks;
  const bool decimate = double(n) > 2.0 * (ax.max.x - ax.min.x);
  int column = INT_MIN;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(xs[i])) continue;
    const int c = int(std::floor(ax.px(xs[i])));
    if (decimate && c == column) {
      if (total[i] > total[picks.back()]) picks.back() = i;
      continue;
    }
    picks.push_back(i);
    column = c;
  }

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(ax.min, ax.max, true);
  std::vector<float> sx(picks.size()), lo(picks.size(), ax.py(0)), hi(picks.size());
  std::vector<double> base(picks.size(), 0.0);
  for (size_t k = 0; k < picks.size(); ++k) sx[k] = ax.px(xs[picks[k]]);
  for (size_t l = 0; l < layers.size(); ++l) {
    for (size_t k = 0; k < picks.size(); ++k) {
      base[k] += value(l, picks[k]);
      hi[k] = ax.py(base[k]);
    }
    fill_band(dl, sx, lo, hi, fade(layers[l].color, 0.6f));
    // The layer's top edge where it has a thickness; where it is empty, the edge would lie
    // on the layer below's and hide it.
    std::vector<ImVec2> edge;
    for (size_t k = 0; k < picks.size(); ++k) {
      const bool empty = value(l, picks[k]) == 0 && (k == 0 || value(l, picks[k - 1]) == 0) &&
                         (k + 1 == picks.size() || value(l, picks[k + 1]) == 0);
      if (!empty) edge.push_back(ImVec2(sx[k], hi[k]));
      if ((empty || k + 1 == picks.size()) && !edge.empty()) {
        if (edge.size() >= 2) draw_polyline(dl, edge, layers[l].color, 1.0f, layers[l].dashed);
        edge.clear();
      }
    }
    lo = hi;
  }
  draw_mark(dl, ax, opt.mark_x);

  PlotHover hover;
  if (ax.hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const size_t i = *nearest_index({xs, n}, ax.x_at(m.x));
    const double my = ax.y_at(m.y);
    // The layer whose band the mouse is in; above the stack, the top layer.
    hover = {true, xs[i], layers.size() - 1, i};
    double cum = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      cum += value(l, i);
      if (my <= cum) {
        hover.series = l;
        break;
      }
    }
    draw_crosshair(dl, ax, ax.px(xs[i]));
    cum = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      cum += value(l, i);
      if (value(l, i) > 0) draw_dot(dl, ax.at(xs[i], cum), layers[l].color);
    }
  }
  dl->PopClipRect();

  if (opt.show_legend) {
    // Top layer first, as the areas are stacked.
    std::vector<LegendEntry> entries;
    for (size_t l = layers.size(); l-- > 0;)
      if (!layers[l].label.empty())
        entries.push_back({&layers[l].label, layers[l].color, false, true});
    draw_legend(dl, ax, entries);
  }
  return hover;
}

std::optional<size_t> plot_spans(const char* id, std::span<const Span> spans,
                                 const PlotOptions& opt) {
  auto valid = [](const Span& s) {
    return std::isfinite(s.start) && std::isfinite(s.end) && s.end >= s.start && s.row >= 0;
  };
  double xlo = INFINITY, xhi = -INFINITY;
  int rows = 0;
  for (const Span& s : spans)
    if (valid(s)) {
      xlo = std::min(xlo, s.start), xhi = std::max(xhi, s.end);
      rows = std::max(rows, s.row + 1);
    }
  const float fh = ImGui::GetFontSize(), row_h = fh + 8;
  // By default as tall as its rows: the title, labels and axis around them.
  const float chrome =
      (opt.title ? fh + 4 : 0) + (opt.y_label ? fh + 2 : 0) + fh + 4 + (opt.x_label ? fh + 2 : 0);
  const ImVec2 size = chart_size(opt, float(std::max(rows, 1)) * row_h + chrome + 2);
  if (rows == 0) {
    draw_empty(id, opt, size);
    return std::nullopt;
  }
  Axes ax = x_range(Axes{}, xlo, xhi, opt.mark_x);
  ax.y0 = 0, ax.y1 = rows;
  ax = draw_frame(id, opt, size, ax, label_ticks(nice_ticks(ax.x0, ax.x1), false), {});
  const float rh = (ax.max.y - ax.min.y) / float(rows);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(ax.min, ax.max, true);
  for (int r = 1; r < rows; r += 2)  // every other row shaded, to follow a row by eye
    dl->AddRectFilled(ImVec2(ax.min.x, ax.min.y + float(r) * rh),
                      ImVec2(ax.max.x, ax.min.y + float(r + 1) * rh),
                      ImGui::GetColorU32(ImGuiCol_Text, 0.03f));
  const ImVec2 m = ImGui::GetIO().MousePos;
  std::optional<size_t> hovered;
  ImVec2 hovered_min, hovered_max;
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    if (!valid(s)) continue;
    const float a = ax.px(s.start), b = std::max(ax.px(s.end), a + 1);
    if (b < ax.min.x || a > ax.max.x) continue;
    const ImVec2 p0(a, ax.min.y + float(s.row) * rh + 1),
        p1(b, ax.min.y + float(s.row + 1) * rh - 1);
    dl->AddRectFilled(p0, p1, s.color);
    const ImVec2 ts = ImGui::CalcTextSize(s.label.c_str());
    if (!s.label.empty() && b - a >= ts.x + 6) {
      // Dark text on light boxes, light on dark (perceived luminance).
      const unsigned r = s.color & 0xFF, g = (s.color >> 8) & 0xFF, bl = (s.color >> 16) & 0xFF;
      const bool light = r * 299 + g * 587 + bl * 114 > 140 * 1000;
      dl->PushClipRect(p0, p1, true);
      dl->AddText(ImVec2(a + 3, (p0.y + p1.y - ts.y) / 2),
                  light ? IM_COL32(20, 20, 20, 255) : IM_COL32(240, 240, 240, 255),
                  s.label.c_str());
      dl->PopClipRect();
    }
    // Later spans are drawn over earlier ones: the last under the mouse is the one seen.
    if (ax.hovered && m.x >= a && m.x <= b && m.y >= p0.y && m.y <= p1.y)
      hovered = k, hovered_min = p0, hovered_max = p1;
  }
  draw_mark(dl, ax, opt.mark_x);
  if (hovered) dl->AddRect(hovered_min, hovered_max, ImGui::GetColorU32(ImGuiCol_Text), 0, 0, 1.5f);
  dl->PopClipRect();

  if (hovered) {
    const Span& s = spans[*hovered];
    ImGui::BeginTooltip();
    if (!s.label.empty()) ImGui::TextUnformatted(s.label.c_str());
    ImGui::Text("duration %s", format_compact(s.end - s.start).c_str());
    ImGui::TextDisabled("%s to %s", format_compact(s.start).c_str(), format_compact(s.end).c_str());
    ImGui::EndTooltip();
  }
  return hovered;
}

}  // namespace mls::editor
