#include "editor/health_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "editor/imgui_plot.h"

namespace mls::editor {

namespace {

constexpr ImU32 kPalette[] = {IM_COL32(38, 139, 210, 255),  IM_COL32(220, 50, 47, 255),
                              IM_COL32(133, 153, 0, 255),   IM_COL32(211, 54, 130, 255),
                              IM_COL32(42, 161, 152, 255),  IM_COL32(203, 75, 22, 255),
                              IM_COL32(108, 113, 196, 255), IM_COL32(181, 137, 0, 255)};

ImU32 colour(size_t i) {
  return kPalette[i % std::size(kPalette)];
}

// One line per name: the metric at each sample that has it (NaN where it does not).
struct Lines {
  std::vector<std::string> names;
  std::vector<std::vector<double>> ys;
  std::vector<double>& of(const std::string& name, size_t samples) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return ys[i];
    names.push_back(name);
    ys.emplace_back(samples, NAN);
    return ys.back();
  }
};

void plot(const char* id, const char* title, const std::vector<double>& xs, const Lines& lines,
          bool log_y, ImVec2 size) {
  std::vector<PlotSeries> s;
  for (size_t i = 0; i < lines.names.size(); ++i)
    s.push_back({lines.names[i], xs.data(), lines.ys[i].data(), xs.size(), colour(i)});
  PlotOptions o;
  o.title = title;
  o.x_label = "step";
  o.log_y = log_y;
  o.size = size;
  const PlotHover h = plot_lines(id, s, o);
  if (h.active)
    ImGui::SetTooltip("%s at step %.0f: %s", s[h.series].label.c_str(), h.x,
                      format_compact(s[h.series].ys[h.index]).c_str());
}

}  // namespace

HealthPanel::HealthPanel(QWidget* parent) : ImGuiHost(parent) {
  setObjectName("health.panel");
}

void HealthPanel::setLive(std::shared_ptr<const Telemetry> telemetry) {
  if (!telemetry) return;
  live_ = std::move(telemetry);
  samples_.clear();
  chosen_ = 0;
  update();
}

void HealthPanel::pull() {
  if (!live_) return;
  const size_t n = live_->health.size();
  for (size_t i = samples_.size(); i < n; ++i) samples_.push_back(live_->health[i]);
}

std::string HealthPanel::statusLine() const {
  if (samples_.empty())
    return live_ ? "No health samples yet: a run armed with Debug > Health instruments measures "
                   "one every N steps."
                 : "Debug > Health instruments, then Train: the run's health shows here.";
  const HealthSample& last = samples_.back();
  char b[256];
  std::snprintf(b, sizeof b, "%zu samples, the last at step %lld (epoch %lld), loss %s",
                samples_.size(), static_cast<long long>(last.step),
                static_cast<long long>(last.epoch), format_compact(last.loss).c_str());
  std::string s = b;
  if (last.grad_snr >= 0)
    s += " · gradient SNR " + format_compact(last.grad_snr);
  else if (!last.snr_note.empty())
    s += " · gradient SNR not measured: " + last.snr_note;
  return s;
}

void HealthPanel::draw() {
  pull();
  if (beginFullWindow("health")) {
    ImGui::TextUnformatted(statusLine().c_str());
    if (!samples_.empty()) {
      const size_t n = samples_.size();
      std::vector<double> xs(n);
      Lines grad, ratio, dist, dead, snr;
      for (size_t i = 0; i < n; ++i) {
        const HealthSample& h = samples_[i];
        xs[i] = static_cast<double>(h.step);
        for (const ParamHealth& p : h.params) {
          grad.of(p.param, n)[i] = p.grad_norm;
          ratio.of(p.param, n)[i] = p.update_ratio;
          dist.of(p.param, n)[i] = p.distance_from_init;
        }
        for (const UnitHealth& u : h.relus) dead.of(u.label, n)[i] = u.dead_share;
        if (h.grad_snr >= 0) snr.of("gradient SNR", n)[i] = h.grad_snr;
      }
      const float w = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) / 2;
      const float ht = std::max(150.0f, (ImGui::GetContentRegionAvail().y - 60) / 3);
      plot("##grad", "gradient norm per parameter (log)", xs, grad, true, ImVec2(w, ht));
      ImGui::SameLine();
      plot("##ratio", "update / weight per parameter (log)", xs, ratio, true, ImVec2(w, ht));
      plot("##dist", "distance from initialisation", xs, dist, false, ImVec2(w, ht));
      ImGui::SameLine();
      if (!dead.names.empty())
        plot("##dead", "dead share per ReLU layer", xs, dead, false, ImVec2(w, ht));
      else if (!snr.names.empty())
        plot("##snr", "gradient signal-to-noise ratio", xs, snr, true, ImVec2(w, ht));
      else
        ImGui::TextDisabled("no ReLU layers, no gradient SNR");

      // A parameter's histograms: the latest, and each sample's as a shaded column.
      const std::vector<ParamHealth>& params = samples_.back().params;
      if (!params.empty()) {
        chosen_ = std::clamp(chosen_, 0, static_cast<int>(params.size()) - 1);
        ImGui::SetNextItemWidth(220);
        if (ImGui::BeginCombo("parameter", params[static_cast<size_t>(chosen_)].param.c_str())) {
          for (size_t i = 0; i < params.size(); ++i)
            if (ImGui::Selectable(params[i].param.c_str(), static_cast<int>(i) == chosen_))
              chosen_ = static_cast<int>(i);
          ImGui::EndCombo();
        }
        if (!snr.names.empty() && !dead.names.empty()) {
          ImGui::SameLine();
          ImGui::Text("   gradient SNR %s", format_compact(samples_.back().grad_snr).c_str());
        }
        // One row: the latest weights and gradient, then both over time.
        const ParamHealth& p = params[static_cast<size_t>(chosen_)];
        const float sp = ImGui::GetStyle().ItemSpacing.x;
        const float qw = (ImGui::GetContentRegionAvail().x - 3 * sp) / 4;
        const float hh = std::max(
            80.0f, ImGui::GetContentRegionAvail().y - ImGui::GetTextLineHeightWithSpacing() - 6);
        for (int g = 0; g < 2; ++g) {
          const Histogram& h = g ? p.grads : p.weights;
          std::vector<float> counts(h.counts.begin(), h.counts.end());
          char title[160];
          std::snprintf(title, sizeof title, "%s %s", g ? "gradient" : "weights",
                        (format_compact(h.min) + " .. " + format_compact(h.max)).c_str());
          if (g) ImGui::SameLine();
          ImGui::BeginGroup();
          ImGui::TextUnformatted(title);
          ImGui::PlotHistogram(g ? "##gh" : "##wh", counts.data(), static_cast<int>(counts.size()),
                               0, nullptr, 0.0f, FLT_MAX, ImVec2(qw, hh));
          ImGui::EndGroup();
        }
        for (int g = 0; g < 2; ++g) {
          ImGui::SameLine();
          ImGui::BeginGroup();
          ImGui::TextUnformatted(g ? "gradient over time" : "weights over time");
          drawHistogramOverTime(g ? "##gt" : "##wt", g == 1, ImVec2(qw, hh));
          ImGui::EndGroup();
        }
      }
    }
  }
  endFullWindow();
}

