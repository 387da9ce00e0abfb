#include "editor/fault_view.h"

#include <QApplication>
#include <QClipboard>
#include <QGraphicsView>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "editor/canvas.h"
#include "editor/node_item.h"

namespace mls::editor {

namespace {

QString value_text(double v) {
  return QString::number(v, 'g', 4);
}

const QColor kFault(220, 50, 47);

}  // namespace

std::string fault_node(const BreakHit& hit) {
  if (hit.fault && !hit.fault->label.empty()) return hit.fault->label;
  return hit.label;
}

QString paused_status(const BreakHit& hit) {
  QString what = QString::fromStdString(hit.message);
  if (what.isEmpty()) {
    what = QString("%1 at '%2'")
               .arg(break_kind_name(hit.kind), QString::fromStdString(fault_node(hit)));
  }
  // One line for the status bar: the message's first sentence is enough there.
  what = what.section('\n', 0, 0);
  return QString("paused at step %1: %2").arg(hit.step).arg(what);
}

QString stats_html(const QString& caption, const TensorStats& s) {
  QString shape;
  for (int64_t d : s.shape) shape += (shape.isEmpty() ? "" : ", ") + QString::number(d);
  QString text =
      QString(
          "<b>%1</b><br>shape [%2] · %3 values<br>mean %4 · std %5<br>min %6 · max %7 · "
          "zeros %8%")
          .arg(caption.toHtmlEscaped(), shape)
          .arg(s.count)
          .arg(value_text(s.mean), value_text(s.std), value_text(s.min), value_text(s.max))
          .arg(QString::number(100.0 * s.zero_fraction, 'f', 2));
  if (s.non_finite) {
    text += QString(
                "<br><font color='#dc322f'>%1 values are NaN or infinite (%2 NaN, %3 +inf, "
                "%4 -inf); the first at flat index %5</font>")
                .arg(s.non_finite)
                .arg(s.nan)
                .arg(s.pos_inf)
                .arg(s.neg_inf)
                .arg(s.first_non_finite);
  }
  return text;
}

// [SECTION] the marker on the canvas

FaultMarker::FaultMarker(QGraphicsItem* node, QRectF body, QString badge)
    : QGraphicsObject(node), body_(body.adjusted(-8, -8, 8, 8)), badge_(std::move(badge)) {
  setAcceptedMouseButtons(Qt::NoButton);
  setZValue(5);
  setToolTip(badge_);
}

QRectF FaultMarker::boundingRect() const {
  return body_.adjusted(-4, -30, 4, 4);
}

QPainterPath FaultMarker::shape() const {
  QPainterPath outer, inner;
  outer.addRect(body_.adjusted(-3, -3, 3, 3));
  inner.addRect(body_.adjusted(4, 4, -4, -4));
  QPainterPath ring = outer.subtracted(inner);
  ring.addRect(QRectF(body_.left(), body_.top() - 26, body_.width(), 22));
  return ring;
}

void FaultMarker::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  p->setPen(QPen(kFault, 4));
  p->setBrush(QColor(kFault.red(), kFault.green(), kFault.blue(), 40));
  p->drawRoundedRect(body_, 9, 9);
  QFont f = p->font();
  f.setBold(true);
  f.setPointSizeF(9);
  p->setFont(f);
  const QRectF text = p->fontMetrics().boundingRect(badge_).toRectF();
  const QRectF badge(body_.left(), body_.top() - 26, std::min(text.width() + 16, 360.0), 22);
  p->setPen(Qt::NoPen);
  p->setBrush(kFault);
  p->drawRoundedRect(badge, 6, 6);
  p->setPen(Qt::white);
  p->drawText(badge.adjusted(8, 0, -4, 0), Qt::AlignVCenter | Qt::AlignLeft,
              p->fontMetrics().elidedText(badge_, Qt::ElideRight, int(badge.width()) - 12));
}

// [SECTION] the histogram

HistogramBars::HistogramBars(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(120);
}

void HistogramBars::setCounts(std::vector<int64_t> counts, double lo, double hi, QString caption) {
  counts_ = std::move(counts);
  lo_ = lo;
  hi_ = hi;
  caption_ = std::move(caption);
  update();
}

