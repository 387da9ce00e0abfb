#include "editor/memory_view.h"

#include <QPainter>
#include <algorithm>
#include <cstdio>

#include "scripting/notebook/plot.h"

namespace mls::editor {

namespace {

constexpr int kRowHeight = 20;

QString size_text(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024.0));
  else if (b >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return QString::fromLatin1(buf);
}

MemoryBars from_timeline(const MemoryTimeline& t, std::string source) {
  MemoryBars m;
  m.source = std::move(source);
  if (t.samples.empty()) return m;
  const MemoryTimeline::Sample& peak = t.samples[std::min(t.peak, t.samples.size() - 1)];
  for (int i = 0; i < kNumMemCats; ++i) {
    const auto c = static_cast<MemCat>(i);
    const int64_t b = peak.bytes[static_cast<size_t>(i)];
    if (b <= 0) continue;
    m.bars.push_back({std::string(mem_cat_name(c)), b});
    m.total += b;
  }
  return m;
}

}  // namespace

MemoryBars memory_bars(const Telemetry* run, const PreflightEstimate* estimate) {
  if (run) {
    if (auto t = run->memory())
      return from_timeline(*t, "latest run: its training step, planned, at the peak");
    MemoryBars m;
    for (int i = 0; i < kNumAllocTags; ++i) {
      const auto tag = static_cast<AllocTag>(i);
      const int64_t b = run->allocator_bytes(tag);
      if (b <= 0) continue;
      m.bars.push_back({std::string(alloc_tag_name(tag)), b});
      m.total += b;
    }
    if (!m.bars.empty()) {
      m.source = "latest run: held by the allocator after its last step";
      return m;
    }
  }
  if (estimate)
    return from_timeline(estimate->timeline, "pre-flight estimate: the step at its peak");
  return {};
}

MemoryView::MemoryView(QWidget* parent) : QWidget(parent) {
  setObjectName("memory.view");
  setMinimumHeight(80);
  timer_.setInterval(250);
  connect(&timer_, &QTimer::timeout, this, &MemoryView::refresh);
}

void MemoryView::follow(RunSource run, EstimateSource estimate) {
  run_ = std::move(run);
  estimate_ = std::move(estimate);
  timer_.start();
  refresh();
}

void MemoryView::refresh() {
  std::shared_ptr<const Telemetry> run = run_ ? run_() : nullptr;
  std::shared_ptr<const PreflightEstimate> est = estimate_ ? estimate_() : nullptr;
  MemoryBars now = memory_bars(run.get(), est.get());
  const bool same = now.source == bars_.source && now.total == bars_.total &&
                    now.bars.size() == bars_.bars.size();
  bars_ = std::move(now);
  const int h = 28 + std::max<int>(1, static_cast<int>(bars_.bars.size())) * kRowHeight;
  if (minimumHeight() != h) setMinimumHeight(h);
  if (!same) update();
}

void MemoryView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(250, 250, 250));
  p.setPen(QColor(60, 60, 60));
  if (bars_.bars.empty()) {
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               "Memory by category: train (the toolbar, the console or a cell), or ask the "
               "Instruments' Pre-flight tab for an estimate.");
    return;
  }
  p.drawText(QRect(6, 2, width() - 12, 20), Qt::AlignLeft | Qt::AlignVCenter,
             QString::fromStdString(bars_.source) + "  ·  " + size_text(bars_.total));
  int64_t most = 1;
  for (const auto& b : bars_.bars) most = std::max(most, b.bytes);
  const int label_w = 150, value_w = 80;
  const int bar_w = std::max(20, width() - label_w - value_w - 18);
  int y = 26;
  for (size_t i = 0; i < bars_.bars.size(); ++i, y += kRowHeight) {
    const auto& b = bars_.bars[i];
    p.setPen(QColor(60, 60, 60));
    p.drawText(QRect(6, y, label_w - 6, kRowHeight), Qt::AlignRight | Qt::AlignVCenter,
               QString::fromStdString(b.name));
    const int w = static_cast<int>(static_cast<double>(bar_w) * static_cast<double>(b.bytes) /
                                   static_cast<double>(most));
    p.fillRect(QRect(label_w + 6, y + 3, std::max(w, 1), kRowHeight - 6),
               QColor(QString::fromStdString(plot::series_colour(i))));
    p.drawText(QRect(label_w + 12 + w, y, value_w, kRowHeight), Qt::AlignLeft | Qt::AlignVCenter,
               size_text(b.bytes));
  }
}

}  // namespace mls::editor
