#include "editor/step_through_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGraphicsRectItem>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSvgRenderer>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "editor/canvas.h"
#include "editor/memory_view.h"
#include "engine/core/backend_registry.h"
#include "scripting/notebook/plot.h"
#include "scripting/notebook/rich_output.h"

namespace mls::editor {

namespace {

using runner::StepThrough;
using runner::StepValue;

QString number(double v) {
  return QString::number(v, 'g', 7);
}

const char* phase_label(StepPhase p) {
  return p == StepPhase::Forward ? "forward" : p == StepPhase::Backward ? "backward" : "update";
}

// What the picture shows for a tensor: a heatmap (2-D, or 1-D as one row), an image grid (an
// image batch), or the first sample's channels as images (N, C, H, W with other C).
std::vector<lua::Figure> pictures(const Tensor& t, const std::string& title) {
  const Shape& s = t.shape();
  if (t.dtype() != DType::F32) return {};
  if (s.size() == 1) {
    auto r = t.reshape({1, s[0]});
    return r ? lua::tensor_figures(*r, title) : std::vector<lua::Figure>{};
  }
  if (s.size() == 4 && s[1] != 1 && s[1] != 3 && t.is_contiguous()) {
    auto r = t.slice(0, 0, 1).reshape({s[1], s[2], s[3]});
    return r ? lua::tensor_figures(*r, title + " (sample 0, its channels)")
             : std::vector<lua::Figure>{};
  }
  return lua::tensor_figures(t, title);
}

}  // namespace

// An SVG scaled to fit, its aspect kept. Pixel pictures (image grids of <rect> runs) are drawn
// without antialiasing, which would leave seams between the runs.
class SvgView : public QWidget {
 public:
  explicit SvgView(bool smooth) : smooth_(smooth) {}
  void load(const QByteArray& svg) {
    renderer_.load(svg);
    image_ = QImage();
    if (!smooth_ && renderer_.isValid()) {
      // Drawn once at the SVG's own size (whole pixels: no seams), then scaled as pixels.
      image_ = QImage(renderer_.defaultSize(), QImage::Format_RGB32);
      image_.fill(Qt::white);
      QPainter p(&image_);
      renderer_.render(&p);
    }
    update();
  }
  bool empty() const { return !renderer_.isValid(); }

 protected:
  void paintEvent(QPaintEvent*) override {
    if (!renderer_.isValid()) return;
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, smooth_);
    QSizeF s = renderer_.defaultSize();
    s.scale(size(), Qt::KeepAspectRatio);
    const QRectF to(QPointF((width() - s.width()) / 2, 0), s);
    if (image_.isNull())
      renderer_.render(&p, to);
    else
      p.drawImage(to, image_);
  }

 private:
  QSvgRenderer renderer_;
  QImage image_;
  bool smooth_;
};

