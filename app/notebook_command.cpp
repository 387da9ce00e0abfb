// `mlstudio notebook run|check|export P.mls`: a project's notebook cells, headless.
//
// run:    every cell in dependency order (one Lua state, sandboxed under the project's
//         folder unless --trust), a line per cell, the outputs saved beside the project
//         (P.outputs.json); at the first failed cell it stops: exit 1 naming the cell and
//         its line, the cells after it not run (the outputs of those that ran are saved).
//         --figures DIR writes each figure as DIR/ID-N.svg, and with --png as DIR/ID-N.png
//         too (rasterised with QSvgRenderer, at the SVG's size, after the run).
// check:  the same run in a fresh state, compared with the saved outputs (numbers within
//         a relative tolerance); "same", or the first cell that differs and the line.
// export: a self-contained HTML page (Markdown through md4c-html, saved outputs, figures
//         inline as SVG, stale outputs marked) or a Lua script that runs alone.
//
// --param name=value: a widget of that name takes the value (Runtime::widget_values), and
// the value is set as the global `name` before the cells run (a number, true/false, or a
// string). The parameter wins, as papermill's do: a cell that assigns the global another
// value (not through a widget) gets a warning on stderr naming it, and the global is set back
// to the parameter after that cell, so the cells that read it see the parameter.
#include <md4c-html.h>

#include <lua.hpp>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/commands.h"
#include "app/figure_png.h"
#include "app/text_out.h"
#include "engine/core/atomic_file.h"
#include "engine/cpu/cpu_backend.h"
#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/notebook.h"
#include "scripting/notebook/cell_analysis.h"
#include "scripting/notebook/cell_graph.h"
#include "scripting/notebook/math_text.h"
#include "scripting/notebook/outputs.h"
#include "scripting/notebook/plot.h"
#include "scripting/notebook/session.h"
#include "scripting/runtime.h"

namespace mls::app {

namespace {

namespace fs = std::filesystem;
using lua::CellOutput;
using nlohmann::json;
using nodes::Cell;
using nodes::CellKind;

struct Loaded {
  nodes::Document doc;
  std::vector<Cell> cells;
  fs::path dir;  // the project's folder: Markdown's images are read from under it
};

Result<Loaded> load(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(path + ": file not found");
  auto doc = nodes::load_document(path);
  if (!doc) return doc.error();
  std::vector<Cell> cells = doc->notebook.cells;
  bool any = false;
  for (const auto& c : cells) any = any || c.kind != CellKind::View;
  if (!any) return make_error(path + " has no notebook cells");
  return Loaded{std::move(*doc), std::move(cells), fs::absolute(path).parent_path()};
}

lua::ScriptOptions script_options(const NotebookOptions& o) {
  lua::ScriptOptions so;
  so.sandbox = !o.trust;
  so.root = fs::absolute(o.project).parent_path().lexically_normal().string();
  so.db_path = o.db;
  return so;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// "name=value": the value as JSON (number, bool or string) and as a Lua literal.
Result<std::pair<std::string, json>> parse_param(const std::string& p) {
  const auto eq = p.find('=');
  if (eq == std::string::npos) return make_error("--param " + p + ": expected name=value");
  std::string name = p.substr(0, eq), text = p.substr(eq + 1);
  if (!is_identifier(name))
    return make_error("--param " + p + ": '" + name + "' is not a Lua name");
  if (text == "true") return std::pair{name, json(true)};
  if (text == "false") return std::pair{name, json(false)};
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(v))
    return std::pair{name, json(v)};
  return std::pair{name, json(text)};
}

std::string lua_literal(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) {
    std::ostringstream s;
    s.precision(17);
    s << v.get<double>();
    return s.str();
  }
  const std::string text = v.get<std::string>();
  std::string eqs;
  while (text.find("]" + eqs + "]") != std::string::npos) eqs += "=";
  return "[" + eqs + "[" + text + "]" + eqs + "]";
}

// A notebook run: the session, the project it reads, the outputs in notebook order.
struct Run {
  std::unique_ptr<nodes::OwnedHistory> history;
  std::unique_ptr<lua::NotebookSession> session;
  lua::SavedOutputs outputs;
  std::vector<std::string> order;  // the cells as they ran
  std::string first_error;         // "cell data:3: ..." of the first failed cell
  size_t not_run = 0;              // Lua cells after the failed one, not run
};

// Whether the global `name` holds the parameter's value.
bool global_is(lua_State* L, const std::string& name, const json& value) {
  lua_getglobal(L, name.c_str());
  bool same = false;
  if (value.is_boolean())
    same = lua_isboolean(L, -1) && static_cast<bool>(lua_toboolean(L, -1)) == value.get<bool>();
  else if (value.is_number())
    same = lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) == value.get<double>();
  else if (lua_type(L, -1) == LUA_TSTRING)
    same = lua_tostring(L, -1) == value.get<std::string>();
  lua_pop(L, 1);
  return same;
}

