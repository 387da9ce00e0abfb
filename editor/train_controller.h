// Training from the editor: runs runner::run_training (the very path of `mlstudio --run`)
// on a worker thread, so the canvas keeps serving events; Pause holds the worker between
// steps, Stop ends the run after the current step (recorded as interrupted, resumable with
// `mlstudio --run P.mls --resume ID`). Progress reaches the GUI thread at most ~20 times a
// second through queued signals.
#pragma once

#include <QKeySequence>
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <thread>

#include "runner/training_run.h"

namespace mls::editor {

// The Run menu's keys, defined once for the menu, the tooltips and every hint that names them.
inline QKeySequence train_key() {
  return QKeySequence(Qt::Key_F5);
}
inline QKeySequence pause_key() {
  return QKeySequence(Qt::Key_F6);
}
inline QKeySequence stop_key() {
  return QKeySequence(Qt::SHIFT | Qt::Key_F5);
}

// A failure of the training loop because the loss stopped being finite (the trainer's
// "the loss became nan at step N ..."): the run diverged, it did not just fail.
bool is_divergence(const QString& failure);

class TrainController : public QObject {
  Q_OBJECT
 public:
  explicit TrainController(QObject* parent = nullptr);
  ~TrainController() override;  // stops and joins a running worker

  // Starts training; false (with failed()) when a run is already going.
  bool start(const runner::RunRequest& request);
  void setPaused(bool paused);
  void stop();
  bool running() const { return running_; }
  bool paused() const { return paused_; }

 Q_SIGNALS:
  void started();
  void progress(const mls::ProgressInfo& info);
  void message(const QString& text);
  void epochEnded(const mls::EpochReport& report);
  // The run ended: recorded as finished or interrupted.
  void finished(const mls::runner::RunOutcome& outcome);
  // The run could not start or failed (the message names the file or node).
  void failed(const QString& message);
  // RunRequest::preflight: the estimate, before the first step.
  void preflightReady(std::shared_ptr<const mls::PreflightEstimate> estimate);

 private:
  std::thread worker_;
  std::atomic<bool> cancel_{false}, paused_{false};
  bool running_ = false;
};

}  // namespace mls::editor

Q_DECLARE_METATYPE(mls::ProgressInfo)
Q_DECLARE_METATYPE(mls::EpochReport)
Q_DECLARE_METATYPE(mls::runner::RunOutcome)
