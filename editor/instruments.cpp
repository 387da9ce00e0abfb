// [SECTION] helpers: units, colours, queued signals
// [SECTION] live data: pull() copies what the training thread published
// [SECTION] dashboard
// [SECTION] memory profiler
// [SECTION] op profiler
// [SECTION] pre-flight
// [SECTION] CSV export
#include "editor/instruments.h"

#include <imgui.h>

#include <QMetaObject>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "editor/imgui_plot.h"
#include "engine/core/atomic_file.h"

namespace mls::editor {

// [SECTION] helpers: units, colours, queued signals

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string mib(double bytes) {
  char s[32];
  if (bytes >= 1024 * kMiB)
    std::snprintf(s, sizeof s, "%.2f GiB", bytes / (1024 * kMiB));
  else if (bytes >= kMiB)
    std::snprintf(s, sizeof s, "%.2f MiB", bytes / kMiB);
  else
    std::snprintf(s, sizeof s, "%.1f KiB", bytes / 1024.0);
  return s;
}

std::string duration(double s) {
  char b[32];
  if (!(s >= 0) || !std::isfinite(s)) return "-";
  if (s < 10)
    std::snprintf(b, sizeof b, "%.2f s", s);
  else if (s < 60)
    std::snprintf(b, sizeof b, "%.0f s", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm %02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh %02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) / 60 % 60);
  return b;
}

// One colour per memory category, the stacking order bottom-up: what stays all run at the
// bottom, what comes and goes above it, the arena's free part (grey) on top.
constexpr MemCat kStackOrder[] = {MemCat::Parameter,  MemCat::OptimizerState, MemCat::Input,
                                  MemCat::Constant,   MemCat::Other,          MemCat::Gradient,
                                  MemCat::Activation, MemCat::Backward,       MemCat::Workspace,
                                  MemCat::ArenaFree};
ImU32 cat_color(MemCat c) {
  switch (c) {
    case MemCat::Parameter:
      return IM_COL32(90, 140, 230, 255);
    case MemCat::OptimizerState:
      return IM_COL32(150, 110, 220, 255);
    case MemCat::Input:
      return IM_COL32(90, 190, 200, 255);
    case MemCat::Constant:
      return IM_COL32(130, 130, 160, 255);
    case MemCat::Other:
      return IM_COL32(170, 120, 90, 255);
    case MemCat::Gradient:
      return IM_COL32(230, 90, 90, 255);
    case MemCat::Activation:
      return IM_COL32(90, 200, 120, 255);
    case MemCat::Backward:
      return IM_COL32(240, 170, 60, 255);
    case MemCat::Workspace:
      return IM_COL32(220, 120, 170, 255);
    case MemCat::ArenaFree:
      return IM_COL32(95, 95, 100, 140);
  }
  return IM_COL32(200, 200, 200, 255);
}

constexpr ImU32 kForward = IM_COL32(90, 160, 240, 255);
constexpr ImU32 kBackward = IM_COL32(240, 150, 70, 255);
constexpr ImU32 kOverlay[] = {IM_COL32(200, 120, 220, 255), IM_COL32(120, 210, 160, 255),
                              IM_COL32(230, 210, 90, 255), IM_COL32(160, 160, 160, 255)};

// Signals that open dialogs or touch the canvas must not run inside paintGL: queue them.
template <class F>
void later(QObject* o, F&& f) {
  QMetaObject::invokeMethod(o, std::forward<F>(f), Qt::QueuedConnection);
}

// TensorBoard's smoothing: an exponential moving average, debiased at the start.
void smooth(const std::vector<double>& v, double w, std::vector<double>& out, size_t from) {
  out.resize(v.size());
  double acc = 0;
  double weight = 0;
  if (from > 0) {
    // Resume: acc and weight are implied by the previous smoothed value.
    weight = 1 - std::pow(w, static_cast<double>(from));
    acc = out[from - 1] * weight;
  }
  for (size_t i = from; i < v.size(); ++i) {
    acc = acc * w + (1 - w) * (std::isfinite(v[i]) ? v[i] : 0.0);
    weight = weight * w + (1 - w);
    out[i] = weight > 0 ? acc / weight : v[i];
  }
}

}  // namespace

