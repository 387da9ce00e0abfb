#include "editor/step_view.h"

#include <QApplication>
#include <QComboBox>
#include <QGraphicsItem>
#include <QGraphicsPathItem>
#include <QGraphicsScene>
#include <QHBoxLayout>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine/core/backend_registry.h"
#include "nodes/lower.h"
#include "nodes/training_spec.h"
#include "scripting/notebook/ir_layout.h"

namespace mls::editor {

namespace {

constexpr double kBoxW = 176, kBoxH = 46, kSourceH = 26, kGapX = 22, kGapY = 34;

bool dark_theme() {
  return QApplication::palette().color(QPalette::Window).lightness() < 128;
}

QString type_text(const ValueType& t) {
  return QString::fromStdString(std::string(dtype_name(t.dtype)) + shape_str(t.shape));
}

// One IR node (or a source value) as a box: op name, output type, the document node.
class IrBox : public QGraphicsItem {
 public:
  enum class Kind { Forward, Backward, Fused, Input, Param };
  IrBox(Kind kind, QString title, QString detail, QString label, double height)
      : kind_(kind),
        title_(std::move(title)),
        detail_(std::move(detail)),
        label_(std::move(label)),
        h_(height) {
    setFlag(ItemIsSelectable);
    setAcceptHoverEvents(true);
  }
  QRectF boundingRect() const override { return {-kBoxW / 2, 0, kBoxW, h_}; }
  const QString& documentNode() const { return label_; }
  Kind kind() const { return kind_; }

  void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override {
    const bool dark = dark_theme();
    QColor edge;
    switch (kind_) {
      case Kind::Forward:
        edge = QColor(70, 130, 220);
        break;
      case Kind::Backward:
        edge = QColor(230, 130, 40);
        break;
      case Kind::Fused:
        edge = QColor(160, 90, 220);
        break;
      case Kind::Input:
        edge = QColor(130, 130, 130);
        break;
      case Kind::Param:
        edge = QColor(60, 170, 100);
        break;
    }
    QColor fill = dark ? QColor(45, 47, 52) : QColor(252, 252, 252);
    if (kind_ == Kind::Backward) fill = dark ? QColor(62, 50, 38) : QColor(255, 244, 230);
    if (kind_ == Kind::Fused) fill = dark ? QColor(55, 45, 66) : QColor(246, 238, 255);
    p->setPen(QPen(isSelected() ? QApplication::palette().color(QPalette::Highlight) : edge,
                   isSelected() ? 2.5 : 1.4));
    p->setBrush(fill);
    const double radius = (kind_ == Kind::Input || kind_ == Kind::Param) ? h_ / 2 : 6;
    p->drawRoundedRect(boundingRect().adjusted(1, 1, -1, -1), radius, radius);
    const QColor text = dark ? QColor(230, 230, 230) : QColor(30, 30, 30);
    p->setPen(text);
    QFont f = p->font();
    f.setPointSizeF(8.5);
    f.setBold(kind_ != Kind::Input && kind_ != Kind::Param);
    p->setFont(f);
    if (kind_ == Kind::Input || kind_ == Kind::Param) {
      p->drawText(boundingRect().adjusted(10, 0, -10, 0), Qt::AlignCenter, title_ + "  " + detail_);
      return;
    }
    p->drawText(QRectF(-kBoxW / 2 + 8, 3, kBoxW - 16, 16), Qt::AlignLeft | Qt::AlignVCenter,
                title_);
    f.setBold(false);
    f.setPointSizeF(7.5);
    p->setFont(f);
    p->setPen(dark ? QColor(170, 170, 170) : QColor(90, 90, 90));
    p->drawText(QRectF(-kBoxW / 2 + 8, 3, kBoxW - 16, 16), Qt::AlignRight | Qt::AlignVCenter,
                label_);
    p->setPen(text);
    p->drawText(QRectF(-kBoxW / 2 + 8, 22, kBoxW - 16, 18), Qt::AlignLeft | Qt::AlignVCenter,
                detail_);
  }