void HistogramBars::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF r = QRectF(rect()).adjusted(6, 18, -6, -18);
  const QColor text = palette().color(QPalette::WindowText);
  p.setPen(text);
  p.drawText(QRectF(rect()).adjusted(6, 0, -6, 0), Qt::AlignTop | Qt::AlignLeft, caption_);
  if (counts_.empty()) {
    p.drawText(r, Qt::AlignCenter, "no finite values");
    return;
  }
  const int64_t top = *std::max_element(counts_.begin(), counts_.end());
  const double w = r.width() / static_cast<double>(counts_.size());
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(38, 139, 210));
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (!counts_[i] || !top) continue;
    // A square-root height, so a few outliers beside a big bin stay visible.
    const double h =
        r.height() * std::sqrt(static_cast<double>(counts_[i]) / static_cast<double>(top));
    p.drawRect(QRectF(r.left() + w * static_cast<double>(i) + 0.5, r.bottom() - h,
                      std::max(1.0, w - 1.0), h));
  }
  p.setPen(text);
  p.drawText(QRectF(rect()).adjusted(6, 0, -6, 0), Qt::AlignBottom | Qt::AlignLeft,
             value_text(lo_));
  p.drawText(QRectF(rect()).adjusted(6, 0, -6, 0), Qt::AlignBottom | Qt::AlignRight,
             value_text(hi_));
}

// [SECTION] the dock

FaultView::FaultView(CanvasScene* scene, QWidget* parent)
    : QWidget(parent),
      scene_(scene),
      title_(new QLabel),
      message_(new QLabel),
      stats_(new QLabel),
      next_(new QLabel),
      histogram_(new HistogramBars),
      inputs_(new QListWidget),
      resume_(new QPushButton("Resume (breakpoint off)")),
      fork_here_(new QPushButton("Fork here with the toolbar's settings")),
      copy_(new QPushButton("Copy")),
      fork_(new QLineEdit) {
  setObjectName("debug.fault_view");
  title_->setObjectName("debug.fault_title");
  message_->setObjectName("debug.fault_message");
  stats_->setObjectName("debug.fault_stats");
  inputs_->setObjectName("debug.fault_inputs");
  resume_->setObjectName("debug.resume");
  fork_here_->setObjectName("debug.fork_here");
  fork_here_->setToolTip(
      "A new run, child of the paused one, from its last checkpoint before the failing "
      "step (an epoch's, or the start's), trained with the project's settings as they are "
      "now: lower the learning rate on the toolbar first");
  fork_->setObjectName("debug.fork_command");
  next_->setObjectName("debug.next");
  for (QLabel* l : {title_, message_, stats_, next_}) {
    l->setWordWrap(true);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  }
  fork_->setReadOnly(true);
  inputs_->setMaximumHeight(110);
  resume_->setToolTip(
      "Train on from the checkpoint taken before the failing step's update, "
      "with the breakpoint that fired turned off for that run");
  copy_->setToolTip("Copy the command that forks the run with a tenth of the learning rate");

  auto* body = new QWidget;
  auto* col = new QVBoxLayout(body);
  col->addWidget(title_);
  col->addWidget(message_);
  col->addWidget(stats_);
  col->addWidget(histogram_);
  col->addWidget(new QLabel("Operands:"));
  col->addWidget(inputs_);
  col->addWidget(new QLabel("What next:"));
  auto* row = new QHBoxLayout;
  row->addWidget(resume_);
  row->addWidget(fork_here_);
  row->addStretch(1);
  col->addLayout(row);
  col->addWidget(next_);
  auto* fork_row = new QHBoxLayout;
  fork_row->addWidget(fork_, 1);
  fork_row->addWidget(copy_);
  col->addLayout(fork_row);
  col->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setWidget(body);
  auto* top = new QVBoxLayout(this);
  top->setContentsMargins(0, 0, 0, 0);
  top->addWidget(scroll);

  connect(resume_, &QPushButton::clicked, this, [this] {
    if (hit_) Q_EMIT resumeRequested(run_.run_id, *hit_);
  });
  connect(fork_here_, &QPushButton::clicked, this, [this] {
    if (hit_ && !run_.checkpoint.empty())
      Q_EMIT forkRequested(run_.run_id, QString::fromStdString(run_.checkpoint));
  });
  connect(copy_, &QPushButton::clicked, this,
          [this] { QApplication::clipboard()->setText(fork_->text()); });
  if (scene_) connect(scene_, &QObject::destroyed, this, [this] { scene_ = nullptr; });
  clear();
}

