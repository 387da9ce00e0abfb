#include "editor/canvas.h"

#include <QApplication>
#include <QClipboard>
#include <QGraphicsSceneMouseEvent>
#include <QKeyEvent>
#include <QMimeData>
#include <QPainter>
#include <QPainterPathStroker>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "nodes/onnx_export.h"

namespace mls::editor {

namespace {

constexpr const char* kClipboardMime = "application/x-mlstudio-nodes";

double snap(double v) {
  return std::round(v / CanvasScene::kGrid) * CanvasScene::kGrid;
}

// Starting values for parameters a type requires, so a dropped node is valid at once; the
// inspector changes them.
nlohmann::json starting_params(const nodes::NodeTypeDef& def) {
  nlohmann::json p = nlohmann::json::object();
  for (const nodes::ParamDef& d : def.params) {
    if (!d.required) continue;
    if (d.name == "out_channels")
      p[d.name] = 16;
    else if (d.name == "num_embeddings")
      p[d.name] = 1000;
    else if (d.kind == nodes::ParamKind::Int)
      p[d.name] = 64;
    else if (d.kind == nodes::ParamKind::Float)
      p[d.name] = d.min.value_or(0.0);
    else if (d.name == "shape")
      p[d.name] = "-1";
  }
  return p;
}

std::optional<QPointF> layout_pos(const nodes::Document& doc, const std::string& id) {
  auto it = doc.layout.find(id);
  if (it == doc.layout.end() || !it->is_object() || !it->contains("x") || !it->contains("y"))
    return std::nullopt;
  return QPointF((*it)["x"].get<double>(), (*it)["y"].get<double>());
}

constexpr double kColumnGap = 80;  // between layout columns: room for wires and their labels
constexpr double kRowGap = 60;
constexpr double kClear = 14;      // how far a wire routed around a node keeps from it
constexpr double kStub = 20;       // a routed wire leaves and enters its ports horizontally
constexpr double kMinZoom = 0.02;  // Fit goes as far out as a graph needs, down to this

// The editor's layered layout: a column per step from the inputs (the longest path), a node
// on its first predecessor's row so a chain reads as one line, a node with no inputs (the
// labels) in the column just before the first node that reads it. Columns are as wide as
// their widest node plus a gap; rows as high as the tallest node plus a gap.
std::map<std::string, QPointF> layered_positions(const nodes::Document& doc,
                                                 const std::map<std::string, NodeItem*>& items) {
  std::map<std::string, std::vector<std::string>> preds, succs;
  for (const nodes::LinkDoc& l : doc.links) {
    preds[l.to_node].push_back(l.from_node);
    succs[l.from_node].push_back(l.to_node);
  }
  std::map<std::string, int> depth;
  for (const auto& n : doc.nodes) depth[n.id] = 0;
  // Longest path by relaxation; at most as many rounds as nodes (a cycle cannot loop it).
  for (size_t round = 0; round < doc.nodes.size(); ++round) {
    bool moved = false;
    for (const nodes::LinkDoc& l : doc.links)
      if (depth.count(l.from_node) && depth.count(l.to_node) &&
          depth[l.to_node] < depth[l.from_node] + 1) {
        depth[l.to_node] = depth[l.from_node] + 1;
        moved = true;
      }
    if (!moved) break;
  }
  for (const auto& n : doc.nodes) {
    if (!preds[n.id].empty() || succs[n.id].empty()) continue;
    int first = std::numeric_limits<int>::max();
    for (const std::string& s : succs[n.id])
      if (depth.count(s)) first = std::min(first, depth[s]);
    depth[n.id] = std::max(0, first - 1);
  }
  auto size_of = [&](const std::string& id) {
    auto it = items.find(id);
    return it != items.end() && it->second ? it->second->bodySceneRect().size()
                                           : QSizeF(NodeItem::kWidth, 100);
  };
  std::map<int, double> col_width;
  double row_height = 0;
  for (const auto& n : doc.nodes) {
    col_width[depth[n.id]] = std::max(col_width[depth[n.id]], size_of(n.id).width());
    row_height = std::max(row_height, size_of(n.id).height());
  }
  std::map<int, double> col_x;
  double x = 40;
  for (const auto& [col, w] : col_width) {
    col_x[col] = x;
    x += std::ceil((w + kColumnGap) / CanvasScene::kGrid) * CanvasScene::kGrid;
  }
  const double row_step =
      std::ceil((row_height + kRowGap) / CanvasScene::kGrid) * CanvasScene::kGrid;
  // Rows column by column: nodes fed by others first, each at its first predecessor's row or
  // the next free one below; then the nodes without inputs.
  std::map<std::string, int> row;
  std::map<int, std::set<int>> taken;
  for (const auto& [col, w] : col_width) {
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& n : doc.nodes) {
        if (depth[n.id] != col || (pass == 0) == preds[n.id].empty()) continue;
        int want = 0;
        if (!preds[n.id].empty() && row.count(preds[n.id][0])) want = row[preds[n.id][0]];
        while (taken[col].count(want)) ++want;
        taken[col].insert(want);
        row[n.id] = want;
      }
  }
  std::map<std::string, QPointF> out;
  for (const auto& n : doc.nodes)
    out[n.id] = QPointF(col_x[depth[n.id]], 60 + row_step * row[n.id]);
  return out;
}

std::vector<NodeBody> bodies_of(const std::map<std::string, NodeItem*>& items) {
  std::vector<NodeBody> out;
  for (const auto& [id, item] : items)
    if (item) out.push_back({id, item->bodySceneRect()});
  return out;
}

// A polyline with its corners rounded.
QPainterPath rounded_polyline(std::vector<QPointF> pts, double radius) {
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  QPainterPath p(pts.front());
  for (size_t i = 1; i + 1 < pts.size(); ++i) {
    const QPointF a = pts[i - 1], b = pts[i], c = pts[i + 1];
    const double ab = QLineF(a, b).length(), bc = QLineF(b, c).length();
    const double r = std::min({radius, ab / 2, bc / 2});
    p.lineTo(b + (a - b) * (r / ab));
    p.quadTo(b, b + (c - b) * (r / bc));
  }
  p.lineTo(pts.back());
  return p;
}

// The nodes' bodies a path passes through (a stroke a few pixels wide): all but the wire's
// own ends, and those too for `middle` (the part away from the ports).
std::vector<QRectF> bodies_crossed(const QPainterPath& path, const QPainterPath* middle,
                                   const std::string& from, const std::string& to,
                                   const std::vector<NodeBody>& bodies) {
  QPainterPathStroker s;
  s.setWidth(6);
  const QPainterPath stroke = s.createStroke(path);
  const QPainterPath middle_stroke = middle ? s.createStroke(*middle) : QPainterPath();
  std::vector<QRectF> hit;
  for (const NodeBody& b : bodies) {
    const bool end = b.id == from || b.id == to;
    if (end ? middle && middle_stroke.intersects(b.rect) : stroke.intersects(b.rect))
      hit.push_back(b.rect);
  }
  return hit;
}

// A wire's path: the usual curve where it crosses no other node; else a channel above or below
// the nodes in its way (whichever is the shorter detour), so no wire looks like it feeds a node
// it passes, and a skip connection shows beside the block it skips.
QPainterPath route_wire(QPointF f, QPointF t, const std::string& from, const std::string& to,
                        const std::vector<NodeBody>& bodies) {
  QPainterPath direct = WireItem::curve(f, t);
  const std::vector<QRectF> blocked = bodies_crossed(direct, nullptr, from, to, bodies);
  if (blocked.empty()) return direct;
  std::optional<QPainterPath> best;
  double best_cost = 0;
  for (const int dir : {-1, 1}) {  // above first: it wins a tie
    double level = dir < 0 ? std::min(f.y(), t.y()) : std::max(f.y(), t.y());
    auto beyond = [&](const std::vector<QRectF>& rects) {
      for (const QRectF& r : rects)
        level = dir < 0 ? std::min(level, r.top() - kClear) : std::max(level, r.bottom() + kClear);
    };
    beyond(blocked);
    for (int i = 0; i < 16; ++i) {
      const double x1 = f.x() + kStub, x2 = t.x() - kStub;
      const QPainterPath path =
          rounded_polyline({f, {x1, f.y()}, {x1, level}, {x2, level}, {x2, t.y()}, t}, 10);
      const QPainterPath middle =
          rounded_polyline({{x1, f.y()}, {x1, level}, {x2, level}, {x2, t.y()}}, 10);
      const std::vector<QRectF> hit = bodies_crossed(path, &middle, from, to, bodies);
      if (hit.empty()) {
        const double cost = std::abs(level - f.y()) + std::abs(level - t.y());
        if (!best || cost < best_cost) best = path, best_cost = cost;
        break;
      }
      beyond(hit);
    }
  }
  return best ? *best : direct;
}

// Where a wire's label goes: on the wire's middle, else just above or below it, else moved up
// past the nodes it would cover (between close nodes the nodes would hide it).
QRectF place_label(QSizeF size, const QPainterPath& path, const std::vector<NodeBody>& bodies) {
  if (size.isEmpty()) return {};
  auto free = [&](const QRectF& r) {
    for (const NodeBody& b : bodies)
      if (b.rect.intersects(r)) return false;
    return true;
  };
  const QPointF mid = path.pointAtPercent(0.5);
  QRectF r(QPointF(), size);
  r.moveCenter(mid);
  QRectF above = r, below = r;
  above.moveBottom(mid.y() - 4);
  below.moveTop(mid.y() + 4);
  for (const QRectF& c : {r, above, below})
    if (free(c)) return c;
  QRectF c = above;
  for (int i = 0; i < 16; ++i) {
    double top = c.bottom();
    bool hit = false;
    for (const NodeBody& b : bodies)
      if (b.rect.intersects(c)) top = std::min(top, b.rect.top()), hit = true;
    if (!hit) return c;
    c.moveBottom(top - 4);
  }
  return r;
}

}  // namespace

