#include "scripting/notebook/autodiff_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "scripting/notebook/plot.h"

namespace mls::lua::autodiff {

namespace {

// [SECTION] evaluation

// A number as a formula shows it: "2", "0.5", "-3.25e-05".
std::string short_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// The formula of node output `n` over its inputs' names: the textbook's notation for the
// arithmetic ops, op(a, b) for the rest.
std::string formula_of(const Node& n, const std::vector<std::string>& in) {
  const std::string& op = n.op->name;
  auto infix = [&](const char* sym) { return in[0] + sym + in[1]; };
  if (in.size() == 2) {
    if (op == "mul") return infix(" · ");
    if (op == "add") return infix(" + ");
    if (op == "sub") return infix(" − ");
    if (op == "div") return infix(" / ");
    if (op == "pow") return infix("^");
  }
  if (in.size() == 1) {
    if (op == "neg") return "−" + in[0];
    if (op == "scale") return short_number(n.attrs.get_float_or("alpha", 1.0)) + " · " + in[0];
    if (op == "add_scalar") {
      const double v = n.attrs.get_float_or("value", 0.0);
      return in[0] + (v < 0 ? " − " : " + ") + short_number(std::abs(v));
    }
  }
  if (in.empty() && op == "fill") return short_number(n.attrs.get_float_or("value", 0.0));
  std::string s = op + "(";
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i];
  return s + ")";
}

// Node outputs only: graph inputs and constants are known without running anything.
void add_unique(Refs& outs, const Graph& g, Ref r) {
  if (!r.valid() || g.value(r).kind != ValueKind::Node) return;
  for (Ref o : outs)
    if (o.id == r.id) return;
  outs.push_back(r);
}

}  // namespace