QString FaultView::forkCommand() const {
  if (!hit_ || run_.run_id <= 0) return {};
  const double lr = run_.lr > 0 ? run_.lr / 10 : 0.01;
  QString cmd = QString("mlstudio runs fork %1 --step %2 --set lr=%3")
                    .arg(run_.run_id)
                    .arg(run_.fork_step)
                    .arg(lr, 0, 'g', 4);
  if (!run_.db.empty() && run_.db != "mlstudio-runs.db")
    cmd += " --db " + QString::fromStdString(run_.db);
  return cmd;
}

void FaultView::clear() {
  hit_.reset();
  marked_.clear();
  if (marker_) delete marker_.data();
  title_->setText(
      "No run is paused. Arm a breakpoint in the Debug menu and press Train: a run "
      "that goes wrong stops here, at the first node at fault.");
  message_->clear();
  stats_->clear();
  histogram_->setCounts({}, 0, 0, QString());
  histogram_->hide();
  inputs_->clear();
  next_->clear();
  resume_->setEnabled(false);
  fork_here_->setEnabled(false);
  copy_->setEnabled(false);
  fork_->clear();
}

void FaultView::showBreak(const BreakHit& hit, const RunInfo& run) {
  clear();
  hit_ = hit;
  run_ = run;
  const std::string node = fault_node(hit);
  QString where = node.empty() ? QString() : QString(" at '%1'").arg(QString::fromStdString(node));
  if (hit.fault) {
    const std::string phase = phase_name(hit.fault->phase);
    where += QString::fromStdString(
        " (" + (hit.fault->op.empty() ? phase : hit.fault->op + ", " + phase) + ")");
  }
  title_->setText(QString("<b>Paused: %1%2</b><br>step %3 (epoch %4, batch %5) · loss %6")
                      .arg(break_kind_name(hit.kind), where.toHtmlEscaped())
                      .arg(hit.step)
                      .arg(hit.epoch)
                      .arg(hit.batch)
                      .arg(value_text(hit.loss)));
  QString msg = QString::fromStdString(hit.message).toHtmlEscaped();
  if (hit.kind != BreakHit::Kind::NonFinite)
    msg += QString("<br>observed %1, threshold %2")
               .arg(value_text(hit.observed), value_text(hit.threshold));
  message_->setText(msg);
  if (hit.fault) {
    const FaultSite& f = *hit.fault;
    const QString caption = QString::fromStdString(
        (f.label.empty() ? std::string("value") : f.label) +
        (f.op.empty() ? std::string() : " (" + f.op + ")") + ", " + phase_name(f.phase));
    stats_->setText(stats_html(caption, f.stats));
    histogram_->setCounts(f.stats.histogram, f.stats.min, f.stats.max,
                          "histogram of the finite values");
    histogram_->show();
    for (const std::string& in : f.inputs) inputs_->addItem(QString::fromStdString(in));
  }
  if (inputs_->count() == 0) inputs_->addItem("(none recorded)");
  resume_->setEnabled(run.run_id > 0);
  fork_here_->setEnabled(run.run_id > 0 && !run.checkpoint.empty());
  next_->setText(
      QString("Resume trains on from the state before step %1 with this breakpoint off. Fork "
              "here starts a child run from the last checkpoint before it (step %2) with the "
              "toolbar's settings: lower the learning rate first. From a terminal:")
          .arg(hit.step)
          .arg(run.fork_step));
  fork_->setText(forkCommand());
  copy_->setEnabled(!fork_->text().isEmpty());
  mark();
  if (scene_ && !marked_.empty()) {
    scene_->selectNode(marked_);
    if (NodeItem* item = scene_->nodeItem(marked_))
      for (QGraphicsView* v : scene_->views()) v->centerOn(item);
  }
}

void FaultView::mark() {
  if (marker_) delete marker_.data();
  marked_.clear();
  if (!hit_ || !scene_) return;
  const std::string node = fault_node(*hit_);
  NodeItem* item = node.empty() ? nullptr : scene_->nodeItem(node);
  if (!item) return;
  marked_ = node;
  const QRectF body = item->mapRectFromScene(item->bodySceneRect());
  marker_ = new FaultMarker(
      item, body, QString("step %1: %2").arg(hit_->step).arg(break_kind_name(hit_->kind)));
}

void FaultView::remark() {
  if (!hit_) return;
  if (marker_ && scene_ && scene_->nodeItem(marked_) == marker_->parentItem()) return;
  mark();
}

}  // namespace mls::editor
