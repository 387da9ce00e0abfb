// A view cell's memory picture: bytes by category of the latest run (the compiler's plan of
// its training step at the step's peak, else what the allocator holds per tag) or, before any
// run, of the pre-flight estimate. Plain Qt bars; the Instruments tab has the full timeline.
//
//   auto* v = new MemoryView;
//   v->follow([this] { return telemetry_; }, [this] { return instruments_->preflight(); });
//   v->bars();   // what is drawn: {"activations", 1.2 MB}, ...
#pragma once

#include <QTimer>
#include <QWidget>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/preflight.h"
#include "engine/train/telemetry.h"

namespace mls::editor {

struct MemoryBars {
  std::string source;  // "run: planned step at its peak", "pre-flight estimate", ""
  struct Bar {
    std::string name;
    int64_t bytes = 0;
  };
  std::vector<Bar> bars;  // categories holding bytes, in the engine's order
  int64_t total = 0;
};

// From the run's telemetry (its step's memory timeline, else the allocator's tags), else the
// estimate; empty when neither has figures.
MemoryBars memory_bars(const Telemetry* run, const PreflightEstimate* estimate);

class MemoryView : public QWidget {
  Q_OBJECT
 public:
  using RunSource = std::function<std::shared_ptr<const Telemetry>()>;
  using EstimateSource = std::function<std::shared_ptr<const PreflightEstimate>()>;
  explicit MemoryView(QWidget* parent = nullptr);
  // Polled four times a second.
  void follow(RunSource run, EstimateSource estimate);
  void refresh();
  const MemoryBars& bars() const { return bars_; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  RunSource run_;
  EstimateSource estimate_;
  QTimer timer_;
  MemoryBars bars_;
};

}  // namespace mls::editor