Result<Evaluation> evaluate(const Graph& traced, Ref output, Backend& backend,
                            std::span<const double> x, std::span<const double> dx, Mode mode) {
  const std::string where = "graph '" + traced.name() + "'";
  const Refs& args = traced.inputs();
  if (x.size() != args.size() || dx.size() != args.size())
    return make_error(where + ": " + std::to_string(args.size()) + " argument(s), but " +
                      std::to_string(x.size()) + " value(s) and " + std::to_string(dx.size()) +
                      " tangent(s)");
  for (Ref a : args) {
    const ValueType t = traced.type_of(a);
    if (t.dtype != DType::F32 || numel(t.shape) != 1)
      return make_error(where + ": argument '" + traced.value(a).name +
                        "' must be one f32 number, got " + type_str(t));
  }
  if (!output.valid()) return make_error(where + ": no output");
  const ValueType out_t = traced.type_of(output);
  if (out_t.dtype != DType::F32 || numel(out_t.shape) != 1)
    return make_error(where + ": f must return one number (a one-element f32 tensor), got " +
                      type_str(out_t));

  Evaluation ev;
  ev.mode = mode;
  ev.x.assign(x.begin(), x.end());
  ev.dx.assign(dx.begin(), dx.end());

  // The wires: arguments, then the constants the ops read, then op outputs in order.
  std::unordered_map<int32_t, size_t> wire_of;
  Refs refs;  // the value behind each wire
  auto add_wire = [&](Ref r, Wire w) {
    w.shape = traced.type_of(r).shape;
    wire_of[r.id] = ev.wires.size();
    ev.wires.push_back(std::move(w));
    refs.push_back(r);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& n = traced.value(args[i]).name;
    add_wire(args[i], {.name = n.empty() ? "x" + std::to_string(i + 1) : n, .op = "input"});
  }
  int consts = 0, values = 0;
  for (const Node& n : traced.nodes())
    for (Ref r : n.inputs) {
      const Value& v = traced.value(r);
      if (v.kind == ValueKind::Const && !wire_of.count(r.id)) {
        std::vector<double> c = v.constant.to_f64();
        add_wire(r, {.name = "c" + std::to_string(++consts),
                     .op = "const",
                     .formula = c.size() == 1 ? short_number(c[0]) : type_str(traced.type_of(r))});
      } else if (v.kind == ValueKind::Param && !wire_of.count(r.id)) {
        return make_error(where + ": parameter '" + v.name + "' (pass it as an argument)");
      }
    }
  for (const Node& n : traced.nodes()) {
    std::vector<std::string> in;
    for (Ref r : n.inputs) in.push_back(ev.wires[wire_of.at(r.id)].name);
    for (Ref r : n.outputs)
      add_wire(r, {.name = "v" + std::to_string(++values),
                   .op = n.op->name,
                   .formula = formula_of(n, in),
                   .inputs = in});
  }
  if (!wire_of.count(output.id)) return make_error(where + ": the output is none of its values");
  ev.output = wire_of.at(output.id);

  // The evaluated graph: the traced ops, then the tangents or the adjoints of every wire, each
  // from the ops' own rules (OpDef::jvp, OpDef::vjp).
  Graph g = traced;
  const std::vector<TapeEntry> tape = tape_of(traced);
  Refs derived(refs.size());  // each wire's tangent or adjoint (invalid: zero)
  if (mode == Mode::Forward) {
    Refs seeds;
    for (size_t i = 0; i < args.size(); ++i)
      seeds.push_back(g.add_constant(
          "d" + ev.wires[i].name,
          Tensor::from_f32(backend, traced.type_of(args[i]).shape, {static_cast<float>(dx[i])})));
    Refs outs(refs.begin() + static_cast<std::ptrdiff_t>(args.size()), refs.end());
    Refs tans = forward_tangents(g, tape, args, seeds, outs);
    for (size_t i = 0; i < args.size(); ++i) derived[i] = seeds[i];
    for (size_t k = 0; k < tans.size(); ++k) derived[args.size() + k] = tans[k];
  } else {
    g.set_backward_mode(true);
    Ref seed = fill(g, out_t, 1.0);
    derived = backprop(g, tape, output, refs, seed);
    g.set_backward_mode(false);
  }
  Refs outs;
  for (Ref r : refs) add_unique(outs, g, r);
  for (Ref r : derived) add_unique(outs, g, r);
  g.set_outputs(outs);
  if (auto ok = g.verify(); !ok) return make_error(where + ": " + ok.error().message);
  auto plan = CompiledPlan::compile(g, backend);
  if (!plan) return make_error(where + ": " + plan.error().message);
  std::vector<Tensor> bound;
  for (size_t i = 0; i < args.size(); ++i) {
    bound.push_back(Tensor::from_f32(backend, traced.type_of(args[i]).shape,
                                     {static_cast<float>(x[i])}, AllocTag::Activation));
    if (auto b = plan->bind(args[i], bound.back()); !b)
      return make_error(where + ": argument '" + ev.wires[i].name + "': " + b.error().message);
  }
  plan->run();
  auto read = [&](Ref r, size_t n) -> std::vector<double> {
    if (!r.valid()) return std::vector<double>(n, 0.0);
    const Value& v = g.value(r);
    if (v.kind == ValueKind::Const) return v.constant.to_f64();
    if (v.kind == ValueKind::Input) {
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].id == r.id) return {x[i]};
    }
    return plan->tensor(r).to_f64();
  };
  for (size_t k = 0; k < ev.wires.size(); ++k) {
    Wire& w = ev.wires[k];
    w.value = read(refs[k], 0);
    (mode == Mode::Forward ? w.tangent : w.adjoint) = read(derived[k], w.value.size());
  }
  const Wire& out = ev.wires[ev.output];
  ev.value = out.value[0];
  if (mode == Mode::Forward) {
    ev.derivative = out.tangent[0];
  } else {
    for (size_t i = 0; i < args.size(); ++i) {
      ev.gradient.push_back(ev.wires[i].adjoint[0]);
      ev.derivative += ev.wires[i].adjoint[0] * dx[i];
    }
  }
  return ev;
}

// [SECTION] labels

std::string number(double v) {
  if (v == 0 || std::abs(v) < 5e-5) v = 0;  // no "-0.0000"
  char b[32];
  const double a = std::abs(v);
  std::snprintf(b, sizeof b, a != 0 && (a >= 1e5 || a < 1e-3) ? "%.4e" : "%.4f", v);
  return b;
}

namespace {

// "3.6372", or "[1.0000, 2.0000, 3.0000, …]" for a wire of several elements.
std::string numbers(const std::vector<double>& v) {
  if (v.size() == 1) return number(v[0]);
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 3; ++i) s += (i ? ", " : "") + number(v[i]);
  return s + (v.size() > 3 ? ", …]" : "]");
}

std::string arguments(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + short_number(v[i]);
  return s;
}

}  // namespace

