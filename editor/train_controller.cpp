#include "editor/train_controller.h"

#include <QRegularExpression>
#include <chrono>
#include <memory>

namespace mls::editor {

TrainController::TrainController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<mls::ProgressInfo>();
  qRegisterMetaType<mls::EpochReport>();
  qRegisterMetaType<mls::runner::RunOutcome>();
}

TrainController::~TrainController() {
  cancel_ = true;
  paused_ = false;
  if (worker_.joinable()) worker_.join();
}

bool TrainController::start(const runner::RunRequest& request) {
  if (running_) {
    Q_EMIT failed("a run is already going; stop it first");
    return false;
  }
  if (worker_.joinable()) worker_.join();
  cancel_ = false;
  paused_ = false;
  running_ = true;
  Q_EMIT started();
  worker_ = std::thread([this, request] {
    using clock = std::chrono::steady_clock;
    auto last = clock::now() - std::chrono::seconds(1);
    runner::RunEvents ev;
    ev.cancel = &cancel_;
    ev.message = [this](const std::string& line) {
      QMetaObject::invokeMethod(this, [this, l = QString::fromStdString(line)] { Q_EMIT message(l); }, Qt::QueuedConnection);
    };
    ev.warning = [this](const std::string& line) {
      QMetaObject::invokeMethod(this, [this, l = QString::fromStdString(line)] { Q_EMIT message("warning: " + l); },
                                Qt::QueuedConnection);
    };
    ev.progress = [this, &last](const ProgressInfo& info) {
      const auto now = clock::now();
      if (now - last >= std::chrono::milliseconds(50) || info.batch == info.batches) {
        last = now;
        QMetaObject::invokeMethod(this, [this, info] { Q_EMIT progress(info); }, Qt::QueuedConnection);
      }
      // Pause: hold the worker between steps until resumed or stopped.
      while (paused_ && !cancel_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    ev.preflight = [this](const PreflightEstimate& e) {
      auto p = std::make_shared<const PreflightEstimate>(e);
      QMetaObject::invokeMethod(this, [this, p] { Q_EMIT preflightReady(p); }, Qt::QueuedConnection);
    };
    ev.epoch_end = [this](const EpochReport& rep) {
      QMetaObject::invokeMethod(this, [this, rep] { Q_EMIT epochEnded(rep); }, Qt::QueuedConnection);
    };
    Result<runner::RunOutcome> r = runner::run_training(request, ev);
    // The outcome travels to the GUI thread behind a shared pointer (one copy, no variant move).
    auto outcome = r ? std::make_shared<runner::RunOutcome>(std::move(*r)) : nullptr;
    const QString error = r ? QString() : QString::fromStdString(r.error().message);
    QMetaObject::invokeMethod(
        this,
        [this, outcome, error] {
          running_ = false;
          paused_ = false;
          if (outcome) Q_EMIT finished(*outcome);
          else Q_EMIT failed(error);
        },
        Qt::QueuedConnection);
  });
  return true;
}

bool is_divergence(const QString& failure) {
  static const QRegularExpression re("the loss became -?(nan|inf)",
                                     QRegularExpression::CaseInsensitiveOption);
  return re.match(failure).hasMatch();
}

void TrainController::setPaused(bool paused) { paused_ = paused && running_; }

void TrainController::stop() {
  cancel_ = true;
  paused_ = false;
}

}  // namespace mls::editor