InstrumentsPanel::InstrumentsPanel(QWidget* parent) : ImGuiHost(parent) {
  setObjectName("instruments");
  setMinimumSize(480, 320);
}

void InstrumentsPanel::setLive(std::shared_ptr<const Telemetry> telemetry) {
  if (!telemetry) return;
  live_ = std::move(telemetry);
  phase_ = RunPhase::Training;
  for (auto* v : {&step_x_, &loss_, &smooth_, &lr_, &rate_, &mem_, &time_x_, &epoch_x_,
                  &epoch_loss_, &val_loss_, &val_acc_})
    v->clear();
  update();
}

void InstrumentsPanel::setPreflight(std::shared_ptr<const PreflightEstimate> estimate) {
  preflight_ = std::move(estimate);
  if (preflight_ && estimate_batch_ == 0) estimate_batch_ = static_cast<int>(preflight_->batch);
  update();
}

void InstrumentsPanel::setRuns(std::vector<RunCurves> runs) {
  std::vector<bool> shown(runs.size(), false);
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = 0; j < runs_.size(); ++j)
      if (runs_[j].run_id == runs[i].run_id && j < shown_.size()) shown[i] = shown_[j];
  for (size_t i = 0; i < runs.size(); ++i) shown[i] = shown[i] || runs[i].shown;
  runs_ = std::move(runs);
  shown_ = std::move(shown);
  update();
}

void InstrumentsPanel::setOverlayLegend(std::string legend) {
  overlay_legend_ = std::move(legend);
  update();
}

void InstrumentsPanel::showTab(const QString& name) {
  const QString names[] = {"Dashboard", "Memory", "Ops", "Pre-flight"};
  for (int i = 0; i < 4; ++i)
    if (names[i] == name) tab_request_ = i;
  update();
}

// [SECTION] live data: pull() copies what the training thread published

void InstrumentsPanel::pull() {
  if (!live_) return;
  const size_t n = live_->steps.size();
  const size_t from = step_x_.size();
  for (size_t i = from; i < n; ++i) {
    const StepPoint& p = live_->steps[i];
    step_x_.push_back(static_cast<double>(p.step));
    loss_.push_back(p.loss);
    lr_.push_back(p.lr);
    rate_.push_back(p.samples_per_s);
    mem_.push_back(static_cast<double>(p.memory_bytes) / kMiB);
    time_x_.push_back(p.seconds);
  }
  if (smoothed_at_ != smoothing_) {
    smoothed_at_ = smoothing_;
    smooth(loss_, smoothing_, smooth_, 0);
  } else if (from < n) {
    smooth(loss_, smoothing_, smooth_, from);
  }
  for (size_t i = epoch_x_.size(); i < live_->epochs.size(); ++i) {
    const EpochPoint& e = live_->epochs[i];
    epoch_x_.push_back(static_cast<double>(e.epoch));
    epoch_loss_.push_back(e.train_loss);
    val_loss_.push_back(e.has_validation ? e.val_loss : NAN);
    val_acc_.push_back(e.has_validation ? e.val_accuracy : NAN);
  }
}

void InstrumentsPanel::draw() {
  pull();
  if (beginFullWindow("instruments") && ImGui::BeginTabBar("views")) {
    const char* names[] = {"Dashboard", "Memory", "Ops", "Pre-flight"};
    for (int i = 0; i < 4; ++i) {
      const ImGuiTabItemFlags f = tab_request_ == i ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(names[i], nullptr, f)) {
        switch (i) {
          case 0:
            drawDashboard();
            break;
          case 1:
            drawMemory();
            break;
          case 2:
            drawOps();
            break;
          default:
            drawPreflight();
            break;
        }
        ImGui::EndTabItem();
      }
    }
    tab_request_ = -1;
    ImGui::EndTabBar();
  }
  endFullWindow();
}