StepThroughView::StepThroughView(DocumentModel* model, CanvasScene* canvas, QWidget* parent)
    : QWidget(parent),
      model_(model),
      canvas_(canvas),
      batch_(new QSpinBox),
      step_(new QPushButton("Step")),
      back_(new QPushButton("Step back")),
      phase_end_(new QPushButton("To end of phase")),
      next_(new QPushButton("Next batch")),
      position_(new QLabel),
      info_(new QLabel),
      stats_(new QLabel),
      values_(new QComboBox),
      histogram_(new SvgView(true)),
      picture_(new SvgView(false)),
      picture_note_(new QLabel),
      changes_(new QTableWidget),
      placement_(new QCheckBox("Colour the canvas by placement")),
      placement_legend_(new QLabel),
      memory_(new MemoryView) {
  setObjectName("step.through");
  batch_->setObjectName("step.batch");
  step_->setObjectName("step.step");
  back_->setObjectName("step.back");
  phase_end_->setObjectName("step.phase_end");
  next_->setObjectName("step.next");
  position_->setObjectName("step.position");
  info_->setObjectName("step.info");
  stats_->setObjectName("step.stats");
  values_->setObjectName("step.values");
  histogram_->setObjectName("step.histogram");
  picture_->setObjectName("step.picture");
  changes_->setObjectName("step.changes");
  batch_->setRange(0, 1 << 30);
  batch_->setFixedWidth(80);  // the buttons stay put when the range becomes the data's
  batch_->setToolTip(
      "The batch of the training split, in the run's order (0: the first of epoch 1)");
  step_->setToolTip("One document node on: the forward, then the backward, then the update");
  back_->setToolTip("One node back (the values are kept: nothing runs again)");
  phase_end_->setToolTip("To the end of the forward, the backward or the update");
  next_->setToolTip("The step again on the next batch, from the updated parameters");

  // Two rows, so that a narrow dock stays narrow (the Notebook shares the dock area).
  auto* controls = new QVBoxLayout;
  auto* row1 = new QHBoxLayout;
  row1->addWidget(new QLabel("Batch"));
  row1->addWidget(batch_);
  row1->addWidget(step_);
  row1->addWidget(back_);
  row1->addStretch(1);
  auto* row2 = new QHBoxLayout;
  row2->addWidget(phase_end_);
  row2->addWidget(next_);
  row2->addStretch(1);
  controls->addLayout(row1);
  controls->addLayout(row2);
  QFont bold = position_->font();
  bold.setBold(true);
  position_->setFont(bold);
  position_->setText("Pick a batch and press Step.");
  position_->setWordWrap(true);
  info_->setWordWrap(true);
  stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  stats_->setWordWrap(true);
  histogram_->setFixedHeight(230);
  picture_->setFixedHeight(240);
  picture_note_->setWordWrap(true);
  changes_->setColumnCount(5);
  changes_->setHorizontalHeaderLabels({"parameter", "node", "|Δ|", "|Δ|/|w|", "max |Δ|"});
  changes_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  changes_->verticalHeader()->hide();
  changes_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  changes_->setFixedHeight(200);

  auto* body = new QWidget;
  auto* col = new QVBoxLayout(body);
  col->addWidget(position_);
  col->addWidget(info_);
  placement_->setObjectName("step.placement");
  placement_->setToolTip("A halo behind each node: where its forward and backward kernels run");
  placement_legend_->setWordWrap(true);
  col->addWidget(placement_);
  col->addWidget(placement_legend_);
  col->addWidget(changes_);  // the update's table first: it is what the update did
  col->addWidget(values_);
  col->addWidget(stats_);
  col->addWidget(histogram_);
  col->addWidget(picture_);
  col->addWidget(picture_note_);
  auto* memory_title =
      new QLabel("Memory of this training step by category (the compiled step at its peak)");
  memory_title->setWordWrap(true);
  col->addWidget(memory_title);
  col->addWidget(memory_);
  memory_->setMinimumHeight(140);
  memory_->follow([] { return std::shared_ptr<const Telemetry>(); }, [this] { return estimate_; });
  col->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setWidget(body);
  auto* top = new QVBoxLayout(this);
  top->setContentsMargins(4, 4, 4, 4);
  top->addLayout(controls);
  top->addWidget(scroll, 1);

  connect(step_, &QPushButton::clicked, this, [this] { act(Action::Step); });
  connect(back_, &QPushButton::clicked, this, [this] { act(Action::Back); });
  connect(phase_end_, &QPushButton::clicked, this, [this] { act(Action::PhaseEnd); });
  connect(next_, &QPushButton::clicked, this, [this] { act(Action::NextBatch); });
  connect(values_, &QComboBox::currentIndexChanged, this, [this] { showValue(); });
  connect(placement_, &QCheckBox::toggled, this, [this] { paintPlacement(); });
  if (canvas_)  // the scene may go first (the window's members): its items go with it
    connect(canvas_, &QObject::destroyed, this, [this] {
      canvas_ = nullptr;
      halos_.clear();
    });
  // An edit makes the step another one: it is evaluated again on the next press.
  connect(model_, &DocumentModel::changed, this, [this] {
    if (busy_) {
      stale_ = true;
      return;
    }
    if (st_) {
      st_.reset();
      error_.clear();
      clearPlacement();
      placement_legend_->clear();
      show();
    }
  });
  show();
}

