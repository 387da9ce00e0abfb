#include "editor/graph_diff_view.h"

#include <QFutureWatcher>
#include <QGraphicsRectItem>
#include <QGraphicsView>
#include <QLabel>
#include <QListWidget>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>

#include "editor/canvas.h"
#include "editor/document_model.h"
#include "store/run_store.h"

namespace mls::editor {

namespace {

const QColor kAdded(70, 190, 90), kRemoved(225, 70, 70), kChanged(240, 170, 40);

// A run's snapshot as a document, or why there is none to draw.
struct Side {
  std::optional<nodes::Document> doc;
  QString title, problem;
};

Side read_side(store::RunStore& st, int64_t id) {
  Side s;
  s.title = QString("run %1").arg(id);
  auto info = st.get_run(id);
  if (!info) {
    s.problem = QString::fromStdString(info.error().message);
    return s;
  }
  s.title += " · " + QString::fromStdString(info->name);
  auto snap = st.snapshot(id);
  if (!snap) {
    s.problem = QString::fromStdString(snap.error().message);
  } else if (!*snap) {
    s.problem = QString("run %1 kept no snapshot of what it trained").arg(id);
  } else if ((*snap)->kind != "mls") {
    s.problem = QString("run %1 trained a Lua script: there is no graph to draw").arg(id);
  } else {
    auto d = nodes::parse_document((*snap)->text, "run " + std::to_string(id),
                                   nodes::GraphCheck::Salvage);
    if (d)
      s.doc = std::move(*d);
    else
      s.problem = QString::fromStdString(d.error().message);
  }
  return s;
}

}  // namespace

GraphDiffView::GraphDiffView(QWidget* parent)
    : QWidget(parent),
      model_a_(new DocumentModel(this)),
      model_b_(new DocumentModel(this)),
      scene_a_(new CanvasScene(model_a_, this)),
      scene_b_(new CanvasScene(model_b_, this)),
      view_a_(new QGraphicsView(scene_a_)),
      view_b_(new QGraphicsView(scene_b_)),
      title_a_(new QLabel),
      title_b_(new QLabel),
      message_(new QLabel),
      lines_(new QListWidget) {
  setObjectName("runs.diff");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* sides = new QSplitter(Qt::Horizontal);
  for (auto [view, title] : {std::pair{view_a_, title_a_}, std::pair{view_b_, title_b_}}) {
    auto* box = new QWidget;
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    title->setText("—");
    v->addWidget(title);
    view->setInteractive(false);  // read only: nothing here edits a run's graph
    view->setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    view->setDragMode(QGraphicsView::ScrollHandDrag);
    view->setMinimumSize(160, 60);
    v->addWidget(view, 1);
    sides->addWidget(box);
  }
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(sides);
  lines_->setObjectName("runs.diff.lines");
  split->addWidget(lines_);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 1);
  message_->setWordWrap(true);
  message_->setText("Select two runs and press Diff graphs");
  layout->addWidget(message_);
  layout->addWidget(split, 1);
  for (CanvasScene* s : {scene_a_, scene_b_})
    connect(s, &CanvasScene::laidOut, this, [this] {
      QTimer::singleShot(0, this, [this] {
        mark();
        fit();
      });
    });
}

GraphDiffView::~GraphDiffView() {
  // The scenes read the models: they go first.
  delete view_a_;
  delete view_b_;
  delete scene_a_;
  delete scene_b_;
}

QString GraphDiffView::message() const {
  return message_->text();
}

