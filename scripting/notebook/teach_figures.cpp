// The teaching figures (see teach_figures.h).
//
// [SECTION] helpers
// [SECTION] a graph drawn top to bottom
// [SECTION] eager against traced
// [SECTION] passes
// [SECTION] placement
// [SECTION] memory
#include "scripting/notebook/teach_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "engine/core/op.h"
#include "scripting/notebook/ir_layout.h"
#include "scripting/notebook/plot.h"

namespace mls::lua::teach {

// [SECTION] helpers

namespace {

constexpr double kNodeH = 38, kSourceH = 20, kGapY = 24, kGapX = 10, kCharW = 6.2;

// The figures' coordinates have one decimal.
std::string num(double v) {
  return plot::svg_num(v, 1);
}

using plot::svg_open;

std::string text(double x, double y, const std::string& s, const char* anchor = "middle",
                 const std::string& attrs = "") {
  return plot::svg_text(x, y, s, anchor, attrs, 1);
}

std::string rect(double x, double y, double w, double h, const NodeStyle& s, double rx = 5) {
  return "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
         num(h) + "\" rx=\"" + num(rx) + "\" fill=\"" + s.fill + "\" stroke=\"" + s.stroke +
         "\" stroke-width=\"1.4\"/>\n";
}

// Cuts text to what `width` pixels hold at the figures' font.
std::string fit(const std::string& s, double width) {
  const auto max = static_cast<size_t>(std::max(3.0, width / kCharW));
  return s.size() <= max ? s : s.substr(0, max - 1) + "~";
}

// A legend row from x at y: a swatch and its text per entry.
std::string legend(double x, double y, const std::vector<std::pair<NodeStyle, std::string>>& e) {
  std::string out;
  for (const auto& [style, label] : e) {
    out += rect(x, y - 10, 16, 12, style, 3);
    out += text(x + 22, y, label, "start");
    x += 22 + static_cast<double>(label.size()) * kCharW + 20;
  }
  return out;
}

Figure finish(std::string svg, int w, int h, const std::string& title) {
  Figure f;
  f.svg = svg_open(w, h) + svg + "</svg>\n";
  f.title = title;
  f.width = w;
  f.height = h;
  return f;
}

}  // namespace

std::string bytes_label(int64_t bytes) {
  char b[48];
  const double v = static_cast<double>(bytes);
  if (bytes >= int64_t{1} << 20)
    std::snprintf(b, sizeof b, "%.2f MiB", v / (1024.0 * 1024.0));
  else if (bytes >= 1024)
    std::snprintf(b, sizeof b, "%.1f KiB", v / 1024.0);
  else
    std::snprintf(b, sizeof b, "%lld B", static_cast<long long>(bytes));
  return b;
}

std::string shape_label(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

NodeStyle forward_style() {
  return {"#e6eefa", "#3b6fb6"};
}
NodeStyle backward_style() {
  return {"#fdebd7", "#d9822b"};
}
NodeStyle fused_style() {
  return {"#efe3f7", "#8e44ad"};
}
NodeStyle device_style() {
  return {"#e3f2e6", "#3f8f4f"};
}
NodeStyle fallback_style() {
  return {"#f8e1e4", "#c0392b"};
}
NodeStyle placed_style() {
  return {"#fff4cc", "#b7950b"};
}

// [SECTION] a graph drawn top to bottom

GraphDrawing draw_graph(const Graph& g, double width,
                        const std::function<NodeStyle(size_t node)>& style, bool numbered) {
  const auto& nodes = g.nodes();
  const size_t nv = g.values().size();
  // The shared layout (ir_layout.h); boxes as wide as the widest row lets, rows centred.
  const IrLayoutOptions options{.order_by_sources = true};
  IrRanks ranks = rank_ir(g, options);
  const double widest = static_cast<double>(ranks.widest());
  const double box_w = std::clamp((width - (widest - 1) * kGapX) / widest, 60.0, 170.0);
  place_ir_rows(g, ranks, options, width / 2, [&](size_t k, size_t count) {
    const double row_w = static_cast<double>(count) * (box_w + kGapX) - kGapX;
    return (width - row_w) / 2 + box_w / 2 + static_cast<double>(k) * (box_w + kGapX);
  });
  const std::vector<int>& source_rank = ranks.source_rank;
  const std::vector<double>&node_x = ranks.node_x, &value_x = ranks.value_x;
  // Heights: a row with a node is a node's tall, one of sources alone a source's; empty rows
  // take no room.
  std::vector<double> value_y(nv, 0), node_y(nodes.size(), 0);
  double y = 0;
  for (const auto& row : ranks.rows) {
    const bool any_node =
        std::any_of(row.begin(), row.end(), [](const IrRanks::Entry& e) { return e.node; });
    const double row_h = any_node ? kNodeH : kSourceH;
    for (const IrRanks::Entry& e : row)
      (e.node ? node_y : value_y)[e.index] = e.node ? y : y + (row_h - kSourceH);
    if (!row.empty()) y += row_h + kGapY;
  }
  GraphDrawing out;
  out.height = std::max(0.0, y - kGapY);
  // Edges first, under the boxes.
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Ref in : nodes[i].inputs) {
      const Value& v = g.value(in);
      double x1, y1;
      if (v.kind == ValueKind::Node && v.node >= 0) {
        x1 = node_x[static_cast<size_t>(v.node)];
        y1 = node_y[static_cast<size_t>(v.node)] + kNodeH;
      } else if (v.kind == ValueKind::Input || v.kind == ValueKind::Param) {
        x1 = value_x[static_cast<size_t>(in.id)];
        y1 = value_y[static_cast<size_t>(in.id)] + kSourceH;
      } else {
        continue;
      }
      const double x2 = node_x[i], y2 = node_y[i], my = (y1 + y2) / 2;
      out.svg += "<path d=\"M" + num(x1) + "," + num(y1) + " C" + num(x1) + "," + num(my) + " " +
                 num(x2) + "," + num(my) + " " + num(x2) + "," + num(y2) +
                 "\" fill=\"none\" stroke=\"#999\" stroke-width=\"1\"/>\n";
    }
  const NodeStyle source{"#f2f2f2", "#888888"};
  for (size_t v = 0; v < nv; ++v) {
    if (source_rank[v] < 0) continue;
    const Value& val = g.value(Ref{static_cast<int32_t>(v)});
    out.svg += "<g class=\"source\">" +
               rect(value_x[v] - box_w / 2, value_y[v], box_w, kSourceH, source, 9);
    out.svg += text(value_x[v], value_y[v] + 14,
                    fit(val.name + " " + shape_label(val.type.shape), (box_w - 6) * 1.2), "middle",
                    "fill=\"#444\" font-size=\"9.5\"") +
               "</g>\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const NodeStyle s = style(i);
    const double x = node_x[i] - box_w / 2, top = node_y[i];
    out.svg += "<g class=\"node\">" + rect(x, top, box_w, kNodeH, s);
    // Bold letters are wider: a long op name ("fused_elementwise") in a smaller size first.
    const bool small = static_cast<double>(n.op->name.size()) * kCharW * 1.12 > box_w - 6;
    out.svg +=
        text(node_x[i], top + 15, fit(n.op->name, (box_w - 6) / (small ? 0.9 : 1.12)), "middle",
             small ? "font-weight=\"bold\" font-size=\"9\"" : "font-weight=\"bold\"");
    std::string detail = n.outputs.empty() ? "" : shape_label(g.type_of(n.outputs[0]).shape);
    if (!n.label.empty()) detail = n.label + " " + detail;
    out.svg += text(node_x[i], top + 30, fit(detail, box_w - 6), "middle", "fill=\"#444\"");
    if (numbered)
      out.svg += "<circle cx=\"" + num(x) + "\" cy=\"" + num(top + kNodeH / 2) +
                 "\" r=\"9\" fill=\"white\" stroke=\"" + s.stroke + "\"/>" +
                 text(x, top + kNodeH / 2 + 4, std::to_string(i + 1), "middle",
                      "font-size=\"10\" class=\"number\"");
    out.svg += "</g>\n";
  }
  return out;
}

// [SECTION] eager against traced

Figure eager_vs_traced_figure(const std::vector<EagerOp>& ops, const Graph& traced,
                              size_t optimized_nodes, double max_abs_diff) {
  const double left_w = 320, right_w = 460, margin = 16, top = 74, row_h = 24;
  const int width = static_cast<int>(margin * 3 + left_w + right_w);
  GraphDrawing gd = draw_graph(
      traced, right_w,
      [&](size_t i) { return traced.nodes()[i].backward ? backward_style() : forward_style(); },
      true);
  const double left_h = row_h * static_cast<double>(ops.size() + 1);
  const int height = static_cast<int>(top + std::max(left_h, gd.height) + 64);
  std::string s = text(width / 2.0, 24, "Dynamic (eager) against static (traced)", "middle",
                       "font-size=\"16\" font-weight=\"bold\"");
  const double lx = margin, rx = margin * 2 + left_w;
  s += text(lx, 50,
            "Eager: " + std::to_string(ops.size()) + " op" + (ops.size() == 1 ? "" : "s") +
                ", each run when Lua reached it",
            "start", "font-size=\"12\" font-weight=\"bold\"");
  s += text(rx, 50,
            "Traced: one graph of " + std::to_string(traced.nodes().size()) + " node" +
                (traced.nodes().size() == 1 ? "" : "s") + ", compiled as one plan",
            "start", "font-size=\"12\" font-weight=\"bold\"");
  // The eager sequence as a table: step, op, output shape.
  s += "<rect x=\"" + num(lx) + "\" y=\"" + num(top - 16) + "\" width=\"" + num(left_w) +
       "\" height=\"" + num(row_h) + "\" fill=\"#eeeeee\"/>\n";
  s += text(lx + 8, top, "step", "start", "font-weight=\"bold\"");
  s += text(lx + 56, top, "op", "start", "font-weight=\"bold\"");
  s += text(lx + 180, top, "output shape", "start", "font-weight=\"bold\"");
  for (size_t i = 0; i < ops.size(); ++i) {
    const double y = top + row_h * static_cast<double>(i + 1);
    if (i % 2 == 1)
      s += "<rect x=\"" + num(lx) + "\" y=\"" + num(y - 16) + "\" width=\"" + num(left_w) +
           "\" height=\"" + num(row_h) + "\" fill=\"#f7f7f7\"/>\n";
    s += text(lx + 8, y, std::to_string(i + 1), "start");
    s += text(lx + 56, y, fit(ops[i].op, 120), "start", "font-weight=\"bold\"");
    s += text(lx + 180, y, fit(ops[i].shape, 115), "start", "fill=\"#444\"");
  }
  s += "<line x1=\"" + num(rx - margin / 2) + "\" y1=\"40\" x2=\"" + num(rx - margin / 2) +
       "\" y2=\"" + num(height - 40) + "\" stroke=\"#cccccc\"/>\n";
  s += "<g transform=\"translate(" + num(rx) + "," + num(top - 16) + ")\">\n" + gd.svg + "</g>\n";
  char diff[64];
  std::snprintf(diff, sizeof diff, "%.3g", max_abs_diff);
  s += text(margin, height - 30,
            "After the compiler's passes the graph has " + std::to_string(optimized_nodes) +
                " node" + (optimized_nodes == 1 ? "" : "s") +
                ". Largest difference between the eager and the compiled result: " + diff,
            "start");
  s += text(margin, height - 12,
            "Eager runs each op as Lua reaches it; a trace records them once (numbered in order), "
            "so the compiler sees the whole graph.",
            "start", "fill=\"#555\"");
  return finish(s, width, height, "eager vs traced");
}

// [SECTION] passes

Figure passes_figure(const std::vector<PassCount>& stages, const std::string& title) {
  const double margin = 16, name_w = 230, bar_w = 420, top = 50, row_h = 26;
  const int width = static_cast<int>(margin * 2 + name_w + bar_w + 130);
  const int height = static_cast<int>(top + row_h * static_cast<double>(stages.size()) + 44);
  size_t most = 1;
  for (const PassCount& p : stages) most = std::max(most, p.nodes);
  std::string s = text(width / 2.0, 24, title, "middle", "font-size=\"15\" font-weight=\"bold\"");
  for (size_t i = 0; i < stages.size(); ++i) {
    const PassCount& p = stages[i];
    const double y = top + row_h * static_cast<double>(i);
    const bool changed = i > 0 && p.nodes != stages[i - 1].nodes;
    const NodeStyle st = i == 0    ? forward_style()
                         : changed ? fused_style()
                                   : NodeStyle{"#eeeeee", "#999999"};
    s += text(margin + name_w - 8, y + 16, (i == 0 ? "before the passes" : p.name), "end",
              changed ? "font-weight=\"bold\"" : "");
    const double w = bar_w * static_cast<double>(p.nodes) / static_cast<double>(most);
    s += rect(margin + name_w, y + 3, std::max(w, 2.0), row_h - 6, st, 2);
    std::string label = std::to_string(p.nodes) + " nodes";
    if (i > 0) {
      const auto d = static_cast<long long>(p.nodes) - static_cast<long long>(stages[i - 1].nodes);
      label += d == 0 ? "  (unchanged)"
                      : "  (" + std::string(d > 0 ? "+" : "") + std::to_string(d) + ")";
    }
    s += text(margin + name_w + w + 8, y + 16, label, "start",
              changed ? "font-weight=\"bold\"" : "fill=\"#666\"");
  }
  s += legend(margin + name_w, height - 16,
              {{forward_style(), "the step as autodiff made it"},
               {fused_style(), "a pass that changed it"},
               {{"#eeeeee", "#999999"}, "a pass with nothing to do"}});
  return finish(s, width, height, title);
}

Figure before_after_figure(const Graph& before, const Graph& after, const std::string& title) {
  const double margin = 16, col_w = 460, top = 70;
  const int width = static_cast<int>(margin * 3 + col_w * 2);
  std::set<std::string> autodiff_ops;
  for (const Node& n : before.nodes()) autodiff_ops.insert(n.op->name);
  size_t fused = 0;
  for (const Node& n : after.nodes()) fused += autodiff_ops.count(n.op->name) == 0;
  GraphDrawing a = draw_graph(before, col_w, [&](size_t i) {
    return before.nodes()[i].backward ? backward_style() : forward_style();
  });
  GraphDrawing b = draw_graph(after, col_w, [&](size_t i) {
    const Node& n = after.nodes()[i];
    if (!autodiff_ops.count(n.op->name)) return fused_style();
    return n.backward ? backward_style() : forward_style();
  });
  const int height = static_cast<int>(top + std::max(a.height, b.height) + 50);
  std::string s = text(width / 2.0, 24, title, "middle", "font-size=\"15\" font-weight=\"bold\"");
  s += text(margin + col_w / 2, 50,
            "Before: " + std::to_string(before.nodes().size()) + " nodes (autodiff's step)",
            "middle", "font-size=\"13\" font-weight=\"bold\"");
  s += text(margin * 2 + col_w * 1.5, 50,
            "After the passes: " + std::to_string(after.nodes().size()) + " nodes, " +
                std::to_string(fused) + " fused",
            "middle", "font-size=\"13\" font-weight=\"bold\"");
  s += "<g transform=\"translate(" + num(margin) + "," + num(top) + ")\">\n" + a.svg + "</g>\n";
  s += "<g transform=\"translate(" + num(margin * 2 + col_w) + "," + num(top) + ")\">\n" + b.svg +
       "</g>\n";
  s += "<line x1=\"" + num(margin * 1.5 + col_w) + "\" y1=\"40\" x2=\"" +
       num(margin * 1.5 + col_w) + "\" y2=\"" + num(height - 36) + "\" stroke=\"#cccccc\"/>\n";
  s += legend(margin, height - 14,
              {{forward_style(), "forward"},
               {backward_style(), "backward (autodiff)"},
               {fused_style(), "a kernel the passes made (fused)"}});
  return finish(s, width, height, title);
}

// [SECTION] placement

Figure placement_figure(const Graph& g, const std::vector<int>& where, const std::string& device,
                        const std::string& title, const std::string& transfers) {
  const double margin = 16, top = 70, col_w = 760;
  const int width = static_cast<int>(margin * 2 + col_w);
  const NodeStyle unused{"#f4f4f4", "#bbbbbb"};
  size_t on_device = 0, fallback = 0, placed = 0;
  for (int w : where) {
    on_device += w == 0;
    fallback += w == 1;
    placed += w == 2;
  }
  GraphDrawing d = draw_graph(g, col_w, [&](size_t i) {
    const int w = i < where.size() ? where[i] : -1;
    return w == 0 ? device_style() : w == 1 ? fallback_style() : w == 2 ? placed_style() : unused;
  });
  const int height = static_cast<int>(top + d.height + 50);
  std::string s = text(width / 2.0, 24, title, "middle", "font-size=\"15\" font-weight=\"bold\"");
  std::string sub =
      device == "cpu" ? "On the CPU every op runs on the CPU: " + std::to_string(on_device) + " ops"
                      : std::to_string(on_device) + " ops on " + device + ", " +
                            std::to_string(fallback) + " on the CPU (no " + device + " kernel)" +
                            (placed ? ", " + std::to_string(placed) + " placed on the CPU" : "");
  if (!transfers.empty()) sub += "; " + transfers;
  s += text(width / 2.0, 48, sub, "middle", "font-size=\"13\"");
  s += "<g transform=\"translate(" + num(margin) + "," + num(top) + ")\">\n" + d.svg + "</g>\n";
  std::vector<std::pair<NodeStyle, std::string>> items = {
      {device_style(), device == "cpu" ? "runs on the CPU" : "runs on " + device}};
  if (device != "cpu")
    items.push_back({fallback_style(), "CPU fallback (copies to and from the device)"});
  if (placed) items.push_back({placed_style(), "placed on the CPU by the project"});
  if (on_device + fallback + placed < g.nodes().size()) items.push_back({unused, "not run"});
  s += legend(margin, height - 14, items);
  return finish(s, width, height, title);
}

// [SECTION] memory

Figure memory_figure(const std::vector<MemoryColumn>& columns, const std::string& title) {
  const double margin = 16, name_w = 150, bar_w = 460, top = 70, bar_h = 18, group_gap = 12;
  const int width = static_cast<int>(margin * 2 + name_w + bar_w + 110);
  std::vector<std::string> cats;
  for (const MemoryColumn& c : columns)
    for (const auto& [name, bytes] : c.categories)
      if (std::find(cats.begin(), cats.end(), name) == cats.end()) cats.push_back(name);
  cats.push_back("total (the peak)");
  int64_t most = 1;
  for (const MemoryColumn& c : columns) most = std::max(most, c.total);
  const double group_h = bar_h * static_cast<double>(columns.size()) + group_gap;
  const int height = static_cast<int>(top + group_h * static_cast<double>(cats.size()) + 40);
  std::string s = text(width / 2.0, 24, title, "middle", "font-size=\"15\" font-weight=\"bold\"");
  s += text(width / 2.0, 46,
            "each kind of memory at its largest during one training step; total: the planned peak",
            "middle", "font-size=\"12\" fill=\"#555\"");
  for (size_t k = 0; k < cats.size(); ++k) {
    const double gy = top + group_h * static_cast<double>(k);
    const bool total = k + 1 == cats.size();
    s += text(margin + name_w - 8, gy + bar_h * static_cast<double>(columns.size()) / 2 + 4,
              cats[k], "end", total ? "font-weight=\"bold\"" : "");
    for (size_t c = 0; c < columns.size(); ++c) {
      int64_t bytes = 0;
      if (total) {
        bytes = columns[c].total;
      } else {
        for (const auto& [name, b] : columns[c].categories)
          if (name == cats[k]) bytes = b;
      }
      const double y = gy + bar_h * static_cast<double>(c);
      const double w = bar_w * static_cast<double>(bytes) / static_cast<double>(most);
      const std::string colour = plot::series_colour(c);
      if (bytes > 0)
        s += "<rect x=\"" + num(margin + name_w) + "\" y=\"" + num(y + 2) + "\" width=\"" +
             num(std::max(w, 1.5)) + "\" height=\"" + num(bar_h - 4) + "\" fill=\"" + colour +
             "\"/>\n";
      s += text(margin + name_w + std::max(w, 1.5) + 6, y + 13, bytes_label(bytes), "start",
                "fill=\"#333\"");
    }
  }
  s += "<line x1=\"" + num(margin + name_w) + "\" y1=\"" + num(top - 4) + "\" x2=\"" +
       num(margin + name_w) + "\" y2=\"" + num(height - 36) + "\" stroke=\"#888\"/>\n";
  std::vector<std::pair<NodeStyle, std::string>> items;
  for (size_t c = 0; c < columns.size(); ++c)
    items.push_back({{plot::series_colour(c), plot::series_colour(c)}, columns[c].name});
  s += legend(margin + name_w, height - 14, items);
  return finish(s, width, height, title);
}

}  // namespace mls::lua::teach