StepThroughView::~StepThroughView() {
  watcher_.waitForFinished();
  clearPlacement();
}

void StepThroughView::clearPlacement() {
  for (QGraphicsRectItem* h : halos_) delete h;
  halos_.clear();
}

std::map<std::string, std::string> StepThroughView::placementShown() const {
  std::map<std::string, std::string> out;
  if (busy_ || !st_ || !st_->evaluated()) return out;
  const std::string device(st_->backend().name());
  for (const runner::StepPoint& p : st_->points()) {
    if (p.node.empty() || p.phase == StepPhase::Optimizer || p.ir_nodes.empty()) continue;
    std::string& c = out[p.node];
    const std::string here = device == "cpu" ? "cpu" : p.host_ops.empty() ? "device" : "host";
    if (c.empty() || here == "host") c = here;
  }
  return out;
}

void StepThroughView::paintPlacement() {
  clearPlacement();
  placement_legend_->clear();
  if (!placement_->isChecked() || !canvas_ || busy_ || !st_ || !st_->evaluated()) return;
  const std::string device(st_->backend().name());
  std::vector<std::string> fallbacks;
  for (const runner::StepPoint& p : st_->points())
    for (const std::string& h : p.host_ops) fallbacks.push_back(p.node + ": " + h);
  for (const auto& [node, where] : placementShown()) {
    NodeItem* item = canvas_->nodeItem(node);
    if (!item) continue;
    const QColor c = where == "host"     ? QColor(230, 126, 34)
                     : where == "device" ? QColor(46, 204, 113)
                                         : QColor(52, 152, 219);
    auto* h = new QGraphicsRectItem(item->bodySceneRect().adjusted(-7, -7, 7, 7));
    h->setPen(QPen(c, 3));
    h->setBrush(QColor(c.red(), c.green(), c.blue(), 60));
    h->setZValue(item->zValue() - 1);
    h->setAcceptedMouseButtons(Qt::NoButton);
    canvas_->addItem(h);
    halos_.push_back(h);
  }
  QString legend =
      device == "cpu"
          ? "Blue: runs on the CPU, the project's device."
          : QString("Green: runs on %1. Orange: part of it falls back to the CPU (no %1 kernel).")
                .arg(QString::fromStdString(device));
  if (!fallbacks.empty()) {
    legend += " Fallbacks:";
    for (const std::string& f : fallbacks) legend += "\n  " + QString::fromStdString(f);
  }
  placement_legend_->setText(legend);
}

void StepThroughView::setBusy(bool on) {
  busy_ = on;
  for (QWidget* w :
       std::initializer_list<QWidget*>{batch_, step_, back_, phase_end_, next_, values_})
    w->setEnabled(!on);
  if (on) position_->setText("Running the step…");
}

