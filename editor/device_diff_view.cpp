#include "editor/device_diff_view.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLinearGradient>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <cmath>

#include "editor/canvas.h"
#include "editor/document_model.h"
#include "editor/inspector.h"
#include "editor/node_item.h"
#include "engine/core/backend_registry.h"

namespace mls::editor {

namespace {

QString diff_text(double v) {
  return std::isfinite(v) ? QString::number(v, 'g', 3) : QString("inf");
}

const QColor kGreen(46, 204, 113), kYellow(241, 196, 15), kOrange(230, 126, 34), kRed(220, 50, 47);

QColor mix(QColor a, QColor b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

runner::DiffMetric metric_of(int index) {
  return index == 0   ? runner::DiffMetric::Rel
         : index == 1 ? runner::DiffMetric::Abs
                      : runner::DiffMetric::Ulps;
}

}  // namespace

QColor diff_colour(double value, double threshold) {
  if (!(threshold > 0)) threshold = 1e-4;
  if (!std::isfinite(value) || value > threshold) return kRed;
  if (value <= threshold / 1000) return kGreen;
  // log10(value / threshold) in (-3, 0]: green -> yellow over (-3, -1], yellow -> orange to 0.
  const double l = std::log10(value / threshold);
  if (l <= -1) return mix(kGreen, kYellow, (l + 3) / 2);
  return mix(kYellow, kOrange, l + 1);
}

// [SECTION] halo and legend

DiffHalo::DiffHalo(QGraphicsItem* node, QRectF body, QColor colour, QString tip)
    : QGraphicsObject(node), body_(body.adjusted(-9, -9, 9, 9)), colour_(colour) {
  setAcceptedMouseButtons(Qt::NoButton);
  setFlag(QGraphicsItem::ItemStacksBehindParent);
  setToolTip(tip);
}

QRectF DiffHalo::boundingRect() const {
  return body_.adjusted(-3, -3, 3, 3);
}

void DiffHalo::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  p->setPen(QPen(colour_, 4));
  p->setBrush(QColor(colour_.red(), colour_.green(), colour_.blue(), 110));
  p->drawRoundedRect(body_, 10, 10);
}

DiffLegend::DiffLegend(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(58);
  setObjectName("compare.legend");
}

void DiffLegend::setScale(double threshold, QString unit) {
  threshold_ = threshold;
  unit_ = std::move(unit);
  update();
}

void DiffLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QRectF bar = QRectF(rect()).adjusted(8, 4, -8, -36);
  // The scale spans threshold / 1e4 .. threshold * 10, in decades.
  const double lo = std::log10(threshold_) - 4, hi = std::log10(threshold_) + 1;
  const int steps = 100;
  for (int i = 0; i < steps; ++i) {
    const double v = std::pow(10.0, lo + (hi - lo) * (i + 0.5) / steps);
    p.fillRect(QRectF(bar.left() + bar.width() * i / steps, bar.top(), bar.width() / steps + 1,
                      bar.height()),
               diff_colour(v, threshold_));
  }
  const QColor text = palette().color(QPalette::WindowText);
  p.setPen(QPen(text, 2));
  const double tx = bar.left() + bar.width() * (std::log10(threshold_) - lo) / (hi - lo);
  p.drawLine(QPointF(tx, bar.top() - 2), QPointF(tx, bar.bottom() + 2));
  QFont f = p.font();
  f.setPointSizeF(8);
  p.setFont(f);
  // The scale's ends under the bar, the threshold on a line of its own below them.
  const QRectF labels(bar.left(), bar.bottom() + 2, bar.width(), 16);
  p.drawText(labels, Qt::AlignLeft | Qt::AlignTop, diff_text(std::pow(10.0, lo)) + " " + unit_);
  p.drawText(labels, Qt::AlignRight | Qt::AlignTop, diff_text(std::pow(10.0, hi)));
  const QString t = "threshold " + diff_text(threshold_) + " " + unit_ + ": red above it";
  const double tw = p.fontMetrics().horizontalAdvance(t) + 8;
  const double left = std::clamp(tx - tw / 2, bar.left(), std::max(bar.left(), bar.right() - tw));
  p.drawText(QRectF(left, labels.bottom(), tw, 16), Qt::AlignHCenter | Qt::AlignTop, t);
}

// [SECTION] the dock