Result<Run> run_notebook(const NotebookOptions& o, Loaded& nb, bool print_lines) {
  Run r;
  r.history = std::make_unique<nodes::OwnedHistory>(nb.doc);
  r.session = std::make_unique<lua::NotebookSession>(cpu::backend(), script_options(o));
  r.session->set_project_text(nodes::model_text(nb.doc));
  auto& rt = r.session->host().runtime();
  rt.project = r.history.get();
  rt.project_path = fs::absolute(o.project).string();
  std::map<std::string, std::pair<json, std::string>> params;  // name: value, "name=value"
  for (const auto& p : o.params) {
    auto kv = parse_param(p);
    if (!kv) return kv.error();
    rt.widget_values[kv->first] = kv->second;
    params[kv->first] = {kv->second, p};
    auto set =
        r.session->host().run_string(kv->first + " = " + lua_literal(kv->second), "=--param");
    if (!set) return make_error("--param " + p + ": " + set.error().message);
  }
  // The first failed cell stops the run: the session stops after a cell when this is set.
  std::atomic<bool> stop{false};
  r.session->set_interrupt(&stop);
  r.session->on_cell_finished = [&](const CellOutput& out) {
    if (print_lines)
      std::printf("%-20s %8.3f s  %s\n", terminal_safe(out.cell_id).c_str(), out.seconds,
                  out.ok ? "ok" : "error");
    std::fflush(stdout);
    if (!out.ok) {
      stop = true;
      return;
    }
    for (const auto& name : r.session->writes(out.cell_id)) {
      auto p = params.find(name);
      if (p == params.end() || global_is(r.session->host().state(), name, p->second.first))
        continue;
      std::fprintf(
          stderr, "mlstudio: warning: cell %s assigns %s; --param %s wins for the cells after it\n",
          terminal_safe(out.cell_id).c_str(), name.c_str(),
          terminal_safe(p->second.second).c_str());
      (void)r.session->host().run_string(name + " = " + lua_literal(p->second.first), "=--param");
    }
  };
  r.session->set_cells(nb.cells);
  r.order = r.session->run_all();
  r.session->set_interrupt(nullptr);
  for (const auto& c : nb.cells)
    if (c.kind == CellKind::Lua && !r.session->output(c.id)) ++r.not_run;
  for (const auto& c : nb.cells) {
    if (c.kind != CellKind::Lua) continue;
    const CellOutput* out = r.session->output(c.id);
    if (!out) continue;
    CellOutput saved = *out;
    saved.cell_id = c.id;
    if (saved.hash.empty()) saved.hash = r.session->current_hash(c.id);
    r.outputs[c.id] = saved;
  }
  for (const auto& id : r.order) {
    auto it = r.outputs.find(id);
    if (it != r.outputs.end() && !it->second.ok) {
      r.first_error = it->second.error.empty() ? "cell " + id + ": failed" : it->second.error;
      if (r.first_error.rfind("cell ", 0) != 0) r.first_error = "cell " + id + ": " + r.first_error;
      break;
    }
  }
  return r;
}

// [SECTION] Comparing outputs: text exactly, numbers within a relative tolerance