 private:
  Kind kind_;
  QString title_, detail_, label_;
  double h_;
};

// The view: wheel zoom and drag to pan, as on the canvas.
class IrGraphView : public QGraphicsView {
 public:
  using QGraphicsView::QGraphicsView;

 protected:
  void wheelEvent(QWheelEvent* e) override {
    if (e->modifiers() & Qt::ShiftModifier) return QGraphicsView::wheelEvent(e);
    const double f = std::pow(1.0015, e->angleDelta().y()), s = transform().m11() * f;
    if (s > 0.1 && s < 4) scale(f, f);
    e->accept();
  }
};

}  // namespace

IrLayout layout_ir(const Graph& g, bool forward_only) {
  // The shared layout (scripting/notebook/ir_layout.h): forward above, backward below; rows
  // centred on x = 0, one box pitch apart, every row kBoxH + kGapY below the one above.
  const lua::IrLayoutOptions options{.forward_only = forward_only, .backward_below = true};
  lua::IrRanks r = lua::rank_ir(g, options);
  lua::place_ir_rows(g, r, options, 0, [](size_t k, size_t count) {
    const double width = static_cast<double>(count) * (kBoxW + kGapX);
    return -width / 2 + static_cast<double>(k) * (kBoxW + kGapX) + kBoxW / 2;
  });
  IrLayout out;
  out.drawn = r.drawn;
  out.node_pos.assign(g.nodes().size(), {});
  out.value_pos.assign(g.values().size(), std::nullopt);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (r.drawn[i]) out.node_pos[i] = QPointF(r.node_x[i], r.node_rank[i] * (kBoxH + kGapY));
  for (size_t v = 0; v < g.values().size(); ++v)
    if (r.source_rank[v] >= 0)
      out.value_pos[v] =
          QPointF(r.value_x[v], r.source_rank[v] * (kBoxH + kGapY) + (kBoxH - kSourceH));
  return out;
}

StepView::StepView(DocumentModel* model, QWidget* parent)
    : QWidget(parent),
      model_(model),
      stages_(new QComboBox),
      summary_(new QLabel),
      scene_(new QGraphicsScene(this)) {
  view_ = new IrGraphView(scene_);
  view_->setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  view_->setDragMode(QGraphicsView::ScrollHandDrag);
  view_->setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  stages_->setToolTip("Which form of the training step to draw");
  stages_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  summary_->setWordWrap(true);
  auto* top = new QHBoxLayout;
  top->setContentsMargins(8, 6, 8, 2);
  top->addWidget(new QLabel("Show:"));
  top->addWidget(stages_);
  top->addWidget(summary_, 1);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(0);
  lay->addLayout(top);
  lay->addWidget(view_, 1);
  rebuild_timer_.setSingleShot(true);
  rebuild_timer_.setInterval(250);
  connect(&rebuild_timer_, &QTimer::timeout, this, &StepView::rebuild);
  connect(model_, &DocumentModel::changed, this, [this] {
    stale_ = true;
    if (isVisible()) rebuild_timer_.start();
  });
  connect(stages_, &QComboBox::currentIndexChanged, this, [this] { draw(); });
  connect(scene_, &QGraphicsScene::selectionChanged, this, [this] {
    for (QGraphicsItem* it : scene_->selectedItems())
      if (auto* box = dynamic_cast<IrBox*>(it); box && !box->documentNode().isEmpty())
        Q_EMIT nodeActivated(box->documentNode());
  });
}

void StepView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (stale_) rebuild();
}

int StepView::stageCount() const {
  return stages_->count();
}
int StepView::stage() const {
  return stages_->currentIndex();
}

void StepView::showStage(int stage) {
  if (stale_) rebuild();
  if (stage >= 0 && stage < stages_->count()) stages_->setCurrentIndex(stage);
  draw();
}

void StepView::showOptimised() {
  if (stale_) rebuild();
  showStage(stages_->count() - 1);
}