// [SECTION] dashboard

const char* to_string(RunPhase phase) {
  switch (phase) {
    case RunPhase::Training:
      return "training";
    case RunPhase::Paused:
      return "paused";
    case RunPhase::Done:
      return "done";
    case RunPhase::Stopped:
      return "stopped";
    case RunPhase::Failed:
      return "failed";
    case RunPhase::Diverged:
      return "diverged";
  }
  return "?";
}

std::string dashboard_status(RunPhase phase, const StepPoint* last, int64_t planned_epochs,
                             int64_t peak_bytes, const std::string& train_key) {
  if (!last)
    return "No run yet: press Train (" + train_key +
           "). Curves, rate and memory appear here as it runs.";
  // A loss that is no longer finite is a divergence, whatever the run's end was called.
  if (!std::isfinite(last->loss) && phase != RunPhase::Training && phase != RunPhase::Paused)
    phase = RunPhase::Diverged;
  const bool going = phase == RunPhase::Training;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s  epoch %lld/%lld  step %lld  loss %.4g  lr %.3g  %.0f samples/s  ETA %s  "
                "memory %s (peak %s)",
                to_string(phase), static_cast<long long>(last->epoch),
                static_cast<long long>(planned_epochs), static_cast<long long>(last->step),
                static_cast<double>(last->loss), static_cast<double>(last->lr),
                static_cast<double>(last->samples_per_s),
                going ? duration(last->eta_s).c_str() : "-",
                mib(static_cast<double>(last->memory_bytes)).c_str(),
                mib(static_cast<double>(peak_bytes)).c_str());
  return buf;
}

void InstrumentsPanel::setPhase(RunPhase phase) {
  phase_ = phase;
  update();
}

std::string InstrumentsPanel::statusLine() const {
  const StepPoint* last = live_ ? live_->steps.last() : nullptr;
  RunPhase phase = phase_;
  // The run ended before the window heard of it: not "training" any more.
  if (last && !live_->running.load() && (phase == RunPhase::Training || phase == RunPhase::Paused))
    phase = RunPhase::Done;
  return dashboard_status(phase, last, live_ ? live_->planned_epochs.load() : 0,
                          live_ ? live_->allocator_peak() : 0, train_key_);
}