struct Token {
  bool number = false;
  double value = 0;
  std::string text;
};

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const bool starts = std::isdigit(static_cast<unsigned char>(c)) ||
                        ((c == '-' || c == '+' || c == '.') && i + 1 < s.size() &&
                         (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.'));
    if (starts) {
      char* end = nullptr;
      const double v = std::strtod(s.c_str() + i, &end);
      const size_t n = static_cast<size_t>(end - (s.c_str() + i));
      if (n > 0) {
        out.push_back({true, v, s.substr(i, n)});
        i += n;
        continue;
      }
    }
    if (out.empty() || out.back().number) out.push_back({});
    out.back().text += c;
    ++i;
  }
  return out;
}

bool same_line(const std::string& a, const std::string& b, double tol) {
  if (a == b) return true;
  const auto ta = tokenize(a), tb = tokenize(b);
  if (ta.size() != tb.size()) return false;
  for (size_t i = 0; i < ta.size(); ++i) {
    if (ta[i].number != tb[i].number) return false;
    if (!ta[i].number) {
      if (ta[i].text != tb[i].text) return false;
      continue;
    }
    const double x = ta[i].value, y = tb[i].value;
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;
    if (std::fabs(x - y) > tol * std::max(std::fabs(x), std::fabs(y))) return false;
  }
  return true;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The first differing line of two texts: "" when they are the same.
std::string first_difference(const std::string& what, const std::string& saved,
                             const std::string& now, double tol) {
  const auto a = lines_of(saved), b = lines_of(now);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(none)", y = i < b.size() ? b[i] : "(none)";
    if (i < a.size() && i < b.size() && same_line(x, y, tol)) continue;
    return what + " line " + std::to_string(i + 1) + ": saved \"" + x + "\", now \"" + y + "\"";
  }
  return "";
}

// A table's first difference: its form exactly, each cell as a line (numbers within tol).
std::string table_difference(size_t i, const lua::Table& saved, const lua::Table& now, double tol) {
  const std::string what = "table " + std::to_string(i + 1);
  if (saved.title != now.title)
    return what + ": saved \"" + saved.title + "\", now \"" + now.title + "\"";
  if (saved.shape != now.shape || saved.columns != now.columns ||
      saved.row_labels != now.row_labels || saved.total_rows != now.total_rows ||
      saved.total_cols != now.total_cols || saved.rows.size() != now.rows.size())
    return what + " (" + saved.title + "): its shape, rows or columns differ";
  for (size_t r = 0; r < saved.rows.size(); ++r)
    for (size_t c = 0; c < saved.rows[r].size() && c < now.rows[r].size(); ++c)
      if (!same_line(saved.rows[r][c], now.rows[r][c], tol))
        return what + " row " + std::to_string(r + 1) + " column " + std::to_string(c + 1) +
               ": saved \"" + saved.rows[r][c] + "\", now \"" + now.rows[r][c] + "\"";
  return "";
}

std::string compare(const CellOutput& saved, const CellOutput& now, double tol) {
  if (saved.ok != now.ok)
    return saved.ok ? "it failed now: " + now.error : "it failed when saved and runs now";
  if (auto d = first_difference("error", saved.error, now.error, tol); !d.empty()) return d;
  if (auto d = first_difference("text", saved.text, now.text, tol); !d.empty()) return d;
  if (saved.figures.size() != now.figures.size())
    return std::to_string(saved.figures.size()) + " figures saved, " +
           std::to_string(now.figures.size()) + " now";
  for (size_t i = 0; i < saved.figures.size(); ++i)
    if (auto d = first_difference("figure " + std::to_string(i + 1) + " SVG", saved.figures[i].svg,
                                  now.figures[i].svg, tol);
        !d.empty())
      return d;
  if (saved.tables.size() != now.tables.size())
    return std::to_string(saved.tables.size()) + " tables saved, " +
           std::to_string(now.tables.size()) + " now";
  for (size_t i = 0; i < saved.tables.size(); ++i)
    if (auto d = table_difference(i, saved.tables[i], now.tables[i], tol); !d.empty()) return d;
  if (saved.widgets.size() != now.widgets.size())
    return std::to_string(saved.widgets.size()) + " widgets saved, " +
           std::to_string(now.widgets.size()) + " now";
  for (size_t i = 0; i < saved.widgets.size(); ++i)
    if (lua::widget_to_json(saved.widgets[i]) != lua::widget_to_json(now.widgets[i]))
      return "widget " + saved.widgets[i].name + " differs";
  return "";
}

