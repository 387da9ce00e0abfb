// The Health panel: the training debugger's instruments (engine/train/health.h, Cockpit's),
// a Dear ImGui panel beside the Instruments tab, reading Telemetry::health while the run goes.
//
//   auto* h = new HealthPanel;
//   h->setLive(telemetry);   // the run the editor follows (Train, the console, a cell)
//
//  - per parameter: gradient norm and update-to-weight ratio over steps (log scale), and the
//    distance from the initialisation;
//  - per ReLU layer: the share of dead units;
//  - the gradient's signal-to-noise ratio (or why it was not measured);
//  - a chosen parameter's weight and gradient histograms: the latest, and over time (each
//    sample a column, its bins shaded by count).
// Samples arrive every TrainConfig::health.every steps (Debug > Health instruments).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <imgui.h>

#include "editor/imgui_host.h"
#include "engine/train/health.h"
#include "engine/train/telemetry.h"

namespace mls::editor {

class HealthPanel : public ImGuiHost {
  Q_OBJECT
 public:
  explicit HealthPanel(QWidget* parent = nullptr);

  void setLive(std::shared_ptr<const Telemetry> telemetry);
  // Copies the samples published since the last call (each frame does it too).
  void pull();
  // For tests: the samples copied so far, and the parameter whose histograms are drawn.
  const std::vector<HealthSample>& samples() const { return samples_; }
  int chosenParam() const { return chosen_; }
  // The panel's first line, as drawn ("12 samples, the last at step 240 · gradient SNR ...").
  std::string statusLine() const;

 protected:
  void draw() override;

 private:
  void drawHistogramOverTime(const char* id, bool grads, ImVec2 size);

  std::shared_ptr<const Telemetry> live_;
  std::vector<HealthSample> samples_;
  int chosen_ = 0;
};

}  // namespace mls::editor