DeviceDiffView::DeviceDiffView(DocumentModel* model, CanvasScene* scene, QWidget* parent)
    : QWidget(parent),
      model_(model),
      scene_(scene),
      devices_(new QListWidget),
      shown_(new QComboBox),
      metric_(new QComboBox),
      which_(new QComboBox),
      threshold_(new RealSpinBox),
      run_(new QPushButton("Compare")),
      status_(new QLabel),
      legend_(new DiffLegend),
      table_(new QTableWidget) {
  setObjectName("compare.view");
  devices_->setObjectName("compare.devices");
  shown_->setObjectName("compare.shown");
  metric_->setObjectName("compare.metric");
  which_->setObjectName("compare.which");
  threshold_->setObjectName("compare.threshold");
  run_->setObjectName("compare.run");
  status_->setObjectName("compare.status");
  table_->setObjectName("compare.table");
  for (const std::string& d : backend_registry().names()) {
    auto* it = new QListWidgetItem(QString::fromStdString(d), devices_);
    it->setFlags(it->flags() | Qt::ItemIsUserCheckable);
    it->setCheckState(Qt::Checked);
  }
  devices_->setMaximumHeight(70);
  metric_->addItems({"relative", "absolute", "ulps"});
  which_->addItems({"chained (what a run sees)", "alone (the kernel's own error)"});
  threshold_->setMinimum(1e-12);
  threshold_->setValue(1e-4);
  status_->setWordWrap(true);
  status_->setText(
      "One training step on each device ticked, each node against a float64 "
      "reference. Headless: mlstudio compare-devices P.mls");
  table_->setColumnCount(6);
  table_->setHorizontalHeaderLabels({"node", "phase", "chained", "alone", "ulps", "ops"});
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);

  auto* form = new QFormLayout;
  form->addRow("Devices", devices_);
  form->addRow("Paint", shown_);
  form->addRow("Metric", metric_);
  form->addRow("Which", which_);
  form->addRow("Threshold", threshold_);
  auto* col = new QVBoxLayout(this);
  col->addLayout(form);
  col->addWidget(run_);
  col->addWidget(status_);
  col->addWidget(legend_);
  col->addWidget(table_, 1);
  legend_->setScale(threshold(), "rel");

  connect(run_, &QPushButton::clicked, this, &DeviceDiffView::run);
  for (QComboBox* c : {shown_, metric_, which_})
    connect(c, &QComboBox::currentIndexChanged, this, [this] { repaint(); });
  connect(threshold_, &QDoubleSpinBox::valueChanged, this, [this] { repaint(); });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (!scene_ || !table_->item(row, 0)) return;
    scene_->selectNode(table_->item(row, 0)->text().toStdString());
  });
  if (scene_)
    connect(scene_, &QObject::destroyed, this, [this] {
      scene_ = nullptr;
      halos_.clear();
    });
  connect(&watcher_, &QFutureWatcherBase::finished, this, [this] {
    run_->setEnabled(true);
    Result<runner::CompareReport> r = watcher_.result();
    if (!r) {
      status_->setText("compare-devices: " + QString::fromStdString(r.error().message));
      Q_EMIT finished(false, status_->text());
      return;
    }
    report_ = std::move(*r);
    shown_->blockSignals(true);
    shown_->clear();
    QStringList skipped;
    for (const runner::DeviceCompare& d : report_->devices) {
      if (d.ran)
        shown_->addItem(QString::fromStdString(d.device));
      else
        skipped << QString::fromStdString(d.device + ": " + d.status);
    }
    // The first device that is not the CPU: the one a person suspects.
    for (int i = 0; i < shown_->count(); ++i)
      if (shown_->itemText(i) != "cpu") {
        shown_->setCurrentIndex(i);
        break;
      }
    shown_->blockSignals(false);
    QString s = QString("step %1, batch %2 (%3 samples), from %4; reference loss %5")
                    .arg(report_->step)
                    .arg(report_->batch)
                    .arg(report_->batch_size)
                    .arg(QString::fromStdString(report_->start))
                    .arg(report_->reference_loss, 0, 'g', 6);
    if (!skipped.isEmpty()) s += ". Not run: " + skipped.join("; ");
    status_->setText(s);
    repaint();
    Q_EMIT finished(true, s);
  });
  // The graph changed: the painting describes another model.
  connect(model_, &DocumentModel::changed, this, [this] {
    if (!report_) return;
    report_.reset();
    clearPaint();
    table_->setRowCount(0);
    status_->setText("The model changed since the comparison: Compare again.");
  });
}

DeviceDiffView::~DeviceDiffView() {
  watcher_.waitForFinished();
  clearPaint();
}

double DeviceDiffView::threshold() const {
  return threshold_->value();
}

void DeviceDiffView::setThreshold(double t) {
  threshold_->setValue(t);
}

void DeviceDiffView::run() {
  if (busy()) return;
  std::vector<std::string> devices;
  for (int i = 0; i < devices_->count(); ++i)
    if (devices_->item(i)->checkState() == Qt::Checked)
      devices.push_back(devices_->item(i)->text().toStdString());
  if (devices.empty()) {
    status_->setText("Tick at least one device.");
    return;
  }
  // The document as it is held (unsaved edits included), opened and compared off the GUI
  // thread.
  runner::ProjectOptions po;
  po.path = model_->path();
  po.document = std::make_shared<const nodes::Document>(model_->doc());
  run_->setEnabled(false);
  status_->setText(QString("comparing one step on %1…").arg(QString::fromStdString([&] {
    std::string s;
    for (const std::string& d : devices) s += (s.empty() ? "" : ", ") + d;
    return s;
  }())));
  watcher_.setFuture(QtConcurrent::run([po, devices]() -> Result<runner::CompareReport> {
    auto p = runner::open_project(po);
    if (!p) return p.error();
    runner::CompareOptions o;
    o.devices = devices;
    return runner::compare_devices(*p, o);
  }));
}