void StepView::rebuild() {
  stale_ = false;
  rebuild_timer_.stop();
  step_.reset();
  message_.clear();
  const nodes::Document& doc = model_->doc();
  const auto& data = model_->dataContext();
  if (!data) {
    message_ = model_->datasetError().isEmpty()
                   ? "Waiting for the dataset's description…"
                   : "The dataset cannot be read: " + model_->datasetError();
  } else if (!model_->analysis().complete()) {
    const auto& a = model_->analysis();
    std::string why =
        a.problems.empty() ? "a node has no shapes yet (see the canvas)" : a.problems.front();
    message_ = "The step cannot be built yet: " + QString::fromStdString(why);
  } else {
    // The step exactly as the trainer builds it: the same lowering, options and passes.
    const std::string source = model_->path().empty() ? "untitled.mls" : model_->path();
    auto m = nodes::lower(doc, *data, doc.training.batch_size, true, source);
    if (!m) {
      message_ = QString::fromStdString(m.error().message);
    } else {
      // On the project's device: its kernels decide what the passes fuse and where
      // constants are folded, so a Vulkan project shows the step Vulkan runs.
      auto backend = backend_registry().open(doc.training.device);
      if (!backend) {
        message_ = "The step cannot be built: " + QString::fromStdString(backend.error().message);
      } else {
        StepOptions o = step_options(nodes::train_config(doc.training));
        o.keep_stages = true;
        auto s = build_step(std::move(*m), **backend, o);
        if (!s)
          message_ = QString::fromStdString(s.error().message);
        else
          step_ = std::move(*s);
      }
    }
  }
  const int previous = stages_->currentIndex();
  const bool was_last = previous >= 0 && previous == stages_->count() - 1;
  QSignalBlocker block(stages_);
  stages_->clear();
  if (step_) {
    stages_->addItem("Forward");
    stages_->addItem("Forward + backward (autodiff)");
    for (size_t i = 1; i < step_->stages.size(); ++i) {
      const bool last = i + 1 == step_->stages.size();
      stages_->addItem(QString::fromStdString((last ? "Optimised step — after " : "After ") +
                                              step_->stages[i].name));
    }
    int want = previous < 0 ? kBackward : (was_last ? stages_->count() - 1 : previous);
    stages_->setCurrentIndex(std::clamp(want, 0, stages_->count() - 1));
  }
  draw();
}

QString StepView::summary() const {
  return summary_->text();
}