void HealthPanel::drawHistogramOverTime(const char* id, bool grads, ImVec2 size) {
  // Each sample a column spanning its own [min, max] on a shared value axis, its bins shaded
  // by their share of the column's largest.
  const std::string& name = samples_.back().params[static_cast<size_t>(chosen_)].param;
  std::vector<const Histogram*> cols;
  double lo = INFINITY, hi = -INFINITY;
  for (const HealthSample& s : samples_)
    for (const ParamHealth& p : s.params)
      if (p.param == name) {
        const Histogram& h = grads ? p.grads : p.weights;
        cols.push_back(&h);
        if (!h.counts.empty() && std::isfinite(h.min) && std::isfinite(h.max)) {
          lo = std::min(lo, h.min);
          hi = std::max(hi, h.max);
        }
      }
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRect(at, ImVec2(at.x + size.x, at.y + size.y), IM_COL32(128, 128, 128, 160));
  if (cols.empty() || !(hi > lo)) return;
  const float cw = size.x / static_cast<float>(cols.size());
  auto y_of = [&](double v) {
    return at.y + size.y - static_cast<float>((v - lo) / (hi - lo)) * size.y;
  };
  for (size_t c = 0; c < cols.size(); ++c) {
    const Histogram& h = *cols[c];
    if (h.counts.empty()) continue;
    const int64_t top = *std::max_element(h.counts.begin(), h.counts.end());
    if (top <= 0) continue;
    const double bw = (h.max - h.min) / static_cast<double>(h.counts.size());
    for (size_t b = 0; b < h.counts.size(); ++b) {
      if (!h.counts[b]) continue;
      const double share = static_cast<double>(h.counts[b]) / static_cast<double>(top);
      const auto alpha = static_cast<int>(40 + 215 * std::sqrt(share));
      const float y0 = y_of(h.min + bw * static_cast<double>(b + 1));
      const float y1 = std::max(y0 + 1.0f, y_of(h.min + bw * static_cast<double>(b)));
      dl->AddRectFilled(ImVec2(at.x + cw * static_cast<float>(c), y0),
                        ImVec2(at.x + cw * static_cast<float>(c + 1), y1),
                        IM_COL32(38, 139, 210, alpha));
    }
  }
  char b[64];
  std::snprintf(b, sizeof b, "%s", format_compact(hi).c_str());
  dl->AddText(ImVec2(at.x + 3, at.y + 1), IM_COL32(160, 160, 160, 255), b);
  std::snprintf(b, sizeof b, "%s", format_compact(lo).c_str());
  dl->AddText(ImVec2(at.x + 3, at.y + size.y - ImGui::GetFontSize() - 1),
              IM_COL32(160, 160, 160, 255), b);
  if (ImGui::IsItemHovered()) {
    const auto c =
        std::min(cols.size() - 1,
                 static_cast<size_t>(std::max(0.0f, (ImGui::GetIO().MousePos.x - at.x) / cw)));
    size_t k = 0;
    for (const HealthSample& s : samples_)
      for (const ParamHealth& p : s.params)
        if (p.param == name && k++ == c)
          ImGui::SetTooltip("step %lld: %s .. %s", static_cast<long long>(s.step),
                            format_compact((grads ? p.grads : p.weights).min).c_str(),
                            format_compact((grads ? p.grads : p.weights).max).c_str());
  }
}

}  // namespace mls::editor
