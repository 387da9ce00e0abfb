// A small live dashboard of one training run, drawn with the notebook's own plot code
// (scripting/notebook/plot.h: SVG through QSvgRenderer), so it looks like the figures a cell
// makes and like a headless run's: loss per step with each epoch's train and validation
// loss, validation accuracy per epoch (train loss per epoch when there is no validation),
// and a status line (epoch k of N, step, loss, samples/s, the run's id). A QTimer on the GUI
// thread copies the points the training thread added to the Telemetry, four times a second;
// nothing waits for the other side.
//
//   auto* d = new RunDashboard;
//   d->setTelemetry(tm);                 // under a cell whose mls.train started
//   d->setEnded(RunDashboard::End::Done, run_id);  // its cell finished: last points, timer off
//   // or, as a view cell, following whatever run the editor started last:
//   d->follow([this] { return telemetry_; });
#pragma once

#include <QSvgRenderer>
#include <QTimer>
#include <QWidget>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/telemetry.h"

class QLabel;
class QPushButton;

namespace mls::editor {

class RunDashboard : public QWidget {
  Q_OBJECT
 public:
  enum class End { Done, Stopped, Failed };
  using Source = std::function<std::shared_ptr<const Telemetry>()>;

  explicit RunDashboard(QWidget* parent = nullptr);

  // The run to show (its series start empty); the timer runs until setEnded().
  void setTelemetry(std::shared_ptr<const Telemetry> telemetry);
  // Shows whatever `source` returns, checked at each refresh (a new run replaces the old).
  void follow(Source source);
  // The run's cell finished: the last points are copied, the timer stops, the curves stay.
  // run_id 0: not known (the run never reached the store).
  void setEnded(End how, int64_t run_id);
  // Copies the points added since the last refresh and redraws when any came.
  void refresh();
  // A Stop button beside the status line while the run goes on (stopRequested on a click).
  void setStoppable(bool stoppable);
  QPushButton* stopButton() const { return stop_; }

  // What is drawn (for tests and the status line).
  size_t stepCount() const { return step_x_.size(); }
  size_t epochCount() const { return epoch_x_.size(); }
  const std::vector<double>& stepLoss() const { return step_loss_; }
  const std::vector<double>& epochTrainLoss() const { return train_loss_; }
  const std::vector<double>& epochValAccuracy() const { return val_acc_; }
  int64_t runId() const { return run_id_; }
  QString status() const;
  bool live() const { return timer_.isActive(); }

 Q_SIGNALS:
  void stopRequested();

 public:
  const std::shared_ptr<const Telemetry>& telemetry() const { return live_; }
  // The two charts' SVG as last rendered ("" before any point).
  const std::string& lossSvg() const { return loss_svg_; }
  const std::string& epochSvg() const { return epoch_svg_; }

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  void reset();
  bool pull();  // true when points came
  void render();
  QRect chartRect(int which) const;
  void fitHeight();

  std::shared_ptr<const Telemetry> live_;
  Source source_;
  QTimer timer_;
  QLabel* status_;
  QPushButton* stop_;
  bool stoppable_ = false;
  bool ended_ = false;
  End end_ = End::Done;
  int64_t run_id_ = 0;
  // Copies of the series; the step series keeps every `stride_`-th point once it is long.
  size_t steps_seen_ = 0, epochs_seen_ = 0, stride_ = 1;
  std::vector<double> step_x_, step_loss_;
  std::vector<double> epoch_x_, train_loss_, val_loss_, val_acc_;
  bool has_validation_ = false;
  StepPoint last_{};
  bool has_last_ = false;
  int64_t planned_epochs_ = 0, batches_per_epoch_ = 0;
  std::string loss_svg_, epoch_svg_;
  QSvgRenderer loss_chart_, epoch_chart_;
  QSize rendered_size_;
};

}  // namespace mls::editor