void DeviceDiffView::clearPaint() {
  for (QPointer<DiffHalo>& h : halos_)
    if (h) {
      // The node's own tooltip back (the figures were appended to it).
      if (QGraphicsItem* node = h->parentItem(); node && h->property("tip").isValid())
        if (node->toolTip() == h->property("with").toString())
          node->setToolTip(h->property("tip").toString());
      delete h.data();
    }
  halos_.clear();
  painted_.clear();
}

std::optional<QColor> DeviceDiffView::paintedColour(const std::string& node) const {
  auto it = painted_.find(node);
  if (it == painted_.end()) return std::nullopt;
  return diff_colour(it->second, threshold());
}

QString DeviceDiffView::tooltipOf(const std::string& node) const {
  if (!report_) return {};
  QString tip = QString("Compared with the float64 reference (step %1):").arg(report_->step);
  for (const runner::DeviceCompare& d : report_->devices) {
    if (!d.ran) continue;
    for (StepPhase ph : {StepPhase::Forward, StepPhase::Backward}) {
      const runner::NodeDiff* n = runner::find_node(d, node, ph);
      if (!n) continue;
      tip += QString("\n%1 %2: chained rel %3 abs %4 (%5 ulps); alone rel %6 (%7 ulps)%8")
                 .arg(QString::fromStdString(d.device),
                      QString::fromStdString(std::string(step_phase_name(ph))))
                 .arg(diff_text(n->chained.max_rel), diff_text(n->chained.max_abs),
                      diff_text(n->chained.max_ulps), diff_text(n->alone.max_rel),
                      diff_text(n->alone.max_ulps))
                 .arg(n->host_ops.empty() ? QString() : " [host fallback]");
    }
  }
  return tip;
}

void DeviceDiffView::repaint() {
  clearPaint();
  const QStringList units{"rel", "abs", "ulps"};
  legend_->setScale(threshold(), units[metric_->currentIndex()]);
  fillTable();
  if (!report_ || !scene_) return;
  const runner::DeviceCompare* dev = nullptr;
  for (const runner::DeviceCompare& d : report_->devices)
    if (d.ran && QString::fromStdString(d.device) == shown_->currentText()) dev = &d;
  if (!dev) return;
  const runner::DiffMetric m = metric_of(metric_->currentIndex());
  const bool alone = which_->currentIndex() == 1;
  for (const runner::NodeDiff& n : dev->nodes) {
    const double v = runner::diff_value(alone ? n.alone : n.chained, m);
    auto [it, fresh] = painted_.emplace(n.label, v);
    if (!fresh) it->second = std::max(it->second, std::isfinite(v) ? v : INFINITY);
    if (!(alone ? n.alone : n.chained).finite) it->second = INFINITY;
  }
  for (const auto& [label, v] : painted_) {
    NodeItem* item = scene_->nodeItem(label);
    if (!item) continue;
    const QString tip = tooltipOf(label);
    auto* h = new DiffHalo(item, item->mapRectFromScene(item->bodySceneRect()),
                           diff_colour(v, threshold()), tip);
    const QString own = item->toolTip();
    const QString with = own + (own.isEmpty() ? "" : "\n\n") + tip;
    h->setProperty("tip", own);
    h->setProperty("with", with);
    item->setToolTip(with);
    halos_.emplace_back(h);
  }
}

void DeviceDiffView::fillTable() {
  table_->setRowCount(0);
  if (!report_) return;
  const runner::DeviceCompare* dev = nullptr;
  for (const runner::DeviceCompare& d : report_->devices)
    if (d.ran && QString::fromStdString(d.device) == shown_->currentText()) dev = &d;
  if (!dev) return;
  const runner::DiffMetric m = metric_of(metric_->currentIndex());
  table_->setRowCount(static_cast<int>(dev->nodes.size()));
  int row = 0;
  for (const runner::NodeDiff& n : dev->nodes) {
    QString ops;
    for (const std::string& o : n.ops)
      ops += (ops.isEmpty() ? "" : " ") + QString::fromStdString(o);
    const double c = runner::diff_value(n.chained, m), a = runner::diff_value(n.alone, m);
    const QStringList cells{QString::fromStdString(n.label),
                            QString::fromStdString(std::string(step_phase_name(n.phase))),
                            diff_text(c),
                            diff_text(a),
                            diff_text(n.chained.max_ulps),
                            ops};
    for (int k = 0; k < cells.size(); ++k) {
      auto* it = new QTableWidgetItem(cells[k]);
      if (k == 2 || k == 3) {
        it->setBackground(diff_colour(k == 2 ? c : a, threshold()));
        it->setForeground(Qt::black);
      }
      table_->setItem(row, k, it);
    }
    ++row;
  }
  table_->resizeColumnsToContents();
}

}  // namespace mls::editor
