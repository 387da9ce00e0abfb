// The live instruments: a Dear ImGui panel (editor/imgui_host.h) with four views of a run.
//
//   auto* panel = new InstrumentsPanel;
//   auto tm = std::make_shared<Telemetry>();
//   request.telemetry = tm.get();  panel->setLive(tm);      // before the run starts
//   panel->setPreflight(estimate);                          // PreflightEstimate, any time
//   connect(panel, &InstrumentsPanel::nodeClicked, ...);    // select it on the canvas
//
//  - Dashboard: loss per step (raw and smoothed, log scale), loss and accuracy per epoch,
//    learning rate and samples/s, ETA; other runs from the experiment store overlaid.
//  - Memory: the training step's bytes by category wave by wave (forward, backward,
//    optimizer), the peak marked, who holds memory under the mouse; planned beside measured.
//  - Ops: time, FLOPs and GFLOP/s per node and per op, forward and backward, as a table and
//    as a timeline of the last step's kernels.
//  - Pre-flight: the estimate before Train, and after a run the estimate beside the
//    measurement.
// Everything is read from the Telemetry the training thread fills, without a lock: each
// frame copies the points added since the last one.
#pragma once

#include <QString>
#include <memory>
#include <string>
#include <vector>

#include "editor/imgui_host.h"
#include "engine/train/preflight.h"
#include "engine/train/telemetry.h"

namespace mls::editor {

// A finished run's curves, read from the experiment store for the dashboard's overlay.
struct RunCurves {
  int64_t run_id = 0;
  std::string label;                // "run 3 (sgd lr 0.05)"
  std::vector<double> steps, loss;  // train/loss
  std::vector<double> epochs, val_loss, val_accuracy;
  // The run browser's overlay: a colour by a chosen param (0xRRGGBB; 0: the overlay's own
  // palette) and shown from the start.
  uint32_t colour = 0;
  bool shown = false;
};

// Where the run the dashboard follows stands (the main window tells it).
enum class RunPhase { Training, Paused, Done, Stopped, Failed, Diverged };
const char* to_string(RunPhase phase);

// The dashboard's status line for the last step of a run: its phase ("diverged" for a loss
// that became NaN or infinite, not "done"), epoch, step and numbers to four significant
// digits (a loss of 1e30 is "1e+30", not 31 digits). `train_key`: the shortcut that trains.
std::string dashboard_status(RunPhase phase, const StepPoint* last, int64_t planned_epochs,
                             int64_t peak_bytes, const std::string& train_key);

class InstrumentsPanel : public ImGuiHost {
  Q_OBJECT
 public:
  explicit InstrumentsPanel(QWidget* parent = nullptr);

  // The run to follow (null: keep showing the last one).
  void setLive(std::shared_ptr<const Telemetry> telemetry);
  void setPreflight(std::shared_ptr<const PreflightEstimate> estimate);
  // Runs that can be overlaid (the store's, newest last) and those shown.
  void setRuns(std::vector<RunCurves> runs);
  const std::vector<RunCurves>& runs() const { return runs_; }
  // What the overlay's colours mean (the run browser's "colour by"), drawn after "overlay:".
  void setOverlayLegend(std::string legend);
  const std::string& overlayLegend() const { return overlay_legend_; }
  std::shared_ptr<const PreflightEstimate> preflight() const { return preflight_; }
  // The followed run's phase (setLive() starts one as Training) and the key that trains,
  // named in the hint before the first run.
  void setPhase(RunPhase phase);
  RunPhase phase() const { return phase_; }
  void setTrainKey(const QString& key) { train_key_ = key.toStdString(); }
  // The dashboard's first line, as drawn: the hint before a run, then dashboard_status().
  std::string statusLine() const;
  // Shows the tab by name: "Dashboard", "Memory", "Ops" or "Pre-flight".
  void showTab(const QString& name);

  // The dashboard's series as CSV (series,x,value rows): per step loss, smoothed loss, lr,
  // samples/s, memory; per epoch train and validation loss and accuracy; overlaid runs.
  std::string dashboardCsv() const;
  // Written to `path`; false with a message naming the file.
  bool exportCsv(const QString& path, QString* error) const;

  // For tests: the points copied from the live telemetry so far.
  size_t stepPoints() const { return step_x_.size(); }

 Q_SIGNALS:
  // A node was clicked in the memory or op profiler: its label, as on the canvas.
  void nodeClicked(const QString& label);
  void exportRequested();
  void estimateRequested(int64_t batch);
  void refreshRunsRequested();

 protected:
  void draw() override;

 private:
  void pull();  // copies the new telemetry points
  void drawDashboard();
  void drawMemory();
  void drawOps();
  void drawPreflight();
  void drawMemoryTimeline(const MemoryTimeline& t, const char* id);

  std::shared_ptr<const Telemetry> live_;
  std::shared_ptr<const PreflightEstimate> preflight_;
  std::vector<RunCurves> runs_;
  std::vector<bool> shown_;
  std::string overlay_legend_;
  // Copies of the live series (x and y arrays as the charts take them).
  std::vector<double> step_x_, loss_, smooth_, lr_, rate_, mem_, time_x_;
  std::vector<double> epoch_x_, epoch_loss_, val_loss_, val_acc_;
  double smoothing_ = 0.9;
  double smoothed_at_ = -1;  // the smoothing the smooth_ series was computed with
  bool log_y_ = false;
  int estimate_batch_ = 0;
  int tab_request_ = -1;
  int ops_by_op_ = 0;  // 0: per node, 1: per op
  RunPhase phase_ = RunPhase::Done;
  std::string train_key_ = "F5";
};

}  // namespace mls::editor