void InstrumentsPanel::drawDashboard() {
  const std::string line = statusLine();
  if (!live_ || !live_->steps.last())
    ImGui::TextDisabled("%s", line.c_str());
  else
    ImGui::TextUnformatted(line.c_str());
  float s = static_cast<float>(smoothing_);
  ImGui::SetNextItemWidth(160);
  if (ImGui::SliderFloat("smoothing", &s, 0.0f, 0.99f, "%.2f")) smoothing_ = s;
  ImGui::SameLine();
  ImGui::Checkbox("log scale", &log_y_);
  ImGui::SameLine();
  if (ImGui::Button("Export CSV...")) later(this, [this] { Q_EMIT exportRequested(); });
  ImGui::SameLine();
  if (ImGui::Button("Compare runs...")) later(this, [this] { Q_EMIT refreshRunsRequested(); });
  if (!runs_.empty()) {
    ImGui::TextDisabled("overlay:");
    if (!overlay_legend_.empty()) {
      ImGui::SameLine();
      ImGui::TextDisabled("(%s)", overlay_legend_.c_str());
    }
    shown_.resize(runs_.size(), false);
    // The newest dozen: more would not fit a line; the store keeps them all.
    for (size_t i = runs_.size() > 12 ? runs_.size() - 12 : 0; i < runs_.size(); ++i) {
      ImGui::SameLine();
      bool on = shown_[i];
      const uint32_t c = runs_[i].colour;  // the run browser's colour: its label in it
      if (c)
        ImGui::PushStyleColor(ImGuiCol_Text,
                              IM_COL32(c >> 16 & 0xff, c >> 8 & 0xff, c & 0xff, 255));
      if (ImGui::Checkbox(runs_[i].label.c_str(), &on)) shown_[i] = on;
      if (c) ImGui::PopStyleColor();
    }
  }

  std::vector<std::vector<double>> overlay_smooth;  // keeps the arrays alive while drawing
  std::vector<PlotSeries> loss_series;
  if (!step_x_.empty()) {
    loss_series.push_back(
        {"loss", step_x_.data(), loss_.data(), step_x_.size(), IM_COL32(90, 160, 240, 90)});
    loss_series.push_back({"smoothed", step_x_.data(), smooth_.data(), step_x_.size(), kForward});
  }
  std::vector<PlotSeries> epoch_series, acc_series;
  if (!epoch_x_.empty()) {
    epoch_series.push_back(
        {"train", epoch_x_.data(), epoch_loss_.data(), epoch_x_.size(), kForward});
    epoch_series.push_back(
        {"validation", epoch_x_.data(), val_loss_.data(), epoch_x_.size(), kBackward, true});
    acc_series.push_back(
        {"validation", epoch_x_.data(), val_acc_.data(), epoch_x_.size(), kBackward});
  }
  overlay_smooth.reserve(runs_.size());
  for (size_t i = 0, k = 0; i < runs_.size(); ++i) {
    if (!shown_[i]) continue;
    const RunCurves& r = runs_[i];
    const ImU32 c =
        r.colour ? IM_COL32((r.colour >> 16) & 0xff, (r.colour >> 8) & 0xff, r.colour & 0xff, 255)
                 : kOverlay[k % std::size(kOverlay)];
    ++k;
    overlay_smooth.emplace_back();
    smooth(r.loss, smoothing_, overlay_smooth.back(), 0);
    loss_series.push_back(
        {r.label, r.steps.data(), overlay_smooth.back().data(), r.steps.size(), c});
    epoch_series.push_back({r.label, r.epochs.data(), r.val_loss.data(), r.epochs.size(), c, true});
    acc_series.push_back({r.label, r.epochs.data(), r.val_accuracy.data(), r.epochs.size(), c});
  }
  const float h = std::max(
      140.0f, (ImGui::GetContentRegionAvail().y - 3 * ImGui::GetFrameHeightWithSpacing()) / 2);
  if (ImGui::BeginTable("dash", 2, ImGuiTableFlags_SizingStretchSame)) {
    auto chart = [&](const char* id, std::span<const PlotSeries> series, const char* title,
                     const char* x, bool log_y) {
      ImGui::TableNextColumn();
      PlotOptions o;
      o.title = title;
      o.x_label = x;
      o.log_y = log_y;
      o.size = ImVec2(0, h);
      const PlotHover hv = plot_lines(id, series, o);
      if (hv.active && hv.series < series.size())
        ImGui::SetTooltip("%s\n%s %g: %.5g", series[hv.series].label.c_str(), x, hv.x,
                          series[hv.series].ys[hv.index]);
    };
    chart("##loss", loss_series, "training loss per step", "step", log_y_);
    chart("##epoch", epoch_series, "loss per epoch", "epoch", log_y_);
    const PlotSeries lr[] = {
        {"learning rate", step_x_.data(), lr_.data(), step_x_.size(), kBackward}};
    const PlotSeries rate[] = {
        {"samples/s", step_x_.data(), rate_.data(), step_x_.size(), kForward},
        {"memory MiB", step_x_.data(), mem_.data(), step_x_.size(), IM_COL32(230, 90, 90, 255)}};
    chart("##acc", acc_series, "validation accuracy per epoch", "epoch", false);
    ImGui::TableNextColumn();
    {
      // Two small charts share the last cell.
      PlotOptions o;
      o.size = ImVec2(0, h / 2 - 4);
      o.title = "learning rate";
      o.x_label = "step";
      plot_lines("##lr", lr, o);
      o.title = "throughput (samples/s) and memory (MiB)";
      o.log_y = true;
      const PlotHover hv = plot_lines("##rate", rate, o);
      if (hv.active && hv.series < 2)
        ImGui::SetTooltip("step %g: %.4g %s", hv.x, rate[hv.series].ys[hv.index],
                          hv.series == 0 ? "samples/s" : "MiB");
    }
    ImGui::EndTable();
  }
}

