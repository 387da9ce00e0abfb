#include "scripting/notebook/graph_figure.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "nodes/catalogue.h"
#include "scripting/notebook/plot.h"

namespace mls::lua {

namespace {

constexpr double kBoxW = 168, kBoxH = 48, kGapX = 24, kGapY = 34, kMargin = 16, kTitle = 30;

std::string num(double v) {
  return plot::svg_num(v, 1);
}

// Fill and border by role, as the canvas colours its node headers.
std::pair<const char*, const char*> colours(const nodes::NodeDoc& n) {
  const nodes::NodeTypeDef* t = nodes::builtin_catalogue().find(n.type);
  if (!t) return {"#eeeeee", "#888888"};
  switch (t->role) {
    case nodes::NodeRole::DataInput:
    case nodes::NodeRole::DataLabels:
      return {"#e3f2e6", "#3f8f4f"};
    case nodes::NodeRole::Loss:
      return {"#f8e1e4", "#c0392b"};
    default:
      break;
  }
  return {"#e6eefa", "#3b6fb6"};
}

std::string shapes_text(const nodes::DocumentAnalysis& a, const std::string& id) {
  auto it = a.nodes.find(id);
  if (it == a.nodes.end() || !it->second.inferred) return "?";
  std::string s;
  for (const Shape& o : it->second.outputs) {
    s += s.empty() ? "[" : " [";
    for (size_t d = 0; d < o.size(); ++d)
      s += (d ? "," : "") + (o[d] < 0 ? std::string("N") : std::to_string(o[d]));
    s += "]";
  }
  return s.empty() ? "-" : s;
}

std::string short_text(std::string s, size_t max) {
  if (s.size() > max) s = s.substr(0, max - 1) + "…";
  return s;
}

}  // namespace

Figure graph_figure(const nodes::Document& doc, const nodes::DocumentAnalysis& analysis,
                    const std::string& title) {
  // Layers: the longest path from a node without inputs (a cycle, refused elsewhere, keeps
  // the nodes topological_order leaves out at layer 0).
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < doc.nodes.size(); ++i) index[doc.nodes[i].id] = i;
  std::vector<int> layer(doc.nodes.size(), 0);
  for (size_t i : nodes::topological_order(doc))
    for (const auto& l : doc.links)
      if (l.from_node == doc.nodes[i].id)
        if (auto it = index.find(l.to_node); it != index.end())
          layer[it->second] = std::max(layer[it->second], layer[i] + 1);
  // A source feeding only late nodes (the labels, for the loss) sits just above the first of
  // them, so its link does not cross the whole model.
  for (size_t i = 0; i < doc.nodes.size(); ++i) {
    bool fed = false;
    int first = -1;
    for (const auto& l : doc.links) {
      fed = fed || l.to_node == doc.nodes[i].id;
      if (l.from_node == doc.nodes[i].id)
        if (auto it = index.find(l.to_node); it != index.end())
          first = first < 0 ? layer[it->second] : std::min(first, layer[it->second]);
    }
    if (!fed && first > 0) layer[i] = first - 1;
  }
  const int layers = doc.nodes.empty() ? 0 : *std::max_element(layer.begin(), layer.end()) + 1;
  std::vector<std::vector<size_t>> rows(static_cast<size_t>(layers));
  for (size_t i = 0; i < doc.nodes.size(); ++i) rows[static_cast<size_t>(layer[i])].push_back(i);
  size_t widest = 1;
  for (const auto& r : rows) widest = std::max(widest, r.size());

  Figure f;
  f.title = title;
  f.width = static_cast<int>(2 * kMargin + widest * kBoxW + (widest - 1) * kGapX);
  f.width = std::max(f.width, 320);
  f.height =
      static_cast<int>(kTitle + 2 * kMargin + layers * kBoxH + std::max(0, layers - 1) * kGapY);
  // Each row centred.
  std::vector<std::pair<double, double>> pos(doc.nodes.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const double row_w = rows[r].size() * kBoxW + (rows[r].size() - 1) * kGapX;
    double x = (f.width - row_w) / 2;
    for (size_t i : rows[r]) {
      pos[i] = {x, kTitle + kMargin + r * (kBoxH + kGapY)};
      x += kBoxW + kGapX;
    }
  }
  std::string svg = plot::svg_open(f.width, f.height);
  if (!title.empty())
    svg += "<text x=\"" + num(f.width / 2.0) +
           "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" + plot::xml_escape(title) +
           "</text>\n";
  for (const auto& l : doc.links) {
    auto a = index.find(l.from_node), b = index.find(l.to_node);
    if (a == index.end() || b == index.end()) continue;
    const double x1 = pos[a->second].first + kBoxW / 2, y1 = pos[a->second].second + kBoxH;
    const double x2 = pos[b->second].first + kBoxW / 2, y2 = pos[b->second].second;
    const double my = (y1 + y2) / 2;
    svg += "<path d=\"M" + num(x1) + "," + num(y1) + " C" + num(x1) + "," + num(my) + " " +
           num(x2) + "," + num(my) + " " + num(x2) + "," + num(y2) +
           "\" fill=\"none\" stroke=\"#777\" stroke-width=\"1.3\"/>\n";
  }
  for (size_t i = 0; i < doc.nodes.size(); ++i) {
    const nodes::NodeDoc& n = doc.nodes[i];
    const auto [fill, stroke] = colours(n);
    const auto [x, y] = pos[i];
    std::string type = n.type.rfind("mls.", 0) == 0 ? n.type.substr(4) : n.type;
    svg += "<g class=\"node\"><rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" +
           num(kBoxW) + "\" height=\"" + num(kBoxH) + "\" rx=\"6\" fill=\"" + fill +
           "\" stroke=\"" + stroke + "\" stroke-width=\"1.5\"/>\n";
    svg += "<text x=\"" + num(x + kBoxW / 2) + "\" y=\"" + num(y + 16) +
           "\" text-anchor=\"middle\" font-weight=\"bold\">" +
           plot::xml_escape(short_text(n.id, 24)) + "</text>\n";
    svg += "<text x=\"" + num(x + kBoxW / 2) + "\" y=\"" + num(y + 29) +
           "\" text-anchor=\"middle\" fill=\"#555\">" + plot::xml_escape(short_text(type, 26)) +
           "</text>\n";
    svg += "<text x=\"" + num(x + kBoxW / 2) + "\" y=\"" + num(y + 42) +
           "\" text-anchor=\"middle\" fill=\"#333\">" +
           plot::xml_escape(short_text(shapes_text(analysis, n.id), 28)) + "</text></g>\n";
  }
  f.svg = svg + "</svg>\n";
  return f;
}

}  // namespace mls::lua