std::string wire_label(const Wire& w, Mode mode) {
  if (mode == Mode::Forward) return "(" + numbers(w.value) + ", " + numbers(w.tangent) + ")";
  return "∂f/∂" + w.name + " = " + numbers(w.adjoint);
}

std::string title(const Evaluation& e) {
  const std::string at = arguments(e.x);
  std::string t = std::string(e.mode == Mode::Forward ? "forward" : "reverse") + " mode: f(" + at +
                  ") = " + number(e.value) + ", ";
  if (e.x.size() == 1 && e.dx[0] == 1.0) return t + "f'(" + at + ") = " + number(e.derivative);
  if (e.mode == Mode::Reverse) {
    t += "∇f = (";
    for (size_t i = 0; i < e.gradient.size(); ++i) t += (i ? ", " : "") + number(e.gradient[i]);
    return t + ")";
  }
  return t + "∇f·(" + arguments(e.dx) + ") = " + number(e.derivative);
}

// [SECTION] drawing

namespace {

constexpr double kBoxW = 150, kBoxH = 32, kStem = 26, kRowH = 96, kMargin = 24, kHeader = 64,
                 kTail = 56, kGap = 18, kPass = 9;

// How wide a label is drawn at 12 px (a sans-serif glyph is about 6.8 px on average).
double label_width(const std::string& s) {
  size_t glyphs = 0;
  for (unsigned char c : s) glyphs += (c & 0xC0) != 0x80 ? 1 : 0;  // UTF-8: count lead bytes
  return 6.8 * static_cast<double>(glyphs);
}

struct Layout {
  std::vector<double> cx, cy;  // each wire's box centre
  // Where an edge that skips rows passes each row between (consumer wire, input): its x and
  // the row's box centre y.
  std::map<std::pair<size_t, size_t>, std::vector<std::pair<double, double>>> via;
  double width = 0, height = 0;
};

// Rows by longest path from the arguments; an edge that skips rows gets a pass-through point
// in each row it crosses (as a Sugiyama layout's dummy nodes), so it runs between the boxes
// there. Each row is ordered by the mean x of what feeds each item and packed left to right,
// then moved back by its mean push, so boxes sit under their inputs. Extents count the label
// right of each box (the widest over `evs`, which share one graph).
Layout layout(const std::vector<const Evaluation*>& evs, double min_width) {
  const Evaluation& e = *evs.front();
  const size_t n = e.wires.size();
  std::vector<int> row(n, 0);
  std::map<std::string, size_t> by_name;
  for (size_t k = 0; k < n; ++k) {
    for (const std::string& in : e.wires[k].inputs)
      row[k] = std::max(row[k], row[by_name.at(in)] + 1);
    by_name[e.wires[k].name] = k;
  }
  struct Item {
    int row;
    double left, right, x = 0;
    std::vector<size_t> preds;  // items feeding it
  };
  std::vector<Item> items;
  std::vector<size_t> item_of(n);
  std::map<std::pair<size_t, size_t>, std::vector<size_t>> via_items;
  for (size_t k = 0; k < n; ++k) {
    double label = 0;
    for (const Evaluation* ev : evs)
      label = std::max(label, label_width(wire_label(ev->wires[k], ev->mode)));
    Item it{row[k], kBoxW / 2, std::max(kBoxW / 2, 7 + label)};
    const Wire& w = e.wires[k];
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      const size_t src = by_name.at(w.inputs[i]);
      size_t prev = item_of[src];
      for (int r = row[src] + 1; r < row[k]; ++r) {
        items.push_back({r, kPass, kPass, 0, {prev}});
        prev = items.size() - 1;
        via_items[{k, i}].push_back(prev);
      }
      it.preds.push_back(prev);
    }
    items.push_back(it);
    item_of[k] = items.size() - 1;
  }
  const int rows = n ? *std::max_element(row.begin(), row.end()) + 1 : 1;
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<double, size_t>> order;  // (wanted x, item)
    for (size_t t = 0; t < items.size(); ++t) {
      if (items[t].row != r) continue;
      double want = 0;
      for (size_t p : items[t].preds)
        want += items[p].x / static_cast<double>(items[t].preds.size());
      order.push_back({items[t].preds.empty() ? 1e300 : want, t});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    double cursor = -1e300, push = 0;
    int wanted = 0;
    for (auto& [want, t] : order) {
      Item& it = items[t];
      const double earliest = cursor == -1e300 ? -1e300 : cursor + it.left;
      it.x = want == 1e300 ? (cursor == -1e300 ? it.left : earliest) : std::max(want, earliest);
      if (want != 1e300) {
        push += it.x - want;
        ++wanted;
      }
      cursor = it.x + it.right + kGap;
    }
    if (wanted)
      for (auto& [want, t] : order) items[t].x -= push / wanted;
  }
  double lo = 1e300, hi = -1e300;
  for (const Item& it : items) {
    lo = std::min(lo, it.x - it.left);
    hi = std::max(hi, it.x + it.right);
  }
  Layout l;
  l.width = std::max(min_width, hi - lo + 2 * kMargin);
  l.height = kHeader + rows * kRowH + kTail;
  const double shift = (l.width - (hi - lo)) / 2 - lo;
  auto y_of = [](int r) { return kHeader + kBoxH / 2 + r * kRowH; };
  for (size_t k = 0; k < n; ++k) {
    l.cx.push_back(items[item_of[k]].x + shift);
    l.cy.push_back(y_of(row[k]));
  }
  for (const auto& [edge, list] : via_items)
    for (size_t t : list) l.via[edge].push_back({items[t].x + shift, y_of(items[t].row)});
  return l;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string text(double x, double y, const std::string& s, const std::string& attrs) {
  return "<text x=\"" + fmt(x) + "\" y=\"" + fmt(y) + "\" " + attrs + ">" + plot::xml_escape(s) +
         "</text>\n";
}

// One panel: the graph at (0, 0) of a `width`-wide area laid out by `l`, labelled for `e`.
std::string panel(const Evaluation& e, const Layout& l, const std::string& heading,
                  const std::string& note) {
  const bool fwd = e.mode == Mode::Forward;
  const char* ink = fwd ? "#1f5fa8" : "#b03a2e";
  std::string s;
  s += text(l.width / 2, 24, heading,
            "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  s += text(l.width / 2, 44, note, "text-anchor=\"middle\" font-size=\"11\" fill=\"#555555\"");
  std::map<std::string, size_t> by_name;
  for (size_t k = 0; k < e.wires.size(); ++k) by_name[e.wires[k].name] = k;
  // Edges first, under the boxes: from the producer's stem end to the consumer's top.
  for (size_t k = 0; k < e.wires.size(); ++k) {
    const Wire& w = e.wires[k];
    const double n = static_cast<double>(w.inputs.size());
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      const size_t src = by_name.at(w.inputs[i]);
      double x0 = l.cx[src], y0 = l.cy[src] + kBoxH / 2 + kStem;
      const double x1 = l.cx[k] - kBoxW / 2 + kBoxW * (static_cast<double>(i) + 1) / (n + 1);
      const double y1 = l.cy[k] - kBoxH / 2 - 5;
      // A curve down to each row the edge passes, straight through it, then into the box.
      auto curve = [&](double xa, double ya, double xb, double yb) {
        const double my = (ya + yb) / 2;
        return " C" + fmt(xa) + " " + fmt(my) + " " + fmt(xb) + " " + fmt(my) + " " + fmt(xb) +
               " " + fmt(yb);
      };
      std::string d = "M" + fmt(x0) + " " + fmt(y0);
      if (auto it = l.via.find({k, i}); it != l.via.end())
        for (const auto& [vx, vy] : it->second) {
          d += curve(x0, y0, vx, vy - kBoxH / 2) + " L" + fmt(vx) + " " +
               fmt(vy + kBoxH / 2 + kStem);
          x0 = vx;
          y0 = vy + kBoxH / 2 + kStem;
        }
      d += curve(x0, y0, x1, y1);
      s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"#888888\" stroke-width=\"1.4\"/>\n";
      s += "<path d=\"M" + fmt(x1 - 4) + " " + fmt(y1) + " L" + fmt(x1 + 4) + " " + fmt(y1) + " L" +
           fmt(x1) + " " + fmt(y1 + 5) + " Z\" fill=\"#888888\"/>\n";
    }
  }
  for (size_t k = 0; k < e.wires.size(); ++k) {
    const Wire& w = e.wires[k];
    const double x = l.cx[k], y = l.cy[k];
    const bool source = w.op == "input" || w.op == "const";
    const bool out = k == e.output;
    // The wire leaving the box, with what it carries beside it.
    const double stem = out ? kStem + 22 : kStem;
    s += "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(y + kBoxH / 2) + "\" x2=\"" + fmt(x) +
         "\" y2=\"" + fmt(y + kBoxH / 2 + stem) + "\" stroke=\"#888888\" stroke-width=\"1.4\"/>\n";
    s += text(x + 7, y + kBoxH / 2 + 17, wire_label(w, e.mode),
              std::string("font-size=\"12\" fill=\"") + ink + "\"");
    if (out) {
      const double ty = y + kBoxH / 2 + stem;
      s += "<path d=\"M" + fmt(x - 4) + " " + fmt(ty) + " L" + fmt(x + 4) + " " + fmt(ty) + " L" +
           fmt(x) + " " + fmt(ty + 5) + " Z\" fill=\"#888888\"/>\n";
      s += text(x, ty + 20, "f = " + w.name,
                "text-anchor=\"middle\" font-size=\"13\" font-style=\"italic\"");
    }
    const std::string box =
        source ? w.name + " = " + (w.op == "input" ? short_number(w.value.at(0)) : w.formula)
               : w.name + " = " + w.formula;
    const char* fill = source ? "#eeeeee" : fwd ? "#e6eefa" : "#f8e6e3";
    const char* stroke = source ? "#888888" : ink;
    s += "<rect x=\"" + fmt(x - kBoxW / 2) + "\" y=\"" + fmt(y - kBoxH / 2) + "\" width=\"" +
         fmt(kBoxW) + "\" height=\"" + fmt(kBoxH) + "\" rx=\"" + (source ? "14" : "5") +
         "\" fill=\"" + fill + "\" stroke=\"" + stroke + "\" stroke-width=\"1.4\"/>\n";
    s += text(x, y + 5, box, "text-anchor=\"middle\" font-size=\"13\"");
  }
  return s;
}