// [SECTION] memory profiler

void InstrumentsPanel::drawMemoryTimeline(const MemoryTimeline& t, const char* id) {
  const size_t n = t.samples.size();
  if (n == 0) return;
  std::vector<double> xs(n);
  std::vector<std::vector<double>> ys(std::size(kStackOrder), std::vector<double>(n));
  for (size_t i = 0; i < n; ++i) {
    xs[i] = static_cast<double>(i);
    for (size_t c = 0; c < std::size(kStackOrder); ++c)
      ys[c][i] = static_cast<double>(t.samples[i].bytes[mem_cat_index(kStackOrder[c])]) / kMiB;
  }
  std::vector<PlotSeries> layers;
  for (size_t c = 0; c < std::size(kStackOrder); ++c)
    layers.push_back({std::string(mem_cat_name(kStackOrder[c])), xs.data(), ys[c].data(), n,
                      cat_color(kStackOrder[c])});
  PlotOptions o;
  o.title = "live bytes by category per wave of the step: forward, backward, optimizer (MiB)";
  o.x_label = "wave";
  o.mark_x = static_cast<double>(t.peak);
  o.size = ImVec2(0, std::max(180.0f, ImGui::GetContentRegionAvail().y * 0.55f));
  const PlotHover hv = plot_stacked(id, layers, o);
  size_t at = t.peak;
  if (hv.active && hv.index < n) {
    at = hv.index;
    const MemoryTimeline::Sample& s = t.samples[at];
    std::string tip = std::string(step_phase_name(s.phase)) + ", wave " + std::to_string(s.wave) +
                      (at == t.peak ? " (the peak)" : "") + ": " +
                      mib(static_cast<double>(s.live())) + " live\n";
    for (MemCat c : kStackOrder)
      if (s.bytes[mem_cat_index(c)] > 0)
        tip += "  " + std::string(mem_cat_name(c)) + "  " +
               mib(static_cast<double>(s.bytes[mem_cat_index(c)])) + "\n";
    const auto holders = t.live_at(at);
    if (!holders.empty()) tip += "held by:\n";
    for (size_t k = 0; k < std::min<size_t>(8, holders.size()); ++k) {
      const MemoryTimeline::Holder& hd = t.holders[holders[k]];
      tip += "  " + hd.node + " (" + hd.op + ", " + std::string(mem_cat_name(hd.cat)) + ")  " +
             mib(static_cast<double>(hd.bytes)) + "\n";
    }
    if (holders.size() > 8) tip += "  ... " + std::to_string(holders.size() - 8) + " more\n";
    tip += "click: select the largest holder's node";
    ImGui::SetTooltip("%s", tip.c_str());
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && !holders.empty()) {
      const QString node = QString::fromStdString(t.holders[holders.front()].node);
      later(this, [this, node] { Q_EMIT nodeClicked(node); });
    }
  }
  ImGui::Text("%s at wave %d (%s):", at == t.peak ? "The peak" : "Under the mouse",
              t.samples[at].wave, std::string(step_phase_name(t.samples[at].phase)).c_str());
  if (ImGui::BeginTable(
          "holders", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV,
          ImVec2(0, std::max(80.0f, ImGui::GetContentRegionAvail().y)))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* c : {"node", "op", "category", "bytes", "lives (waves)"})
      ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (size_t h : t.live_at(at)) {
      const MemoryTimeline::Holder& hd = t.holders[h];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(h));
      if (ImGui::Selectable(hd.node.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) {
        const QString node = QString::fromStdString(hd.node);
        later(this, [this, node] { Q_EMIT nodeClicked(node); });
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(hd.op.c_str());
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(cat_color(hd.cat)), "%s",
                         std::string(mem_cat_name(hd.cat)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(mib(static_cast<double>(hd.bytes)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%d - %d", hd.first, hd.last);
    }
    ImGui::EndTable();
  }
}

void InstrumentsPanel::drawMemory() {
  std::shared_ptr<const MemoryTimeline> t = live_ ? live_->memory() : nullptr;
  const MemoryTimeline* shown = t.get();
  if (!shown && preflight_) shown = &preflight_->timeline;
  if (!shown) {
    ImGui::TextDisabled(
        "Train in static mode, or ask for a pre-flight estimate, to see where memory goes.");
    return;
  }
  ImGui::Text(
      "Planned (the compiler's memory plan): %s during every step, arena %s, live at the peak %s",
      mib(static_cast<double>(shown->total_bytes)).c_str(),
      mib(static_cast<double>(shown->arena_bytes)).c_str(),
      mib(static_cast<double>(shown->samples[shown->peak].live())).c_str());
  if (t && live_) {
    int64_t measured = 0;
    for (int i = 0; i < kNumAllocTags; ++i)
      measured += live_->allocator_bytes(static_cast<AllocTag>(i));
    const int64_t other = measured - shown->total_bytes;
    ImGui::Text("Measured (the allocator): %s now, %s at its peak",
                mib(static_cast<double>(measured)).c_str(),
                mib(static_cast<double>(live_->allocator_peak())).c_str());
    ImGui::SameLine();
    if (other == 0)
      ImGui::TextColored(ImVec4(0.4f, 0.85f, 0.5f, 1), "= planned");
    else
      ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.3f, 1),
                         "(%s beyond this step: evaluation plans, the data)",
                         mib(static_cast<double>(other)).c_str());
  } else {
    ImGui::TextDisabled("From the pre-flight estimate: nothing has run yet.");
  }
  drawMemoryTimeline(*shown, "##memory");
}