CanvasScene::CanvasScene(DocumentModel* model, QObject* parent)
    : QGraphicsScene(parent), model_(model) {
  setSceneRect(-2000, -2000, 6000, 5000);
  connect(model_, &DocumentModel::changed, this, &CanvasScene::sync);
  connect(model_, &DocumentModel::reloaded, this, [this] {
    // Another document: its nodes are placed afresh, even where an id is the same.
    for (auto& [id, item] : items_) delete item;
    items_.clear();
    setRunInsights({});
  });
  connect(this, &QGraphicsScene::selectionChanged, this, [this] {
    auto ids = selectedNodeIds();
    Q_EMIT selectionChangedTo(ids.size() == 1 ? ids[0] : std::string());
  });
  sync();
}

NodeItem* CanvasScene::nodeItem(const std::string& id) const {
  auto it = items_.find(id);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<WireItem*> CanvasScene::wires() const {
  return wires_;
}

std::vector<std::string> CanvasScene::selectedNodeIds() const {
  std::vector<std::string> ids;
  for (QGraphicsItem* it : selectedItems())
    if (it->type() == NodeItem::Type) ids.push_back(static_cast<NodeItem*>(it)->id());
  return ids;
}

void CanvasScene::selectNode(const std::string& id) {
  clearSelection();
  if (NodeItem* n = nodeItem(id)) n->setSelected(true);
}

void CanvasScene::sync() {
  const nodes::Document& doc = model_->doc();
  const nodes::DocumentAnalysis& a = model_->analysis();
  const nodes::NodeCatalogue& cat = nodes::builtin_catalogue();
  std::set<std::string> ids;
  for (const auto& n : doc.nodes) ids.insert(n.id);
  for (auto it = items_.begin(); it != items_.end();) {
    if (!ids.count(it->first)) {
      delete it->second;
      it = items_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& n : doc.nodes) {
    NodeItem*& item = items_[n.id];
    if (!item) {
      item = new NodeItem(n.id, cat.find(n.type));
      addItem(item);
    }
    auto na = a.nodes.find(n.id);
    item->setAnalysis(na == a.nodes.end() ? nodes::NodeAnalysis{} : na->second);
    const nodes::NodeTypeDef* type = cat.find(n.type);
    item->setExportProblem(type && type->role == nodes::NodeRole::Layer
                               ? std::optional<std::string>(nodes::onnx_export_problem(n))
                               : std::nullopt);
    item->setLocked(doc.lab.student && n.locked);
    auto ri = run_info_.find(n.id);
    item->setRunInfo(ri == run_info_.end() ? std::nullopt : std::optional<NodeRunInfo>(ri->second));
  }
  // Positions, once the sizes are known. A document without a layout (the examples, a
  // script's graph) is laid out in layers.
  std::vector<std::string> unplaced;
  QRectF placed;
  bool any_in_doc = false;
  for (const auto& n : doc.nodes) any_in_doc = any_in_doc || layout_pos(doc, n.id).has_value();
  if (!any_in_doc && !doc.nodes.empty()) {
    // Laid out again on every change until a node is moved (then all keep their places): the
    // sizes grow when the data's shapes arrive.
    const auto pos = layered_positions(doc, items_);
    for (const auto& n : doc.nodes) {
      items_[n.id]->setPos(pos.at(n.id));
      items_[n.id]->setData(0, true);
    }
    Q_EMIT laidOut();
  }
  for (const auto& n : doc.nodes) {
    NodeItem* item = items_[n.id];
    if (auto p = layout_pos(doc, n.id)) {
      item->setPos(*p);
      item->setData(0, true);
    } else if (!item->data(0).toBool()) {
      unplaced.push_back(n.id);
      continue;
    }
    placed = placed.united(item->bodySceneRect());
  }
  // A node added without a position (a script's) goes below the placed ones.
  double x = placed.isNull() ? 40 : placed.left();
  const double y = placed.isNull() ? 60 : placed.bottom() + kRowGap;
  for (const std::string& id : unplaced) {
    items_[id]->setPos(snap(x), snap(y));
    items_[id]->setData(0, true);
    x += items_[id]->bodySceneRect().width() + kColumnGap;
  }
  rebuildFrames();
  rebuildWires();
  // The scene grows with the graph, so every node can be scrolled to.
  setSceneRect(sceneRect().united(itemsBoundingRect().adjusted(-1000, -1000, 1000, 1000)));
}

void CanvasScene::rebuildFrames() {
  for (FrameItem* f : frame_items_) delete f;
  frame_items_.clear();
  const auto frames = nodes::comment_frames(model_->doc());
  for (size_t i = 0; i < frames.size(); ++i) {
    // Commits arrive from the item's own mouse handler: queued, since the edit rebuilds it.
    auto commit = [this](int index, QRectF r) {
      QMetaObject::invokeMethod(
          this,
          [this, index, r] {
            auto all = nodes::comment_frames(model_->doc());
            if (index < 0 || index >= static_cast<int>(all.size())) return;
            nodes::CommentFrame f = all[static_cast<size_t>(index)];
            f.x = snap(r.x());
            f.y = snap(r.y());
            f.w = snap(r.width());
            f.h = snap(r.height());
            // The frame and the nodes it carried move in one undo step.
            model_->beginMacro("Move comment frame");
            commitMoves();
            (void)setFrame(index, f);
            model_->endMacro();
          },
          Qt::QueuedConnection);
    };
    auto rename = [this](int index) { Q_EMIT frameRenameRequested(index); };
    auto* item = new FrameItem(static_cast<int>(i), frames[i], commit, rename);
    addItem(item);
    frame_items_.push_back(item);
  }
}

void CanvasScene::addFrame(const QString& title, QPointF at) {
  QRectF r;
  for (const std::string& id : selectedNodeIds())
    if (NodeItem* n = nodeItem(id)) r = r.united(n->sceneBoundingRect());
  if (r.isNull())
    r = QRectF(at, QSizeF(320, 200));
  else
    r = r.adjusted(-20, -20 - FrameItem::kTitle, 20, 20);
  auto all = nodes::comment_frames(model_->doc());
  all.push_back({title.toStdString(), snap(r.x()), snap(r.y()), snap(r.width()), snap(r.height())});
  auto cmd = nodes::make_set_frames(model_->doc(), all, "Add comment frame");
  if (!cmd) return Q_EMIT message(QString::fromStdString(cmd.error().message), true);
  (void)model_->push(std::move(cmd));
}

Result<void> CanvasScene::setFrame(int index, const nodes::CommentFrame& frame) {
  auto all = nodes::comment_frames(model_->doc());
  if (index < 0 || index >= static_cast<int>(all.size()))
    return make_error("no comment frame " + std::to_string(index));
  all[static_cast<size_t>(index)] = frame;
  auto cmd = nodes::make_set_frames(model_->doc(), all, "Change comment frame");
  if (!cmd) {
    Q_EMIT message(QString::fromStdString(cmd.error().message), true);
    return cmd.error();
  }
  return model_->push(std::move(cmd));
}

Result<void> CanvasScene::renameFrame(int index, const QString& title) {
  auto all = nodes::comment_frames(model_->doc());
  if (index < 0 || index >= static_cast<int>(all.size()))
    return make_error("no comment frame " + std::to_string(index));
  nodes::CommentFrame f = all[static_cast<size_t>(index)];
  f.title = title.toStdString();
  return setFrame(index, f);
}

void CanvasScene::setRunInsights(std::map<std::string, NodeRunInfo> info) {
  run_info_ = std::move(info);
  sync();
}

void CanvasScene::followNodes() {
  const std::vector<NodeBody> bodies = bodies_of(items_);
  for (WireItem* w : wires_) routeWire(w, bodies);
}

void CanvasScene::routeWire(WireItem* w, const std::vector<NodeBody>& bodies) {
  const nodes::LinkDoc& l = w->link();
  NodeItem* from = nodeItem(l.from_node);
  NodeItem* to = nodeItem(l.to_node);
  if (!from || !to) return;
  QPainterPath path =
      route_wire(from->portScenePos(true, l.from_port), to->portScenePos(false, l.to_port),
                 l.from_node, l.to_node, bodies);
  const QRectF label = place_label(w->labelSize(), path, bodies);
  w->setRoute(std::move(path), label);
}

void CanvasScene::rebuildWires() {
  const nodes::Document& doc = model_->doc();
  const nodes::DocumentAnalysis& a = model_->analysis();
  std::set<std::pair<std::string, std::string>> selected;
  for (WireItem* w : wires_) {
    if (w->isSelected())
      selected.insert({w->link().from_node + ":" + w->link().from_port,
                       w->link().to_node + ":" + w->link().to_port});
    delete w;
  }
  wires_.clear();
  const std::vector<NodeBody> bodies = bodies_of(items_);
  for (const nodes::LinkDoc& l : doc.links) {
    NodeItem* from = nodeItem(l.from_node);
    NodeItem* to = nodeItem(l.to_node);
    if (!from || !to) continue;
    QString label;
    bool ok = false;
    auto na = a.nodes.find(l.from_node);
    if (na != a.nodes.end() && na->second.inferred && from->def()) {
      const int k = from->def()->output_index(l.from_port);
      if (k >= 0 && static_cast<size_t>(k) < na->second.outputs.size()) {
        label =
            QString::fromStdString(nodes::format_shape(na->second.outputs[static_cast<size_t>(k)]));
        ok = true;
      }
    }
    auto* w = new WireItem(l, from->portScenePos(true, l.from_port),
                           to->portScenePos(false, l.to_port), label, ok);
    addItem(w);
    routeWire(w, bodies);
    if (selected.count({l.from_node + ":" + l.from_port, l.to_node + ":" + l.to_port}))
      w->setSelected(true);
    wires_.push_back(w);
  }
}

std::optional<PortRef> CanvasScene::portAt(QPointF pos) const {
  for (QGraphicsItem* it : items(QRectF(pos - QPointF(12, 12), QSizeF(24, 24))))
    if (it->type() == NodeItem::Type)
      if (auto p = static_cast<NodeItem*>(it)->portAt(pos)) return p;
  return std::nullopt;
}

std::string CanvasScene::freshId(const std::string& type) const {
  std::string base = type.rfind("mls.", 0) == 0 ? type.substr(4) : type;
  for (char& c : base)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  for (int i = 1;; ++i) {
    std::string id = base + std::to_string(i);
    if (!nodes::find_node(model_->doc(), id)) return id;
  }
}

Result<void> CanvasScene::addNode(const std::string& type, QPointF pos) {
  const nodes::NodeTypeDef* def = nodes::builtin_catalogue().find(type);
  if (!def) return make_error("unknown node type '" + type + "'");
  const std::string id = freshId(type);
  auto r = model_->push(nodes::make_add_node(model_->doc(), id, type, starting_params(*def),
                                             nodes::LayoutPos{snap(pos.x()), snap(pos.y())}));
  if (!r) {
    Q_EMIT message(QString::fromStdString(r.error().message), true);
    return r;
  }
  selectNode(id);
  Q_EMIT message(QString::fromStdString("added " + id + " (" + def->display_name + ")"), false);
  return {};
}

Result<void> CanvasScene::connectPorts(const PortRef& a, const PortRef& b) {
  if (a.output == b.output) {
    std::string msg = "cannot link '" + a.key() + "' to '" + b.key() +
                      "': a link goes from an output to an input, and both are " +
                      (a.output ? "outputs" : "inputs");
    Q_EMIT message(QString::fromStdString(msg), true);
    return make_error(msg);
  }
  const PortRef& from = a.output ? a : b;
  const PortRef& to = a.output ? b : a;
  auto r = model_->push(nodes::make_connect(model_->doc(), from.key(), to.key()));
  if (!r) {
    Q_EMIT message(QString::fromStdString(r.error().message), true);
    return r;
  }
  Q_EMIT message(QString::fromStdString("linked " + from.key() + " → " + to.key()), false);
  return {};
}

void CanvasScene::deleteSelection() {
  std::vector<nodes::LinkDoc> links;
  std::vector<std::string> ids = selectedNodeIds();
  for (QGraphicsItem* it : selectedItems())
    if (it->type() == WireItem::Type) links.push_back(static_cast<WireItem*>(it)->link());
  std::vector<int> frames;
  for (QGraphicsItem* it : selectedItems())
    if (it->type() == FrameItem::Type) frames.push_back(static_cast<FrameItem*>(it)->index());
  if (links.empty() && ids.empty() && frames.empty()) return;
  model_->beginMacro(QString("Delete %1 item(s)").arg(links.size() + ids.size() + frames.size()));
  if (!frames.empty()) {
    std::vector<nodes::CommentFrame> kept;
    auto all = nodes::comment_frames(model_->doc());
    for (size_t i = 0; i < all.size(); ++i)
      if (std::find(frames.begin(), frames.end(), static_cast<int>(i)) == frames.end())
        kept.push_back(all[i]);
    if (auto cmd = nodes::make_set_frames(model_->doc(), kept, "Delete comment frame"))
      (void)model_->push(std::move(cmd));
  }
  for (const auto& l : links)
    (void)model_->push(nodes::make_disconnect(model_->doc(), l.from_node + ":" + l.from_port,
                                              l.to_node + ":" + l.to_port));
  for (const auto& id : ids) (void)model_->push(nodes::make_remove_node(model_->doc(), id));
  model_->endMacro();
}

void CanvasScene::copySelection() {
  const std::vector<std::string> ids = selectedNodeIds();
  if (ids.empty()) return;
  const std::set<std::string> picked(ids.begin(), ids.end());
  const nodes::Document& doc = model_->doc();
  nlohmann::json j{{"nodes", nlohmann::json::array()}, {"links", nlohmann::json::array()}};
  for (const auto& n : doc.nodes) {
    if (!picked.count(n.id)) continue;
    const QPointF p = nodeItem(n.id) ? nodeItem(n.id)->pos() : QPointF();
    j["nodes"].push_back(
        {{"id", n.id}, {"type", n.type}, {"params", n.params}, {"x", p.x()}, {"y", p.y()}});
  }
  for (const auto& l : doc.links)
    if (picked.count(l.from_node) && picked.count(l.to_node))
      j["links"].push_back(
          {{"from", l.from_node + ":" + l.from_port}, {"to", l.to_node + ":" + l.to_port}});
  auto* mime = new QMimeData;
  const QByteArray bytes = QByteArray::fromStdString(j.dump());
  mime->setData(kClipboardMime, bytes);
  mime->setText(QString::fromUtf8(bytes));
  QApplication::clipboard()->setMimeData(mime);
  Q_EMIT message(QString("copied %1 node(s)").arg(ids.size()), false);
}

void CanvasScene::paste() {
  const QMimeData* mime = QApplication::clipboard()->mimeData();
  if (!mime || !mime->hasFormat(kClipboardMime)) return;
  const auto j = nlohmann::json::parse(mime->data(kClipboardMime).toStdString(), nullptr, false);
  if (j.is_discarded() || !j.contains("nodes")) return;
  std::map<std::string, std::string> renamed;
  std::vector<std::string> added;
  model_->beginMacro(QString("Paste %1 node(s)").arg(j["nodes"].size()));
  for (const auto& n : j["nodes"]) {
    const std::string type = n.value("type", "");
    const std::string old_id = n.value("id", "");
    const std::string id = nodes::find_node(model_->doc(), old_id) ? freshId(type) : old_id;
    auto r = model_->push(nodes::make_add_node(
        model_->doc(), id, type, n.value("params", nlohmann::json::object()),
        nodes::LayoutPos{snap(n.value("x", 0.0) + 40), snap(n.value("y", 0.0) + 40)}));
    if (!r) {
      Q_EMIT message(QString::fromStdString(r.error().message), true);
      continue;
    }
    renamed[old_id] = id;
    added.push_back(id);
  }
  auto remap = [&](const std::string& key) {
    const auto colon = key.find(':');
    auto it = renamed.find(key.substr(0, colon));
    return it == renamed.end() ? std::string() : it->second + key.substr(colon);
  };
  for (const auto& l : j.value("links", nlohmann::json::array())) {
    const std::string from = remap(l.value("from", "")), to = remap(l.value("to", ""));
    if (!from.empty() && !to.empty())
      (void)model_->push(nodes::make_connect(model_->doc(), from, to));
  }
  model_->endMacro();
  clearSelection();
  for (const auto& id : added)
    if (NodeItem* n = nodeItem(id)) n->setSelected(true);
}

void CanvasScene::autoLayout() {
  const auto positions = layered_positions(model_->doc(), items_);
  model_->beginMacro("Auto-layout");
  for (const auto& [id, pos] : positions)
    (void)model_->push(nodes::make_move_node(model_->doc(), id, {pos.x(), pos.y()}));
  model_->endMacro();
}

void CanvasScene::commitMoves() {
  bool dragged = press_pos_.empty();
  for (const auto& [id, item] : items_) {
    auto it = press_pos_.find(id);
    dragged = dragged || it == press_pos_.end() || it->second != item->pos();
  }
  std::vector<std::pair<std::string, QPointF>> moved;
  for (const auto& [id, item] : items_) {
    const QPointF p(snap(item->pos().x()), snap(item->pos().y()));
    auto old = layout_pos(model_->doc(), id);
    // Unplaced nodes (an automatic layout) are placed for good once something is dragged.
    if (old ? *old != p : dragged) moved.push_back({id, p});
  }
  if (moved.empty()) return;
  if (moved.size() > 1) model_->beginMacro(QString("Move %1 nodes").arg(moved.size()));
  for (const auto& [id, p] : moved)
    (void)model_->push(nodes::make_move_node(model_->doc(), id, {p.x(), p.y()}));
  if (moved.size() > 1) model_->endMacro();
}

void CanvasScene::clearHighlights() {
  for (auto& [id, item] : items_) item->setHighlight(std::nullopt);
}

void CanvasScene::mousePressEvent(QGraphicsSceneMouseEvent* e) {
  press_pos_.clear();
  for (const auto& [id, item] : items_) press_pos_[id] = item->pos();
  if (e->button() == Qt::LeftButton)
    if (auto port = portAt(e->scenePos())) {
      drag_from_ = port;
      drag_wire_ = addPath(QPainterPath(), QPen(QColor(0xf0, 0xb4, 0x29), 2, Qt::DashLine));
      drag_wire_->setZValue(5);
      e->accept();
      return;
    }
  QGraphicsScene::mousePressEvent(e);
}

void CanvasScene::mouseMoveEvent(QGraphicsSceneMouseEvent* e) {
  if (drag_from_) {
    NodeItem* from = nodeItem(drag_from_->node);
    const QPointF a =
        from ? from->portScenePos(drag_from_->output, drag_from_->port) : e->scenePos();
    drag_wire_->setPath(drag_from_->output ? WireItem::curve(a, e->scenePos())
                                           : WireItem::curve(e->scenePos(), a));
    clearHighlights();
    QString refusal;
    if (auto target = portAt(e->scenePos()); target && target->node != drag_from_->node) {
      if (target->output == drag_from_->output) {
        refusal = "a link goes from an output to an input";
      } else {
        const PortRef& out = drag_from_->output ? *drag_from_ : *target;
        const PortRef& in = drag_from_->output ? *target : *drag_from_;
        auto check = nodes::make_connect(model_->doc(), out.key(), in.key());
        if (!check) refusal = QString::fromStdString(check.error().message);
      }
      if (refusal.isEmpty()) nodeItem(target->node)->setHighlight(target);
    }
    drag_wire_->setPen(QPen(refusal.isEmpty() ? QColor(0xf0, 0xb4, 0x29) : QColor(0xd6, 0x3c, 0x3c),
                            2, Qt::DashLine));
    if (!refusal.isEmpty())
      QToolTip::showText(e->screenPos(), refusal);
    else
      QToolTip::hideText();
    e->accept();
    return;
  }
  QGraphicsScene::mouseMoveEvent(e);
  // Wires follow nodes while they are dragged.
  if (e->buttons() & Qt::LeftButton && mouseGrabberItem() &&
      (mouseGrabberItem()->type() == NodeItem::Type ||
       mouseGrabberItem()->type() == FrameItem::Type))
    followNodes();
}

void CanvasScene::mouseReleaseEvent(QGraphicsSceneMouseEvent* e) {
  if (drag_from_) {
    const PortRef from = *drag_from_;
    drag_from_.reset();
    delete drag_wire_;
    drag_wire_ = nullptr;
    clearHighlights();
    QToolTip::hideText();
    if (auto target = portAt(e->scenePos());
        target && !(target->node == from.node && target->port == from.port))
      (void)connectPorts(from, *target);
    e->accept();
    return;
  }
  // A frame's drag commits its carried nodes with the frame (one undo step, queued).
  const bool frame_drag = mouseGrabberItem() && mouseGrabberItem()->type() == FrameItem::Type;
  QGraphicsScene::mouseReleaseEvent(e);
  if (e->button() == Qt::LeftButton && !frame_drag) commitMoves();
}

void CanvasScene::drawBackground(QPainter* p, const QRectF& rect) {
  const QPalette pal = QApplication::palette();
  const bool dark = pal.color(QPalette::Window).lightness() < 128;
  p->fillRect(rect, dark ? QColor(0x1b, 0x1c, 0x1f) : QColor(0xf1, 0xf2, 0xf4));
  p->setPen(QPen(dark ? QColor(0x33, 0x35, 0x3a) : QColor(0xd4, 0xd7, 0xdc), 1.5));
  const double g = kGrid * 2;
  for (double x = std::floor(rect.left() / g) * g; x < rect.right(); x += g)
    for (double y = std::floor(rect.top() / g) * g; y < rect.bottom(); y += g)
      p->drawPoint(QPointF(x, y));
}

CanvasView::CanvasView(CanvasScene* scene, QWidget* parent)
    : QGraphicsView(scene, parent), scene_(scene) {
  connect(scene_, &CanvasScene::laidOut, this, [this] {
    if (fitted_) fitAll();
  });
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  setDragMode(RubberBandDrag);
  setAcceptDrops(true);
  setTransformationAnchor(AnchorUnderMouse);
  setViewportUpdateMode(BoundingRectViewportUpdate);
  setFocusPolicy(Qt::StrongFocus);
}

Result<void> CanvasView::dropNodeType(const std::string& type, QPointF scene_pos) {
  return scene_->addNode(type, scene_pos - QPointF(NodeItem::kWidth / 2, NodeItem::kHeader / 2));
}

void CanvasView::zoomBy(double factor) {
  // Out of range only further out (or in): zooming back from a Fit below the range works.
  fitted_ = false;
  const double current = transform().m11();
  if ((factor < 1 && current * factor < 0.1) || (factor > 1 && current * factor > 4)) return;
  scale(factor, factor);
}

void CanvasView::fitAll() {
  QRectF r = scene_->itemsBoundingRect();
  if (r.isEmpty()) return;
  r.adjust(-40, -40, 40, 40);
  fitInView(r, Qt::KeepAspectRatio);
  // The whole graph, however small that makes it (zoom in to read); a small graph is not
  // blown up past 100 %.
  const double s = std::clamp(transform().m11(), kMinZoom, 1.0);
  setTransform(QTransform::fromScale(s, s));
  centerOn(r.center());
  fitted_ = true;
}

void CanvasView::resizeEvent(QResizeEvent* e) {
  const bool fitted = fitted_;
  QGraphicsView::resizeEvent(e);
  if (fitted) fitAll();
}

void CanvasView::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasFormat(kNodeTypeMime))
    e->acceptProposedAction();
  else
    QGraphicsView::dragEnterEvent(e);
}