void GraphDiffView::showRuns(const std::string& db, int64_t a, int64_t b) {
  const int request = ++request_;
  message_->setText(QString("reading runs %1 and %2...").arg(a).arg(b));
  auto* watcher = new QFutureWatcher<std::pair<Side, Side>>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, request] {
    watcher->deleteLater();
    if (request != request_) return;
    auto [sa, sb] = watcher->result();
    if (!sa.doc || !sb.doc) {
      message_->setText(!sa.problem.isEmpty() ? sa.problem : sb.problem);
      Q_EMIT loaded();
      return;
    }
    showDocuments(*sa.doc, sa.title, *sb.doc, sb.title);
  });
  watcher->setFuture(QtConcurrent::run([db, a, b]() -> std::pair<Side, Side> {
    auto st = store::RunStore::open_read_only(db);
    if (!st) {
      Side s;
      s.problem = QString::fromStdString(st.error().message);
      return {s, s};
    }
    return {read_side(**st, a), read_side(**st, b)};
  }));
}

void GraphDiffView::showDocuments(const nodes::Document& a, const QString& a_title,
                                  const nodes::Document& b, const QString& b_title) {
  diff_ = nodes::diff_documents(a, b);
  for (auto& m : marks_) m.clear();
  for (const std::string& id : diff_.removed_nodes()) marks_[0].emplace_back(id, "removed");
  for (const std::string& id : diff_.added_nodes()) marks_[1].emplace_back(id, "added");
  for (const std::string& id : diff_.changed_nodes()) {
    marks_[0].emplace_back(id, "changed");
    marks_[1].emplace_back(id, "changed");
  }
  model_a_->reset(a);
  model_b_->reset(b);
  title_a_->setText(a_title + "  (A)");
  title_b_->setText(b_title + "  (B)");
  lines_->clear();
  for (const nodes::DiffEntry& e : diff_.entries) {
    auto* item = new QListWidgetItem(QString::fromStdString(nodes::diff_line(e)));
    item->setForeground(e.kind == nodes::DiffKind::Added     ? kAdded
                        : e.kind == nodes::DiffKind::Removed ? kRemoved
                                                             : kChanged);
    lines_->addItem(item);
  }
  message_->setText(diff_.empty()
                        ? "The two runs trained the same graph and settings"
                        : QString("%1 difference%2: %3 nodes added (green), %4 removed (red), "
                                  "%5 changed (amber)")
                              .arg(diff_.entries.size())
                              .arg(diff_.entries.size() == 1 ? "" : "s")
                              .arg(diff_.added_nodes().size())
                              .arg(diff_.removed_nodes().size())
                              .arg(diff_.changed_nodes().size()));
  mark();
  fit();
  // The views have their sizes once shown: fit again then.
  QTimer::singleShot(0, this, [this] { fit(); });
  Q_EMIT loaded();
}

QString GraphDiffView::markOf(int side, const std::string& node) const {
  // "changed" for a node that is changed on a side, unless it was added or removed there.
  QString found;
  for (const auto& [id, what] : marks_[side == 0 ? 0 : 1])
    if (id == node && (found.isEmpty() || what != "changed")) found = what;
  return found;
}

void GraphDiffView::mark() {
  for (int side = 0; side < 2; ++side) {
    CanvasScene* scene = side == 0 ? scene_a_ : scene_b_;
    for (QGraphicsItem* it : scene->items())
      if (it->data(1).toBool()) delete it;
    for (const auto& [id, what] : marks_[side]) {
      NodeItem* node = scene->nodeItem(id);
      if (!node || markOf(side, id) != what) continue;
      const QColor c = what == "added" ? kAdded : what == "removed" ? kRemoved : kChanged;
      auto* r = scene->addRect(node->bodySceneRect().adjusted(-5, -5, 5, 5), QPen(c, 3));
      QColor fill = c;
      fill.setAlpha(45);
      r->setBrush(fill);
      r->setZValue(50);
      r->setData(1, true);
      r->setToolTip(QString::fromStdString(id) + ": " + what);
    }
  }
}

void GraphDiffView::fit() {
  for (QGraphicsView* v : {view_a_, view_b_}) {
    QRectF r = v->scene()->itemsBoundingRect();
    if (r.isEmpty()) continue;
    v->fitInView(r.adjusted(-30, -30, 30, 30), Qt::KeepAspectRatio);
    if (v->transform().m11() > 1) v->setTransform(QTransform());
  }
}

}  // namespace mls::editor