std::string svg_open(double width, double height) {
  return plot::svg_open(static_cast<int>(width), static_cast<int>(height));
}

std::string note(Mode mode, const Evaluation& e) {
  if (mode == Mode::Forward) {
    std::string seed;
    for (size_t i = 0; i < e.dx.size(); ++i)
      seed += (i ? ", " : "") + e.wires[i].name + "' = " + short_number(e.dx[i]);
    return "each wire: (value, tangent), the dual number v + v'ε; seeded " + seed;
  }
  return "each wire: its adjoint ∂f/∂v, seeded ∂f/∂f = 1 at f and swept back to the inputs";
}

}  // namespace

Figure figure(const Evaluation& e) {
  const Layout l = layout({&e}, std::max(480.0, 9 * label_width(title(e)) / 6.8 + 2 * kMargin));
  const std::string heading = title(e);
  Figure f{.svg = svg_open(l.width, l.height) + panel(e, l, heading, note(e.mode, e)) + "</svg>\n",
           .title = heading,
           .width = static_cast<int>(l.width),
           .height = static_cast<int>(l.height)};
  return f;
}

Figure compare_figure(const Evaluation& forward, const Evaluation& reverse) {
  const double heading_w =
      9 * std::max(label_width(title(forward)), label_width(title(reverse))) / 6.8 + 2 * kMargin;
  const Layout l = layout({&forward, &reverse}, std::max(480.0, heading_w));
  const double gap = 24, top = 40;
  const double width = 2 * l.width + gap, height = l.height + top;
  const std::string heading = "f(" + arguments(forward.x) + ") = " + number(forward.value) +
                              ":  derivative " + number(forward.derivative) + " forward, " +
                              number(reverse.derivative) + " reverse";
  std::string s = svg_open(width, height);
  s += text(width / 2, 26, heading, "text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\"");
  s += "<g transform=\"translate(0," + fmt(top) + ")\">\n" +
       panel(forward, l, title(forward), note(Mode::Forward, forward)) + "</g>\n";
  s += "<line x1=\"" + fmt(l.width + gap / 2) + "\" y1=\"" + fmt(top + 8) + "\" x2=\"" +
       fmt(l.width + gap / 2) + "\" y2=\"" + fmt(height - 8) + "\" stroke=\"#cccccc\"/>\n";
  s += "<g transform=\"translate(" + fmt(l.width + gap) + "," + fmt(top) + ")\">\n" +
       panel(reverse, l, title(reverse), note(Mode::Reverse, reverse)) + "</g>\n";
  s += "</svg>\n";
  return Figure{.svg = std::move(s),
                .title = heading,
                .width = static_cast<int>(width),
                .height = static_cast<int>(height)};
}

}  // namespace mls::lua::autodiff