void CanvasView::dragMoveEvent(QDragMoveEvent* e) {
  if (e->mimeData()->hasFormat(kNodeTypeMime))
    e->acceptProposedAction();
  else
    QGraphicsView::dragMoveEvent(e);
}

void CanvasView::dropEvent(QDropEvent* e) {
  if (!e->mimeData()->hasFormat(kNodeTypeMime)) return QGraphicsView::dropEvent(e);
  const std::string type = e->mimeData()->data(kNodeTypeMime).toStdString();
  (void)dropNodeType(type, mapToScene(e->position().toPoint()));
  e->acceptProposedAction();
}

void CanvasView::wheelEvent(QWheelEvent* e) {
  fitted_ = false;
  if (e->modifiers() & Qt::ShiftModifier) return QGraphicsView::wheelEvent(e);  // scroll
  zoomBy(std::pow(1.0015, e->angleDelta().y()));
  e->accept();
}

void CanvasView::keyPressEvent(QKeyEvent* e) {
  fitted_ = false;
  // Space held: drag to pan.
  if (e->key() == Qt::Key_Space && !e->isAutoRepeat()) {
    setDragMode(ScrollHandDrag);
    return;
  }
  QGraphicsView::keyPressEvent(e);
}

void CanvasView::keyReleaseEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Space && !e->isAutoRepeat()) {
    setDragMode(RubberBandDrag);
    return;
  }
  QGraphicsView::keyReleaseEvent(e);
}

void CanvasView::mousePressEvent(QMouseEvent* e) {
  fitted_ = false;  // the user works on the canvas: a resize keeps what they see
  // The middle button pans, as in most node editors.
  if (e->button() == Qt::MiddleButton) {
    setDragMode(ScrollHandDrag);
    QMouseEvent press(e->type(), e->position(), e->globalPosition(), Qt::LeftButton, Qt::LeftButton,
                      e->modifiers());
    QGraphicsView::mousePressEvent(&press);
    return;
  }
  QGraphicsView::mousePressEvent(e);
}

void CanvasView::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() == Qt::MiddleButton) {
    QMouseEvent release(e->type(), e->position(), e->globalPosition(), Qt::LeftButton, Qt::NoButton,
                        e->modifiers());
    QGraphicsView::mouseReleaseEvent(&release);
    setDragMode(RubberBandDrag);
    return;
  }
  QGraphicsView::mouseReleaseEvent(e);
}

}  // namespace mls::editor