// [SECTION] op profiler

void InstrumentsPanel::drawOps() {
  std::shared_ptr<const OpProfile> p = live_ ? live_->ops() : nullptr;
  if (!p || p->steps == 0) {
    ImGui::TextDisabled("Train in static mode to see the time of every op and node.");
    return;
  }
  struct Row {
    std::string name, op;
    double fwd = 0, bwd = 0, flops = 0;
    int kernels = 0;
  };
  std::map<std::string, Row> rows;
  double total = 0, flops = 0;
  for (const OpProfile::Kernel& k : p->kernels) {
    const std::string key = ops_by_op_ ? k.op : (k.label.empty() ? k.op : k.label);
    Row& r = rows[key];
    r.name = key;
    if (r.op.empty() || ops_by_op_)
      r.op = k.op;
    else if (r.op.find(k.op) == std::string::npos && r.op.size() < 60)
      r.op += ", " + k.op;
    (k.backward ? r.bwd : r.fwd) += k.seconds;
    r.flops += k.flops;
    ++r.kernels;
    total += k.seconds;
    flops += k.flops;
  }
  std::vector<Row> sorted;
  for (auto& [k, r] : rows) sorted.push_back(r);
  std::sort(sorted.begin(), sorted.end(),
            [](const Row& a, const Row& b) { return a.fwd + a.bwd > b.fwd + b.bwd; });
  ImGui::Text(
      "%lld steps profiled: kernels %.3f ms per step (%.2f GFLOP/s), plan wall time %.3f ms",
      static_cast<long long>(p->steps), 1e3 * total, total > 0 ? flops / total / 1e9 : 0.0,
      1e3 * p->step_seconds);
  ImGui::SameLine();
  ImGui::RadioButton("per node", &ops_by_op_, 0);
  ImGui::SameLine();
  ImGui::RadioButton("per op", &ops_by_op_, 1);
  const float table_h = std::max(120.0f, ImGui::GetContentRegionAvail().y * 0.55f);
  if (ImGui::BeginTable(
          "ops", 8, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV,
          ImVec2(0, table_h))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* c : {ops_by_op_ ? "op" : "node", "ops", "kernels", "forward ms", "backward ms",
                          "share", "MFLOP", "GFLOP/s"})
      ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < sorted.size(); ++i) {
      const Row& r = sorted[i];
      const double t = r.fwd + r.bwd;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(i));
      if (ImGui::Selectable(r.name.c_str(), false, ImGuiSelectableFlags_SpanAllColumns) &&
          !ops_by_op_) {
        const QString node = QString::fromStdString(r.name);
        later(this, [this, node] { Q_EMIT nodeClicked(node); });
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.op.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.kernels);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", 1e3 * r.fwd);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", 1e3 * r.bwd);
      ImGui::TableNextColumn();
      ImGui::ProgressBar(total > 0 ? static_cast<float>(t / total) : 0.0f, ImVec2(-1, 0));
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", r.flops / 1e6);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", t > 0 ? r.flops / t / 1e9 : 0.0);
    }
    ImGui::EndTable();
  }
  // The last step's kernels on their threads (a concurrent wave spreads over several).
  std::vector<Span> spans;
  std::map<int32_t, int> row_of;
  for (const OpProfile::Kernel& k : p->kernels)
    if (!row_of.count(k.thread)) row_of.emplace(k.thread, static_cast<int>(row_of.size()));
  for (const OpProfile::Kernel& k : p->kernels)
    spans.push_back({1e3 * k.last_start_s, 1e3 * k.last_end_s, row_of[k.thread],
                     k.backward ? kBackward : kForward,
                     k.label.empty() ? k.op : k.op + " [" + k.label + "]"});
  PlotOptions o;
  o.title = "the last step's kernels by thread (ms): forward blue, backward orange";
  o.x_label = "ms";
  o.size = ImVec2(0, std::max(90.0f, ImGui::GetContentRegionAvail().y));
  if (auto hovered = plot_spans("##timeline", spans, o);
      hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    const QString node = QString::fromStdString(p->kernels[*hovered].label);
    if (!node.isEmpty()) later(this, [this, node] { Q_EMIT nodeClicked(node); });
  }
}