// [SECTION] Export

std::string markdown_html(const std::string& md) {
  std::string out;
  md_html(
      md.data(), static_cast<MD_SIZE>(md.size()),
      [](const MD_CHAR* text, MD_SIZE size, void* user) {
        static_cast<std::string*>(user)->append(text, size);
      },
      &out, MD_DIALECT_GITHUB | MD_FLAG_LATEXMATHSPANS, 0);
  return lua::html_math(out);  // md4c marks the math; it is shown as Unicode, as in the GUI
}

// A URL as md4c-html wrote it (&amp; and %XX escapes) back to its text.
std::string unescape_url(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 5, "&amp;") == 0) {
      out += '&';
      i += 4;
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Markdown's images from the project's folder go into the page as data: URIs, so that the
// page stands alone. Only image files under the folder (a stranger's notebook must not pull
// ~/.ssh into a page its reader may publish), at most 16 MiB each; any other src stays.
std::string embed_images(const std::string& html, const fs::path& dir) {
  static const std::map<std::string, std::string> kTypes = {
      {".png", "image/png"}, {".jpg", "image/jpeg"},    {".jpeg", "image/jpeg"},
      {".gif", "image/gif"}, {".svg", "image/svg+xml"}, {".webp", "image/webp"}};
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(dir, ec);
  std::string out;
  size_t at = 0;
  const std::string tag = "<img src=\"";
  for (size_t i = html.find(tag); i != std::string::npos; i = html.find(tag, at)) {
    const size_t start = i + tag.size(), end = html.find('"', start);
    if (end == std::string::npos) break;
    out.append(html, at, start - at);
    at = end;
    const std::string url = unescape_url(html.substr(start, end - start));
    const bool scheme = std::regex_search(url, std::regex("^[A-Za-z][A-Za-z0-9+.-]*:"));
    const fs::path file = fs::weakly_canonical(root / url, ec);
    auto type = kTypes.find(file.extension().string());
    const auto rel = file.lexically_relative(root);
    std::string bytes;
    if (!scheme && !url.empty() && url[0] != '/' && type != kTypes.end() && !rel.empty() &&
        *rel.begin() != ".." && fs::is_regular_file(file, ec) &&
        fs::file_size(file, ec) <= (size_t{16} << 20)) {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (bytes.empty()) {
      out.append(html, start, end - start);
      continue;
    }
    out += "data:" + type->second + ";base64," + plot::base64(bytes);
  }
  out.append(html, at, std::string::npos);
  return out;
}

constexpr const char* kCss =
    R"(body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
.cell{margin:1em 0}.code pre{background:#f5f5f5;border-left:3px solid #4a7bd0;padding:.6em;overflow-x:auto}
.out pre{margin:.3em 0;padding:.4em .6em;background:#fff;border-left:3px solid #ccc;white-space:pre-wrap}
.error pre{border-left-color:#c0392b;color:#c0392b}.stale{opacity:.55}.stale-note{color:#b7791f;font-size:.85em}
.id{color:#888;font-size:.8em}.widget{font-size:.9em;color:#555}figure{margin:.5em 0}figure svg{max-width:100%;height:auto}
.math{font-family:serif;font-style:italic}div.math{text-align:center;margin:.5em 0}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em}
.tbl .scroll{max-height:22em;overflow:auto;display:inline-block;max-width:100%}.tbl td{text-align:right;font-family:monospace}
.tbl th{background:#f5f5f5;font-weight:normal;color:#555}.tbl .caption,.tbl .note{font-size:.85em;color:#666;margin:.2em 0}
)";

// A cell's table (a returned tensor, a model summary): scrollable, with what was left out.
std::string table_html(const lua::Table& t) {
  using plot::xml_escape;
  std::string h = "<div class=\"tbl\">";
  if (!t.title.empty()) h += "<p class=\"caption\">" + xml_escape(t.title) + "</p>";
  h += "<div class=\"scroll\"><table>\n<thead><tr>";
  if (!t.row_labels.empty()) h += "<th></th>";
  for (const auto& c : t.columns) h += "<th>" + xml_escape(c) + "</th>";
  h += "</tr></thead>\n<tbody>\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    h += "<tr>";
    if (r < t.row_labels.size()) h += "<th>" + xml_escape(t.row_labels[r]) + "</th>";
    for (const auto& cell : t.rows[r]) h += "<td>" + xml_escape(cell) + "</td>";
    h += "</tr>\n";
  }
  h += "</tbody></table></div>";
  std::string note;
  if (t.truncated) {
    note = "showing " + std::to_string(t.rows.size()) + " of " + std::to_string(t.total_rows) +
           " rows";
    if (t.columns.size() < t.total_cols)
      note += ", " + std::to_string(t.columns.size()) + " of " + std::to_string(t.total_cols) +
              " columns";
  }
  if (!t.note.empty()) note += (note.empty() ? "" : "; ") + t.note;
  if (!note.empty()) h += "<p class=\"note\">" + xml_escape(note) + "</p>";
  return h + "</div>\n";
}

// The cells whose saved output is stale: its hash is not the cell's current one, or a
// cell it reads from (transitively) is stale.
std::set<std::string> stale_cells(const Loaded& nb, const lua::SavedOutputs& saved,
                                  lua::NotebookSession& s) {
  std::vector<std::pair<std::string, lua::CellSymbols>> symbols;
  for (const auto& c : nb.cells)
    if (c.kind == CellKind::Lua)
      if (auto sym = lua::analyse_cell(c.source, "=cell " + c.id); sym)
        symbols.emplace_back(c.id, std::move(*sym));
  lua::CellGraph graph(symbols);
  std::set<std::string> stale;
  for (const auto& id : graph.order()) {
    auto it = saved.find(id);
    bool st = it == saved.end() || it->second.hash != s.current_hash(id);
    for (const auto& d : graph.dependencies(id)) st = st || stale.count(d) > 0;
    if (st) stale.insert(id);
  }
  return stale;
}

std::string export_html(const Loaded& nb, const lua::SavedOutputs& saved, lua::NotebookSession& s) {
  const std::set<std::string> stale_ids = stale_cells(nb, saved, s);
  std::string title = nb.doc.name.empty() ? "notebook" : nb.doc.name;
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" +
                  plot::xml_escape(title) + "</title>\n<style>" + kCss + "</style></head><body>\n";
  for (const auto& c : nb.cells) {
    if (c.kind == CellKind::Markdown) {
      h += "<div class=\"cell md\" id=\"" + plot::xml_escape(c.id) + "\">\n" +
           embed_images(markdown_html(c.source), nb.dir) + "</div>\n";
      continue;
    }
    if (c.kind == CellKind::View) {
      h += "<div class=\"cell view\"><p class=\"id\">[view: " + plot::xml_escape(c.view) +
           "]</p></div>\n";
      continue;
    }
    auto it = saved.find(c.id);
    const bool stale = stale_ids.count(c.id) > 0;
    h += "<div class=\"cell code\" id=\"" + plot::xml_escape(c.id) + "\"><span class=\"id\">" +
         plot::xml_escape(c.id) + "</span>\n<pre><code class=\"language-lua\">" +
         plot::xml_escape(c.source) + "</code></pre>\n";
    if (it == saved.end()) {
      h += "<p class=\"stale-note\">(not run)</p>\n</div>\n";
      continue;
    }
    const CellOutput& o = it->second;
    h += std::string("<div class=\"out") + (o.ok ? "" : " error") + (stale ? " stale" : "") +
         "\">\n";
    if (stale)
      h += "<p class=\"stale-note\">stale: the code or its inputs changed since this output</p>\n";
    for (const auto& w : o.widgets)
      h += "<p class=\"widget\">" + plot::xml_escape(w.kind) + " <b>" + plot::xml_escape(w.name) +
           "</b> = " + plot::xml_escape(terminal_json(w.value)) + "</p>\n";
    if (!o.text.empty()) h += "<pre>" + plot::xml_escape(o.text) + "</pre>\n";
    for (const auto& t : o.tables) h += table_html(t);
    for (const auto& f : o.figures) {
      // Our plots draw their title in the SVG: a caption only for a figure that does not.
      const std::string title = plot::xml_escape(f.title);
      const bool drawn = f.svg.find(">" + title + "<") != std::string::npos;
      h += "<figure>" + f.svg +
           (f.title.empty() || drawn ? "" : "<figcaption>" + title + "</figcaption>") +
           "</figure>\n";
    }
    if (!o.ok) h += "<pre>" + plot::xml_escape(o.error) + "</pre>\n";
    h += "</div>\n</div>\n";
  }
  return h + "</body></html>\n";
}

Result<std::string> export_lua(const Loaded& nb) {
  std::vector<std::pair<std::string, lua::CellSymbols>> symbols;
  std::map<std::string, std::string> code_of;
  for (const auto& c : nb.cells) {
    if (c.kind != CellKind::Lua) continue;
    bool returns_last = false;
    auto sym = lua::analyse_cell(c.source, "=cell " + c.id, &returns_last);
    if (!sym) return make_error(nb.doc.name + ": cell " + c.id + ": " + sym.error().message);
    symbols.emplace_back(c.id, std::move(*sym));
    // A cell ending in a bare expression shows it: in a script, it is printed (the ")" on a
    // line of its own, after any comment on the last line).
    std::string code = c.source;
    if (returns_last) {
      const size_t at = lua::last_code_line(code);
      code = code.substr(0, at) + "print(" + code.substr(at) + "\n)";
    }
    code_of[c.id] = std::move(code);
  }
  lua::CellGraph graph(symbols);
  if (!graph.problems().empty()) return make_error(graph.problems().front().reason);
  std::string out =
      "-- " + (nb.doc.name.empty() ? std::string("notebook") : nb.doc.name) +
      ": exported by `mlstudio notebook export --lua` (code cells in dependency order)\n";
  for (const auto& c : nb.cells) {
    if (c.kind != CellKind::Markdown) continue;
    out += "\n";
    for (const auto& line : lines_of(c.source)) out += line.empty() ? "--\n" : "-- " + line + "\n";
  }
  for (const auto& id : graph.order()) {
    out += "\n-- [cell " + id + "]\n" + code_of.at(id) + "\n";
  }
  return out;
}

int save_html(const std::string& path, const std::string& html) {
  auto w = write_text_atomically(path, html);
  if (!w) return fail("cannot write " + path + ": " + w.error().message);
  return 0;
}

int do_run(const NotebookOptions& o) {
  auto nb = load(o.project);
  if (!nb) return fail(nb.error().message);
  auto r = run_notebook(o, *nb, true);
  if (!r) return fail(r.error().message);
  if (auto s = lua::save_outputs(o.project, r->outputs); !s) return fail(s.error().message);
  if (!o.figures.empty()) {
    std::error_code ec;
    fs::create_directories(o.figures, ec);
    for (const auto& [id, out] : r->outputs)
      for (size_t i = 0; i < out.figures.size(); ++i) {
        const std::string f =
            (fs::path(o.figures) / (id + "-" + std::to_string(i + 1) + ".svg")).string();
        if (auto w = write_text_atomically(f, out.figures[i].svg); !w)
          return fail("cannot write " + f + ": " + w.error().message);
      }
  }
  if (!o.html.empty())
    if (int rc = save_html(o.html, export_html(*nb, r->outputs, *r->session)); rc) return rc;
  // The message and where it failed; the traceback is in the saved output.
  if (!r->first_error.empty())
    return fail(o.project + ": " + r->first_error.substr(0, r->first_error.find('\n')) +
                (r->not_run ? " (stopped: " + std::to_string(r->not_run) + " later cell" +
                                  (r->not_run == 1 ? "" : "s") + " not run)"
                            : std::string()));
  std::printf("%zu cells ran; outputs saved to %s\n", r->order.size(),
              lua::outputs_path(o.project).c_str());
  return 0;
}

int do_check(const NotebookOptions& o) {
  auto nb = load(o.project);
  if (!nb) return fail(nb.error().message);
  auto saved = lua::load_outputs(o.project);
  if (!saved) return fail(saved.error().message);
  if (!saved->has_value())
    return fail(o.project + " has no saved outputs (" + lua::outputs_path(o.project) +
                "); run `mlstudio notebook run " + o.project + "` first");
  auto r = run_notebook(o, *nb, false);
  if (!r) return fail(r.error().message);
  int differ = 0;
  for (const auto& c : nb->cells) {
    if (c.kind != CellKind::Lua) continue;
    auto s = (*saved)->find(c.id);
    auto n = r->outputs.find(c.id);
    std::string why;
    if (s == (*saved)->end() && n == r->outputs.end()) continue;  // after a failed cell, both
    if (s == (*saved)->end())
      why = "no saved output";
    else if (n == r->outputs.end())
      why = "it did not run";
    else
      why = compare(s->second, n->second, o.tolerance);
    if (why.empty()) continue;
    ++differ;
    std::printf("cell %s differs: %s\n", terminal_safe(c.id).c_str(), terminal_safe(why).c_str());
  }
  if (differ)
    return fail(o.project + ": " + std::to_string(differ) +
                " cell(s) differ from the saved outputs");
  std::printf("same\n");
  return 0;
}

int do_export(const NotebookOptions& o) {
  if (o.html.empty() == o.lua.empty())
    return fail("notebook export: give one of --html OUT.html or --lua OUT.lua");
  auto nb = load(o.project);
  if (!nb) return fail(nb.error().message);
  if (!o.lua.empty()) {
    auto text = export_lua(*nb);
    if (!text) return fail(o.project + ": " + text.error().message);
    auto w = write_text_atomically(o.lua, *text);
    if (!w) return fail("cannot write " + o.lua + ": " + w.error().message);
    return 0;
  }
  auto saved = lua::load_outputs(o.project);
  if (!saved) return fail(saved.error().message);
  lua::NotebookSession s(cpu::backend(), script_options(o));
  s.set_project_text(nodes::model_text(nb->doc));
  s.set_cells(nb->cells);
  if (saved->has_value()) s.restore_outputs(**saved);
  return save_html(o.html, export_html(*nb, saved->value_or(lua::SavedOutputs{}), s));
}

// run and check without --trust: the cells run in a jailed child process, as `mlstudio lua`
// runs a script (script_jail: rlimits, Landlock, seccomp), writing only under the project's
// folder, the run database's files and the --html and --figures targets.
int jailed(const NotebookOptions& o, int (*body)(const NotebookOptions&)) {
  if (o.trust) return body(o);
  LuaOptions lo;
  lo.file = o.project;
  lo.db = o.db;
  const lua::ScriptOptions so = script_options(o);
  jail::JailLimits limits = script_jail(lo, so);
  std::error_code ec;
  if (!o.html.empty()) limits.write_paths.push_back(fs::absolute(o.html).parent_path().string());
  if (!o.figures.empty()) {
    fs::create_directories(o.figures, ec);
    limits.write_paths.push_back(fs::absolute(o.figures).string());
  }
  std::fprintf(stderr, "mlstudio: sandbox: %s (--trust lifts it)\n",
               jail::probe_walls().describe().c_str());
  const jail::JailResult r = jail::run_jailed(limits, [&] { return body(o); });
  if (!r.reason.empty()) return fail(o.project + ": stopped by the sandbox: " + r.reason);
  return r.exit_code;
}

}  // namespace

int notebook_command(const NotebookOptions& o) {
  if (o.tolerance < 0) return fail("--tolerance must be >= 0");
  if (o.action == "run") {
    const int rc = jailed(o, do_run);
    // Out of the jail (Qt loads plugins and fonts): the SVGs the run wrote, failed or not.
    if (!o.png || o.figures.empty()) return rc;
    auto n = rasterise_figures(o.figures);
    if (!n) return fail(n.error().message);
    return rc;
  }
  if (o.action == "check") return jailed(o, do_check);
  if (o.action == "export") return do_export(o);
  return fail("notebook: unknown action " + o.action + " (run, check, export)");
}

}  // namespace mls::app