void StepView::draw() {
  scene_->clear();
  drawn_nodes_ = 0;
  if (!step_) {
    summary_->setText(message_);
    auto* t = scene_->addText(message_);
    t->setDefaultTextColor(QApplication::palette().color(QPalette::WindowText));
    return;
  }
  const int stage = std::max(0, stages_->currentIndex());
  const bool forward_only = stage == kForward;
  const Graph& g = step_->stages[stage <= kBackward ? 0 : static_cast<size_t>(stage - 1)].graph;
  // Ops the passes made (absent from the step autodiff produced): fused kernels.
  std::set<std::string> autodiff_ops;
  for (const Node& n : step_->stages.front().graph.nodes()) autodiff_ops.insert(n.op->name);
  const IrLayout lay = layout_ir(g, forward_only);
  std::set<int32_t> output_values;
  for (Ref r : g.outputs()) output_values.insert(r.id);
  const bool dark = dark_theme();
  // Sources first, then nodes; wires from each input's box to the node.
  std::map<int32_t, QPointF> bottom_of;  // value id -> where its wire starts
  for (size_t v = 0; v < lay.value_pos.size(); ++v) {
    if (!lay.value_pos[v]) continue;
    const Value& val = g.values()[v];
    auto kind = val.kind == ValueKind::Param ? IrBox::Kind::Param : IrBox::Kind::Input;
    auto* box =
        new IrBox(kind, QString::fromStdString(val.name), type_text(val.type), {}, kSourceH);
    box->setPos(*lay.value_pos[v]);
    box->setToolTip(QString::fromStdString(
                        (val.kind == ValueKind::Param ? "parameter %" : "input %") + val.name) +
                    " : " + type_text(val.type));
    scene_->addItem(box);
    bottom_of[static_cast<int32_t>(v)] = *lay.value_pos[v] + QPointF(0, kSourceH);
  }
  int fused = 0, backward = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!lay.drawn[i]) continue;
    const Node& n = g.nodes()[i];
    const bool made_by_passes = !autodiff_ops.count(n.op->name);
    IrBox::Kind kind = made_by_passes ? IrBox::Kind::Fused
                       : n.backward   ? IrBox::Kind::Backward
                                      : IrBox::Kind::Forward;
    fused += made_by_passes;
    backward += n.backward;
    QString detail;
    for (Ref o : n.outputs) detail += (detail.isEmpty() ? "" : ", ") + type_text(g.type_of(o));
    auto* box = new IrBox(kind, QString::fromStdString(n.op->name), detail,
                          QString::fromStdString(n.label), kBoxH);
    box->setPos(lay.node_pos[i]);
    QString tip = QString::fromStdString(n.op->name) + (n.backward ? "  (backward of " : "  (") +
                  QString::fromStdString(n.label.empty() ? "the step" : n.label) + ")\n";
    for (Ref in : n.inputs)
      tip += "  in  " + QString::fromStdString(g.value_name(in)) + " : " +
             type_text(g.type_of(in)) + "\n";
    for (Ref o : n.outputs) {
      tip += "  out " + QString::fromStdString(g.value_name(o)) + " : " + type_text(g.type_of(o));
      if (output_values.count(o.id)) tip += "  → an output of the step";
      tip += "\n";
    }
    if (made_by_passes) tip += "made by the compiler's passes (fused kernel)";
    box->setToolTip(tip.trimmed());
    scene_->addItem(box);
    ++drawn_nodes_;
    for (Ref o : n.outputs) bottom_of[o.id] = lay.node_pos[i] + QPointF(0, kBoxH);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!lay.drawn[i]) continue;
    const Node& n = g.nodes()[i];
    const QPointF to = lay.node_pos[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto from = bottom_of.find(n.inputs[k].id);
      if (from == bottom_of.end()) continue;  // a constant
      // Inputs enter the box's top edge side by side.
      const double spread =
          n.inputs.size() > 1 ? (static_cast<double>(k) / (n.inputs.size() - 1) - 0.5) * 60 : 0;
      const QPointF end = to + QPointF(spread, 0);
      QPainterPath path(from->second);
      const double dy = std::max(20.0, (end.y() - from->second.y()) / 2);
      path.cubicTo(from->second + QPointF(0, dy), end - QPointF(0, dy), end);
      QColor c = n.backward ? QColor(230, 130, 40, 170)
                            : (dark ? QColor(150, 160, 180, 170) : QColor(110, 120, 140, 170));
      auto* wire = scene_->addPath(path, QPen(c, 1.3));
      wire->setZValue(-1);
    }
  }
  const auto& front = step_->stages.front().graph;
  size_t fwd_nodes = 0;
  for (const Node& n : front.nodes()) fwd_nodes += !n.backward;
  QString text = QString("%1 nodes drawn").arg(drawn_nodes_);
  if (stage == kForward)
    text += QString(" — the model as lowered (batch %1)").arg(model_->doc().training.batch_size);
  else if (stage == kBackward)
    text += QString(": %1 forward, %2 backward that autodiff appended (orange), before any pass")
                .arg(fwd_nodes)
                .arg(backward);
  else
    text +=
        QString(": %1 backward, %2 fused kernels the passes made (violet); autodiff's step had %3")
            .arg(backward)
            .arg(fused)
            .arg(front.nodes().size());
  summary_->setText(text);
  scene_->setSceneRect(scene_->itemsBoundingRect().adjusted(-60, -60, 60, 60));
  view_->resetTransform();
  view_->centerOn(scene_->sceneRect().center().x(), scene_->sceneRect().top());
}

}  // namespace mls::editor