// [SECTION] pre-flight

void InstrumentsPanel::drawPreflight() {
  ImGui::SetNextItemWidth(120);
  ImGui::InputInt("batch size", &estimate_batch_, 16, 128);
  estimate_batch_ = std::max(1, estimate_batch_);
  ImGui::SameLine();
  if (ImGui::Button("Estimate")) {
    const int64_t b = estimate_batch_;
    later(this, [this, b] { Q_EMIT estimateRequested(b); });
  }
  ImGui::SameLine();
  ImGui::TextDisabled("before Train: memory and time of this project's run on the CPU");
  if (!preflight_) {
    ImGui::TextDisabled("No estimate yet: press Estimate (Train makes one too).");
    return;
  }
  const PreflightEstimate& e = *preflight_;
  ImGui::Text("Batch %lld: the run will hold %s", static_cast<long long>(e.batch),
              mib(static_cast<double>(e.total_bytes)).c_str());
  if (e.free_bytes) {
    ImGui::SameLine();
    if (e.fits)
      ImGui::TextColored(ImVec4(0.4f, 0.85f, 0.5f, 1), "fits in %s free",
                         mib(static_cast<double>(*e.free_bytes)).c_str());
    else
      ImGui::TextColored(ImVec4(1, 0.4f, 0.35f, 1), "will NOT fit: %s free",
                         mib(static_cast<double>(*e.free_bytes)).c_str());
    if (e.max_batch > 0)
      ImGui::Text("The largest batch that fits: %lld", static_cast<long long>(e.max_batch));
  }
  ImGui::Text(
      "parameters %s, optimizer state %s, training step %s (arena %s)",
      mib(static_cast<double>(e.held.parameter)).c_str(),
      mib(static_cast<double>(e.held.optimizer_state)).c_str(),
      mib(static_cast<double>(e.step_bytes - e.held.parameter - e.held.optimizer_state)).c_str(),
      mib(static_cast<double>(e.arena_bytes)).c_str());
  for (const PreflightPlan& p : e.plans)
    ImGui::BulletText("%s, batch %lld: %s", p.what.c_str(), static_cast<long long>(p.batch),
                      mib(static_cast<double>(p.bytes)).c_str());
  ImGui::Text("Estimated step %.3f ms (%.1f MFLOP)%s", 1e3 * e.step_seconds, e.flops / 1e6,
              e.epoch_seconds > 0 ? (", epoch " + duration(e.epoch_seconds)).c_str() : "");
  // After a run of the same batch: the estimate beside the measurement.
  if (live_ && live_->steps.size() > 0) {
    std::shared_ptr<const OpProfile> ops = live_->ops();
    ImGui::Separator();
    const double peak = static_cast<double>(live_->allocator_peak());
    ImGui::Text("Measured: peak %s (estimate %+.1f%%)", mib(peak).c_str(),
                peak > 0 ? 100.0 * (static_cast<double>(e.total_bytes) - peak) / peak : 0.0);
    if (ops && ops->steps > 0)
      ImGui::Text("Measured: step %.3f ms (estimate %.3f ms, %.2fx)", 1e3 * ops->step_seconds,
                  1e3 * e.step_seconds,
                  ops->step_seconds > 0 ? e.step_seconds / ops->step_seconds : 0.0);
  }
  if (ImGui::BeginTable(
          "nodes", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV,
          ImVec2(0, std::max(100.0f, ImGui::GetContentRegionAvail().y)))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* c : {"node", "kernels", "activation bytes", "MFLOP", "estimated ms"})
      ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      const PreflightNode& n = e.nodes[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(i));
      if (ImGui::Selectable(n.label.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) {
        const QString node = QString::fromStdString(n.label);
        later(this, [this, node] { Q_EMIT nodeClicked(node); });
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%d", n.kernels);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(mib(static_cast<double>(n.bytes)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", n.flops / 1e6);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", 1e3 * n.seconds);
    }
    ImGui::EndTable();
  }
}