void StepThroughView::runJob(std::function<Result<void>(StepThrough&)> job,
                             std::function<void()> then) {
  setBusy(true);
  error_.clear();
  // The step moves to the worker and back: the GUI thread does not touch it meanwhile.
  auto held = std::make_shared<std::unique_ptr<StepThrough>>(std::move(st_));
  auto estimate = std::make_shared<std::shared_ptr<const PreflightEstimate>>();
  std::shared_ptr<const nodes::Document> doc;
  if (!*held) doc = std::make_shared<const nodes::Document>(model_->doc());
  const std::string path = model_->path();
  watcher_.disconnect(this);
  connect(&watcher_, &QFutureWatcher<Result<void>>::finished, this, [this, held, estimate, then] {
    Result<void> r = watcher_.result();
    st_ = std::move(*held);
    if (*estimate) estimate_ = *estimate;
    setBusy(false);
    if (stale_) {  // the document changed meanwhile: this step is not the project's any more
      stale_ = false;
      st_.reset();
      error_ = "The project changed: press Step again.";
    } else if (!r) {
      error_ = QString::fromStdString(r.error().message);
      if (st_ && !st_->evaluated()) st_.reset();
    } else if (then) {
      then();
    }
    show();
    paintPlacement();
    Q_EMIT updated();
  });
  watcher_.setFuture(QtConcurrent::run([held, estimate, doc, path, job]() -> Result<void> {
    if (!*held) {
      runner::ProjectOptions o;
      o.path = path;
      o.document = doc;
      auto p = runner::open_project(o);
      if (!p) return p.error();
      auto backend = runner::open_backend(*p);
      if (!backend) return backend.error();
      auto opened = StepThrough::open(std::move(*p), **backend);
      if (!opened) return opened.error();
      *held = std::move(*opened);
      // The step's memory as the trainer will plan it (no time estimate needed: no rates).
      const runner::Project& pr = (*held)->project();
      PreflightOptions po;
      po.search_max_batch = false;
      auto e = preflight(pr.builder(), pr.train_config(), (*held)->backend(), DeviceRates{}, po);
      if (e) *estimate = std::make_shared<const PreflightEstimate>(std::move(*e));
    }
    return job(**held);
  }));
}

void StepThroughView::act(Action a) {
  if (busy_) return;
  const int64_t batch = batch_->value();
  const bool ready = st_ && st_->evaluated() && st_->batch() == batch;
  if (a == Action::NextBatch) {
    if (!st_ || !st_->evaluated()) {
      runJob([batch](StepThrough& s) { return s.evaluate(batch); }, [this] { st_->step(); });
      return;
    }
    runJob([](StepThrough& s) { return s.next_batch(); },
           [this] {
             QSignalBlocker block(batch_);
             batch_->setValue(static_cast<int>(st_->batch()));
             st_->step();
           });
    return;
  }
  if (!ready) {
    // A new batch (or the first press): evaluate it from the step's starting parameters.
    if (a == Action::Back) return;
    runJob([batch](StepThrough& s) { return s.evaluate(batch); },
           [this, a] {
             if (a == Action::Step)
               st_->step();
             else
               st_->to_end_of_phase();
           });
    return;
  }
  if (a == Action::Step) st_->step();
  if (a == Action::Back) st_->step_back();
  if (a == Action::PhaseEnd) st_->to_end_of_phase();
  show();
  Q_EMIT updated();
}

QString StepThroughView::positionText() const {
  return position_->text();
}

const StepValue* StepThroughView::shownValue() const {
  if (busy_ || !st_ || st_->cursor() < 0) return nullptr;
  const auto& vals = st_->current().values;
  const int i = values_->currentIndex();
  return i >= 0 && i < static_cast<int>(vals.size()) ? &vals[static_cast<size_t>(i)] : nullptr;
}

