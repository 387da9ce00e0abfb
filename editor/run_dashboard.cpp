#include "editor/run_dashboard.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QVBoxLayout>
#include <cmath>
#include <cstdio>

#include "scripting/notebook/plot.h"

namespace mls::editor {

namespace {

constexpr int kRefreshMs = 250;
constexpr int kChartHeight = 190;
constexpr int kSideBySide = 560;         // narrower: the charts one above the other
constexpr size_t kMaxStepPoints = 4096;  // more: every other point is dropped, twice the stride

QString number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return QString::fromLatin1(buf);
}

}  // namespace

RunDashboard::RunDashboard(QWidget* parent)
    : QWidget(parent), status_(new QLabel), stop_(new QPushButton("Stop")) {
  setObjectName("run.dashboard");
  status_->setObjectName("run.dashboard.status");
  status_->setStyleSheet("color: #444; font-size: 9pt;");
  status_->setWordWrap(true);
  stop_->setObjectName("run.dashboard.stop");
  stop_->setToolTip("Stop the run (as the notebook's Stop): it is recorded as interrupted");
  stop_->hide();
  connect(stop_, &QPushButton::clicked, this, &RunDashboard::stopRequested);
  auto* top = new QHBoxLayout;
  top->setContentsMargins(0, 0, 0, 0);
  top->addWidget(status_, 1);
  top->addWidget(stop_, 0, Qt::AlignTop);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 2, 0, 0);
  lay->addLayout(top);
  lay->addStretch(1);
  setMinimumWidth(240);
  setFixedHeight(24 + kChartHeight);
  timer_.setInterval(kRefreshMs);
  connect(&timer_, &QTimer::timeout, this, &RunDashboard::refresh);
  status_->setText(status());
}

void RunDashboard::reset() {
  steps_seen_ = epochs_seen_ = 0;
  stride_ = 1;
  step_x_.clear();
  step_loss_.clear();
  epoch_x_.clear();
  train_loss_.clear();
  val_loss_.clear();
  val_acc_.clear();
  has_validation_ = has_last_ = false;
  planned_epochs_ = batches_per_epoch_ = 0;
  loss_svg_.clear();
  epoch_svg_.clear();
  loss_chart_.load(QByteArray());
  epoch_chart_.load(QByteArray());
  rendered_size_ = {};
}

void RunDashboard::setStoppable(bool stoppable) {
  stoppable_ = stoppable;
  stop_->setVisible(stoppable_ && live_ && !ended_);
}

void RunDashboard::setTelemetry(std::shared_ptr<const Telemetry> telemetry) {
  live_ = std::move(telemetry);
  ended_ = false;
  run_id_ = 0;
  stop_->setVisible(stoppable_);
  reset();
  timer_.start();
  refresh();
}

void RunDashboard::follow(Source source) {
  source_ = std::move(source);
  timer_.start();
  refresh();
}

void RunDashboard::setEnded(End how, int64_t run_id) {
  refresh();  // the points the run added after the last tick
  ended_ = true;
  end_ = how;
  run_id_ = run_id;
  if (!source_) timer_.stop();
  stop_->hide();
  status_->setText(status());
  fitHeight();
  update();
}

void RunDashboard::refresh() {
  if (source_) {
    std::shared_ptr<const Telemetry> now = source_();
    if (now != live_) {
      live_ = std::move(now);
      ended_ = false;
      run_id_ = 0;
      reset();
    }
  }
  const bool came = pull();
  if (came || rendered_size_ != size()) render();
  status_->setText(status());
  fitHeight();
  if (came) update();
}

bool RunDashboard::pull() {
  if (!live_) return false;
  bool came = false;
  planned_epochs_ = live_->planned_epochs.load();
  batches_per_epoch_ = live_->batches_per_epoch.load();
  const size_t n = live_->steps.size();
  for (size_t i = steps_seen_; i < n; ++i) {
    const StepPoint& p = live_->steps[i];
    last_ = p;
    has_last_ = true;
    if (i % stride_ != 0) continue;
    step_x_.push_back(static_cast<double>(p.step));
    step_loss_.push_back(p.loss);
    if (step_x_.size() >= kMaxStepPoints) {
      // Halved: every other point kept, and from now on every 2 * stride-th step.
      size_t k = 0;
      for (size_t j = 0; j < step_x_.size(); j += 2, ++k) {
        step_x_[k] = step_x_[j];
        step_loss_[k] = step_loss_[j];
      }
      step_x_.resize(k);
      step_loss_.resize(k);
      stride_ *= 2;
    }
  }
  came = came || n > steps_seen_;
  steps_seen_ = n;
  const size_t m = live_->epochs.size();
  for (size_t i = epochs_seen_; i < m; ++i) {
    const EpochPoint& e = live_->epochs[i];
    epoch_x_.push_back(static_cast<double>(e.epoch));
    train_loss_.push_back(e.train_loss);
    has_validation_ = has_validation_ || e.has_validation;
    val_loss_.push_back(e.has_validation ? e.val_loss : NAN);
    val_acc_.push_back(e.has_validation ? e.val_accuracy : NAN);
  }
  came = came || m > epochs_seen_;
  epochs_seen_ = m;
  return came;
}