// [SECTION] CSV export

std::string InstrumentsPanel::dashboardCsv() const {
  std::ostringstream os;
  os.precision(9);
  os << "run,series,x,value\n";
  auto put = [&](const std::string& run, const char* series, const std::vector<double>& xs,
                 const std::vector<double>& ys) {
    for (size_t i = 0; i < std::min(xs.size(), ys.size()); ++i)
      if (std::isfinite(ys[i])) os << run << ',' << series << ',' << xs[i] << ',' << ys[i] << '\n';
  };
  put("live", "train/loss", step_x_, loss_);
  put("live", "train/loss_smoothed", step_x_, smooth_);
  put("live", "lr", step_x_, lr_);
  put("live", "samples_per_s", step_x_, rate_);
  put("live", "memory_mib", step_x_, mem_);
  put("live", "epoch/train_loss", epoch_x_, epoch_loss_);
  put("live", "epoch/val_loss", epoch_x_, val_loss_);
  put("live", "epoch/val_accuracy", epoch_x_, val_acc_);
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (i >= shown_.size() || !shown_[i]) continue;
    const std::string id = "run " + std::to_string(runs_[i].run_id);
    put(id, "train/loss", runs_[i].steps, runs_[i].loss);
    put(id, "epoch/val_loss", runs_[i].epochs, runs_[i].val_loss);
    put(id, "epoch/val_accuracy", runs_[i].epochs, runs_[i].val_accuracy);
  }
  return os.str();
}

bool InstrumentsPanel::exportCsv(const QString& path, QString* error) const {
  if (auto r = write_text_atomically(path.toStdString(), dashboardCsv()); !r) {
    if (error) *error = "cannot export to " + path + ": " + QString::fromStdString(r.error().message);
    return false;
  }
  return true;
}

}  // namespace mls::editor