void StepThroughView::show() {
  const bool has = st_ && st_->evaluated();
  back_->setEnabled(!busy_ && has && st_->cursor() >= 0);
  if (!has) {
    position_->setText(error_.isEmpty() ? "Pick a batch and press Step." : error_);
    info_->clear();
    QSignalBlocker block(values_);
    values_->clear();
    stats_->clear();
    histogram_->load(QByteArray());
    picture_->load(QByteArray());
    picture_note_->clear();
    changes_->hide();
    return;
  }
  const StepThrough& s = *st_;
  batch_->setMaximum(static_cast<int>(std::min<int64_t>(
      s.batches_per_epoch() * std::max<int64_t>(s.project().doc.training.epochs, 1) - 1, 1 << 30)));
  const int64_t epoch = s.batch() / s.batches_per_epoch() + 1;
  info_->setText(QString("Batch %1 (epoch %2, %3 samples) · optimizer step %4 · loss %5 · lr %6")
                     .arg(s.batch())
                     .arg(epoch)
                     .arg(s.batch_size())
                     .arg(s.step_index())
                     .arg(number(s.loss()))
                     .arg(number(s.lr())));
  if (s.cursor() < 0) {
    position_->setText(
        QString("Batch %1 evaluated: press Step to walk through it.").arg(s.batch()));
    QSignalBlocker block(values_);
    values_->clear();
    showValue();
    changes_->hide();
    return;
  }
  const runner::StepPoint& p = s.current();
  QString where = QString::fromStdString(p.node.empty() ? "(the backward's seed)" : p.node);
  if (!p.type.empty()) where += " (" + QString::fromStdString(p.type) + ")";
  position_->setText(QString("%1 %2/%3: %4")
                         .arg(phase_label(p.phase))
                         .arg(s.position_in_phase())
                         .arg(s.phase_size(p.phase))
                         .arg(where));
  QString runs = "Runs on " + QString::fromStdString(p.device);
  if (!p.host_ops.empty()) {
    QStringList ops;
    for (const std::string& h : p.host_ops) ops << QString::fromStdString(h);
    runs += " (on the CPU for want of a kernel: " + ops.join(", ") + ")";
  }
  info_->setText(info_->text() + "\n" + runs);
  {
    QSignalBlocker block(values_);
    values_->clear();
    for (const StepValue& v : p.values) values_->addItem(QString::fromStdString(v.caption));
    values_->setCurrentIndex(p.values.empty() ? -1 : 0);
  }
  showValue();
  if (p.phase == StepPhase::Optimizer)
    showChanges();
  else
    changes_->hide();
  if (canvas_ && !p.node.empty() && canvas_->nodeItem(p.node)) {
    canvas_->selectNode(p.node);
    for (QGraphicsView* v : canvas_->views()) v->ensureVisible(canvas_->nodeItem(p.node), 160, 80);
  }
}

void StepThroughView::showValue() {
  const StepValue* v = shownValue();
  if (!v) {
    stats_->clear();
    histogram_->load(QByteArray());
    picture_->load(QByteArray());
    picture_note_->clear();
    return;
  }
  const Tensor& t = st_->tensor(*v);
  const runner::TensorStats s = runner::tensor_stats(t);
  QString shape;
  for (int64_t d : s.shape) shape += (shape.isEmpty() ? "" : ", ") + QString::number(d);
  QString text =
      QString(
          "<b>%1</b><br>shape [%2] · %3 values<br>mean %4 · std %5<br>min %6 · max %7 · zeros %8%")
          .arg(QString::fromStdString(v->caption).toHtmlEscaped(), shape)
          .arg(s.count)
          .arg(number(s.mean), number(s.std), number(s.min), number(s.max))
          .arg(QString::number(100.0 * s.zero_fraction, 'f', 2));
  if (s.non_finite)
    text +=
        QString("<br><font color='#c0392b'>%1 values are NaN or infinite</font>").arg(s.non_finite);
  stats_->setText(text);
  const std::vector<double> vals = t.to_f64();
  auto h = plot::render_histogram(vals, 32, "histogram of " + v->caption);
  histogram_->load(h ? QByteArray::fromStdString(*h) : QByteArray());
  const std::vector<lua::Figure> figs = pictures(t, v->caption);
  if (figs.empty()) {
    picture_->load(QByteArray());
    picture_->hide();
    picture_note_->setText(t.rank() == 0 ? "A scalar: " + number(s.mean) : "");
  } else {
    picture_->show();
    picture_->load(QByteArray::fromStdString(figs.front().svg));
    picture_note_->setText(QString::fromStdString(figs.front().title));
  }
}

void StepThroughView::showChanges() {
  const auto& cs = st_->changes();
  changes_->setRowCount(static_cast<int>(cs.size()));
  for (size_t i = 0; i < cs.size(); ++i) {
    const runner::ParamChange& c = cs[i];
    const QStringList cells{QString::fromStdString(c.name), QString::fromStdString(c.node),
                            number(c.delta_norm), number(c.relative), number(c.max_abs_delta)};
    for (int k = 0; k < cells.size(); ++k) {
      auto* item = new QTableWidgetItem(cells[k]);
      if (k >= 2) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      changes_->setItem(static_cast<int>(i), k, item);
    }
  }
  changes_->show();
}

}  // namespace mls::editor