QRect RunDashboard::chartRect(int which) const {
  const int top =
      std::max(status_->geometry().bottom(), stop_->isVisible() ? stop_->geometry().bottom() : 0) +
      2;
  if (width() >= kSideBySide) {
    const int w = width() / 2;
    return {which * w, top, w, kChartHeight};
  }
  return {0, top + which * kChartHeight, width(), kChartHeight};
}

void RunDashboard::render() {
  rendered_size_ = size();
  const int w = std::max(chartRect(0).width(), 200);
  if (!step_x_.empty()) {
    plot::Chart c;
    c.title = "loss";
    c.xlabel = "step";
    c.width = w;
    c.height = kChartHeight;
    c.series.push_back({.name = "step", .x = step_x_, .y = step_loss_});
    // Each epoch's mean at the step where it ended (a line: from the second epoch on).
    if (epoch_x_.size() > 1 && batches_per_epoch_ > 0) {
      plot::Series tr{.name = "epoch (train)"}, va{.name = "epoch (validation)"};
      for (size_t i = 0; i < epoch_x_.size(); ++i) {
        const double at = epoch_x_[i] * static_cast<double>(batches_per_epoch_);
        tr.x.push_back(at);
        tr.y.push_back(train_loss_[i]);
        va.x.push_back(at);
        va.y.push_back(val_loss_[i]);
      }
      c.series.push_back(std::move(tr));
      if (has_validation_) c.series.push_back(std::move(va));
    }
    if (auto svg = plot::render_chart(c)) loss_svg_ = std::move(*svg);
  }
  if (!epoch_x_.empty()) {
    plot::Chart c;
    // Two points make a line; one is a dot.
    c.kind = epoch_x_.size() > 1 ? plot::Kind::Line : plot::Kind::Scatter;
    c.xlabel = "epoch";
    c.width = w;
    c.height = kChartHeight;
    if (has_validation_) {
      c.title = "validation accuracy";
      c.series.push_back({.name = "accuracy", .x = epoch_x_, .y = val_acc_});
    } else {
      c.title = "train loss per epoch";
      c.series.push_back({.name = "train", .x = epoch_x_, .y = train_loss_});
    }
    if (auto svg = plot::render_chart(c)) epoch_svg_ = std::move(*svg);
  }
  loss_chart_.load(QByteArray::fromStdString(loss_svg_));
  epoch_chart_.load(QByteArray::fromStdString(epoch_svg_));
}

QString RunDashboard::status() const {
  QString s;
  if (run_id_ > 0) s = QString("run #%1  ·  ").arg(run_id_);
  if (!live_)
    return s + (source_ ? "No run yet: train with the toolbar, the console or a cell's mls.train."
                        : "waiting for the run to start");
  QString phase;
  if (ended_)
    phase = end_ == End::Done ? "done" : end_ == End::Stopped ? "stopped" : "failed";
  else if (live_->running.load())
    phase = "training";
  else if (!has_last_)
    phase = "starting";
  else
    phase = planned_epochs_ > 0 && static_cast<int64_t>(epoch_x_.size()) >= planned_epochs_
                ? "done"
                : "ended";
  s += phase;
  if (!has_last_) return s;
  s += QString("  ·  epoch %1 of %2  ·  step %3  ·  loss %4  ·  %5 samples/s")
           .arg(last_.epoch)
           .arg(planned_epochs_)
           .arg(last_.step)
           .arg(number(last_.loss))
           .arg(std::round(static_cast<double>(last_.samples_per_s)));
  if (!train_loss_.empty()) s += "  ·  last epoch's loss " + number(train_loss_.back());
  if (has_validation_ && !val_acc_.empty() && std::isfinite(val_acc_.back()))
    s += "  ·  validation accuracy " + number(val_acc_.back());
  return s;
}

void RunDashboard::fitHeight() {
  // The status line wraps in a narrow cell; the charts go one above the other there.
  const int charts = width() >= kSideBySide ? 1 : 2;
  const int button = stop_->isVisible() ? stop_->sizeHint().width() + 6 : 0;
  int line = status_->heightForWidth(width() - button);
  if (line <= 0) line = status_->sizeHint().height();
  if (stop_->isVisible()) line = std::max(line, stop_->sizeHint().height());
  const int h = line + 6 + charts * kChartHeight;
  if (h != height()) setFixedHeight(h);
}

void RunDashboard::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fitHeight();
  if (rendered_size_ != size()) render();
}

void RunDashboard::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(250, 250, 250));
  for (int i = 0; i < 2; ++i) {
    QSvgRenderer& r = i == 0 ? loss_chart_ : epoch_chart_;
    const QRect at = chartRect(i);
    if (r.isValid()) {
      // At the size it was rendered for, so its text is not scaled.
      const QSize s = r.defaultSize();
      r.render(&p, QRectF(at.left(), at.top(), std::min(s.width(), at.width()), s.height()));
    } else {
      p.setPen(Qt::gray);
      p.drawText(at, Qt::AlignCenter,
                 i == 0 ? "loss per step: waiting for the first step"
                        : "per epoch: after the first epoch");
    }
  }
}

}  // namespace mls::editor
