// `mlstudio runs ...`: list, show, compare, tag, note, delete, export and query the run
// database. Listing and export go through store::RunTable (filter, sort and paging in SQL);
// query through store::run_query (a connection that cannot write). Everything printed was
// read from a file a stranger may have written: text goes through terminal_safe, JSON is
// dumped with invalid UTF-8 replaced, CSV fields never start a formula, LaTeX is escaped.
#include "app/runs_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/cli_validators.h"
#include "app/gradebook_command.h"
#include "app/text_out.h"
#include "engine/core/field_text.h"
#include "runner/run_files.h"
#include "store/process_owner.h"
#include "store/run_filter.h"
#include "store/run_store.h"
#include "store/run_table.h"
#include "store/sql_query.h"

namespace mls::app {

namespace {

using nlohmann::json;

// A CSV field from a stranger's text: control characters as \xNN (terminal_safe; a newline
// stays, quoted), then never a formula's first character (csv_field).
std::string csv_cell(const std::string& s) {
  return csv_field(terminal_safe(s));
}

std::string safe(const std::string& s) {
  return terminal_safe(s);
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string opt_num(const std::optional<double>& v) {
  return v ? num(*v) : "-";
}

json opt_json(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}

json num_json(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

std::string bytes_text(int64_t b) {
  char buf[64];
  if (b < 1024) return std::to_string(b) + " B";
  if (b < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else if (b < int64_t{1024} * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  }
  return buf;
}

std::string shown_status(const store::RunInfo& r) {
  return r.status == "running" && store::owner_gone(r.owner) ? "interrupted" : r.status;
}

std::string cell_text(const store::Cell& c) {
  return c.kind == store::Cell::Kind::Null ? "" : c.display();
}

json cell_json(const store::Cell& c) {
  switch (c.kind) {
    case store::Cell::Kind::Null:
      return nullptr;
    case store::Cell::Kind::Number:
      // Whole numbers (ids, seeds, steps, counts) as integers.
      if (std::isfinite(c.number) && std::fabs(c.number) < 9e15 && c.number == std::trunc(c.number))
        return static_cast<int64_t>(c.number);
      return num_json(c.number);
    case store::Cell::Kind::Text:
      return c.text;
  }
  return nullptr;
}

// "metrics.val/loss.best" or "-metrics.val/loss.best" / "KEY:desc" (descending), "KEY:asc".
store::SortKey sort_key(std::string s) {
  store::SortKey k;
  if (!s.empty() && s[0] == '-') {
    k.descending = true;
    s.erase(0, 1);
  } else if (s.ends_with(":desc")) {
    k.descending = true;
    s.resize(s.size() - 5);
  } else if (s.ends_with(":asc")) {
    s.resize(s.size() - 4);
  }
  k.field = s;
  return k;
}

// A table's text: each column as wide as its widest cell (long cells cut at 48 columns).
void print_table(std::FILE* out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right,
                 size_t kMax = 48) {
  auto cut = [&](const std::string& s) {
    std::string t = safe(s);
    size_t cols = 0, at = 0;
    for (; at < t.size(); ++at) {
      if ((static_cast<unsigned char>(t[at]) & 0xC0) != 0x80 && ++cols > kMax - 3) break;
    }
    return at < t.size() && cols > kMax - 3 ? t.substr(0, at) + "..." : t;
  };
  std::vector<size_t> w(header.size());
  std::vector<std::vector<std::string>> cells;
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows) {
    cells.emplace_back();
    for (size_t i = 0; i < r.size(); ++i) {
      cells.back().push_back(cut(r[i]));
      w[i] = std::max(w[i], text_columns(cells.back().back()));
    }
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i)
      s += (i ? "  " : "") +
           (i + 1 == r.size() && !right[i] ? r[i] : pad_columns(r[i], w[i], right[i]));
    s.erase(s.find_last_not_of(' ') + 1);
    std::fprintf(out, "%s\n", s.c_str());
  };
  std::vector<std::string> h;
  for (const std::string& x : header) h.push_back(safe(x));
  line(h);
  for (const auto& r : cells) line(r);
}

Result<std::unique_ptr<store::RunTable>> open_table(const RunsOptions& o) {
  return store::RunTable::open(o.db);
}

Result<std::unique_ptr<store::RunStore>> open_reader(const RunsOptions& o) {
  return store::RunStore::open_read_only(o.db);
}

store::RunQuery query_of(const RunsOptions& o) {
  store::RunQuery q;
  q.where = o.where;
  for (const std::string& s : o.sort) q.sort.push_back(sort_key(s));
  q.columns = o.columns;
  return q;
}

// ------------------------------------------------------------------------------------------
// list, export

struct Listing {
  std::vector<std::string> columns;
  std::vector<store::RunRow> rows;
  int64_t total = 0;
};

Result<Listing> listing(const RunsOptions& o) {
  auto t = open_table(o);
  if (!t) return t.error();
  store::RunQuery q = query_of(o);
  if (Result<void> c = (*t)->check(q); !c) return c.error();
  Listing l;
  Result<std::vector<std::string>> cols = (*t)->columns(q);
  if (!cols) return cols.error();
  l.columns = *cols;
  q.columns = l.columns;
  Result<std::vector<store::RunRow>> rows = (*t)->rows(q, 0, o.limit > 0 ? o.limit : -1);
  if (!rows) return rows.error();
  l.rows = std::move(*rows);
  l.total = static_cast<int64_t>(l.rows.size());
  if (o.limit > 0 && l.total == o.limit) {  // maybe more: say how many
    Result<int64_t> n = (*t)->count(q);
    if (!n) return n.error();
    l.total = *n;
  }
  // A key no run has matches nothing: say so, as it is most likely a typo.
  if (Result<std::vector<std::string>> unknown = (*t)->unknown_keys(q); unknown)
    for (const std::string& u : *unknown)
      std::fprintf(stderr, "mlstudio: note: %s\n", safe(u).c_str());
  return l;
}

json listing_json(const Listing& l) {
  json arr = json::array();
  for (const store::RunRow& r : l.rows) {
    json j = json::object();
    j["id"] = r.id;
    for (size_t i = 0; i < l.columns.size(); ++i) j[l.columns[i]] = cell_json(r.cells[i]);
    arr.push_back(j);
  }
  return arr;
}

std::vector<bool> numeric_columns(const std::vector<std::string>& cols) {
  std::vector<bool> out;
  for (const std::string& c : cols) {
    auto f = store::parse_field(c);
    out.push_back(f && f->numeric());
  }
  return out;
}

int list_command(const RunsOptions& o, std::FILE* out) {
  Result<Listing> l = listing(o);
  if (!l) return fail(l.error().message);
  if (o.json) {
    std::fprintf(out, "%s\n", terminal_json(listing_json(*l)).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const store::RunRow& r : l->rows) {
    rows.emplace_back();
    for (const store::Cell& c : r.cells) rows.back().push_back(cell_text(c));
  }
  print_table(out, l->columns, rows, numeric_columns(l->columns));
  if (static_cast<int64_t>(l->rows.size()) < l->total)
    std::fprintf(stderr, "(%zu of %lld runs shown: --limit)\n", l->rows.size(),
                 static_cast<long long>(l->total));
  return 0;
}

std::string latex_row(const std::vector<std::string>& cells) {
  std::string s;
  for (size_t i = 0; i < cells.size(); ++i) s += (i ? " & " : "") + cells[i];
  return s + " \\\\\n";
}

int export_command(const RunsOptions& o, std::FILE* out) {
  if (o.format != "csv" && o.format != "json" && o.format != "latex")
    return fail("runs export: say which format: --csv, --json or --latex");
  Result<Listing> l = listing(o);
  if (!l) return fail(l.error().message);
  if (o.format == "json") {
    std::fprintf(out, "%s\n", terminal_json(listing_json(*l)).c_str());
    return 0;
  }
  if (o.format == "csv") {
    std::string s;
    for (size_t i = 0; i < l->columns.size(); ++i) s += (i ? "," : "") + csv_cell(l->columns[i]);
    std::fprintf(out, "%s\n", s.c_str());
    for (const store::RunRow& r : l->rows) {
      s.clear();
      for (size_t i = 0; i < r.cells.size(); ++i) {
        const store::Cell& c = r.cells[i];
        // A number is written plainly (a negative one is not a formula); text is quoted.
        std::string v = c.kind == store::Cell::Kind::Number ? num(c.number)
                        : c.kind == store::Cell::Kind::Text ? csv_cell(c.text)
                                                            : "";
        s += (i ? "," : "") + v;
      }
      std::fprintf(out, "%s\n", s.c_str());
    }
    return 0;
  }
  // LaTeX: a booktabs tabular, numbers right-aligned.
  std::vector<bool> right = numeric_columns(l->columns);
  std::string spec;
  for (bool r : right) spec += r ? 'r' : 'l';
  std::fprintf(out, "%% mlstudio runs export --latex: needs \\usepackage{booktabs}\n");
  std::fprintf(out, "\\begin{tabular}{%s}\n\\toprule\n", spec.c_str());
  std::vector<std::string> head;
  for (const std::string& c : l->columns) head.push_back(latex_escape(c));
  std::fprintf(out, "%s\\midrule\n", latex_row(head).c_str());
  for (const store::RunRow& r : l->rows) {
    std::vector<std::string> cells;
    for (const store::Cell& c : r.cells) cells.push_back(latex_escape(cell_text(c)));
    std::fprintf(out, "%s", latex_row(cells).c_str());
  }
  std::fprintf(out, "\\bottomrule\n\\end{tabular}\n");
  return 0;
}

// ------------------------------------------------------------------------------------------
// show

struct Lineage {
  std::vector<store::RunInfo> ancestors;  // oldest first
};

// Children of `id` (runs whose parent it is), by id, through the filter language.
Result<std::vector<store::RunRow>> children(store::RunTable& t, int64_t id) {
  store::RunQuery q;
  q.where = "parent = " + std::to_string(id);
  q.columns = {"name", "status", "fork_step"};
  return t.rows(q, 0, -1);
}

// The tree under `id`, each line indented by depth; `mark` is the run shown.
Result<void> subtree(store::RunTable& t, int64_t id, const std::string& indent, int64_t mark,
                     std::vector<std::string>& lines, json& node, int depth) {
  if (depth > 64) return {};  // a cycle in a hand-edited file ends here
  Result<std::vector<store::RunRow>> kids = children(t, id);
  if (!kids) return kids.error();
  node["children"] = json::array();
  for (size_t i = 0; i < kids->size(); ++i) {
    const store::RunRow& k = (*kids)[i];
    bool last = i + 1 == kids->size();
    std::string at = k.cells[2].kind == store::Cell::Kind::Null
                         ? "continued"
                         : "forked at step " + cell_text(k.cells[2]);
    lines.push_back(indent + (last ? "`- " : "|- ") + std::to_string(k.id) + " " +
                    safe(k.cells[0].text) + " (" + safe(k.cells[1].text) + ", " + at + ")" +
                    (k.id == mark ? "   <- this run" : ""));
    json child = {{"id", k.id},
                  {"name", k.cells[0].text},
                  {"status", k.cells[1].text},
                  {"fork_step", cell_json(k.cells[2])}};
    if (Result<void> r =
            subtree(t, k.id, indent + (last ? "   " : "|  "), mark, lines, child, depth + 1);
        !r)
      return r;
    node["children"].push_back(child);
  }
  return {};
}

int show_command(const RunsOptions& o, std::FILE* out) {
  auto st = open_reader(o);
  if (!st) return fail(st.error().message);
  store::RunStore& s = **st;
  auto r = s.get_run(o.run_id);
  if (!r) return fail(r.error().message);
  auto params = s.params(o.run_id);
  auto sums = s.metric_summaries(o.run_id);
  auto tags = s.tags(o.run_id);
  auto arts = s.artifacts(o.run_id);
  auto sys = s.system_info(o.run_id);
  if (!params) return fail(params.error().message);
  if (!sums) return fail(sums.error().message);
  if (!tags) return fail(tags.error().message);
  if (!arts) return fail(arts.error().message);
  if (!sys) return fail(sys.error().message);
  // Ancestors, oldest first (a hand-made cycle stops after 64).
  std::vector<store::RunInfo> up;
  for (std::optional<int64_t> p = r->parent_run_id; p && up.size() < 64;) {
    auto pr = s.get_run(*p);
    if (!pr) break;  // deleted: the child's parent_run_id is cleared, so only a broken file
    up.insert(up.begin(), *pr);
    p = pr->parent_run_id;
  }
  auto t = open_table(o);
  if (!t) return fail(t.error().message);
  // The tree from the oldest ancestor, this run marked.
  const store::RunInfo& root = up.empty() ? *r : up.front();
  std::vector<std::string> tree = {std::to_string(root.id) + " " + safe(root.name) + " (" +
                                   safe(shown_status(root)) + ")" +
                                   (root.id == r->id ? "   <- this run" : "")};
  json tree_json = {{"id", root.id}, {"name", root.name}, {"status", shown_status(root)}};
  if (Result<void> tr = subtree(**t, root.id, "", r->id, tree, tree_json, 0); !tr)
    return fail(tr.error().message);

  json j = {{"id", r->id},
            {"name", r->name},
            {"status", shown_status(*r)},
            {"experiment", r->experiment},
            {"started", r->started},
            {"ended", r->ended},
            {"device", r->device},
            {"seed", r->seed},
            {"world_size", r->world_size},
            {"project_path", r->project_path},
            {"project_hash", r->project_hash},
            {"parent", r->parent_run_id ? json(*r->parent_run_id) : json(nullptr)},
            {"fork_step", r->fork_step ? json(*r->fork_step) : json(nullptr)},
            {"sweep", r->sweep_id ? json(*r->sweep_id) : json(nullptr)},
            {"trial", r->trial ? json(*r->trial) : json(nullptr)},
            {"note", r->note},
            {"params", json::object()},
            {"metrics", json::object()},
            {"tags", json::object()},
            {"artifacts", json::array()},
            {"system", json::object()},
            {"lineage", tree_json}};
  for (const auto& [k, v] : *params) j["params"][k] = v;
  for (const store::MetricSummary& m : *sums)
    j["metrics"][m.key] = {{"latest", num_json(m.latest)},
                           {"latest_step", m.latest_step},
                           {"best", opt_json(m.best)},
                           {"best_step", m.best_step ? json(*m.best_step) : json(nullptr)},
                           {"min", opt_json(m.min)},
                           {"max", opt_json(m.max)},
                           {"count", m.count}};
  for (const auto& [k, v] : *tags) j["tags"][k] = v;
  for (const store::ArtifactInfo& a : *arts)
    j["artifacts"].push_back({{"kind", a.kind},
                              {"path", a.path},
                              {"bytes", a.bytes},
                              {"hash", a.hash},
                              {"step", a.step ? json(*a.step) : json(nullptr)},
                              {"exists", std::filesystem::exists(s.resolve_path(a.path))}});
  for (const auto& [k, v] : *sys) j["system"][k] = v;
  if (o.json) {
    std::fprintf(out, "%s\n", terminal_json(j).c_str());
    return 0;
  }

  std::fprintf(out, "run %lld  %s  (%s)\n", static_cast<long long>(r->id), safe(r->name).c_str(),
               safe(shown_status(*r)).c_str());
  auto row = [&](const char* k, const std::string& v) {
    std::fprintf(out, "  %-11s %s\n", k, v.c_str());
  };
  row("experiment", safe(r->experiment));
  row("project", safe(r->project_path) + "  [" + safe(r->project_hash) + "]");
  row("started", safe(r->started));
  row("ended", r->ended.empty() ? "-" : safe(r->ended));
  row("device", safe(r->device) + "   seed " + std::to_string(r->seed) + "   world size " +
                    std::to_string(r->world_size));
  if (r->sweep_id)
    row("sweep",
        std::to_string(*r->sweep_id) + "  trial " + (r->trial ? std::to_string(*r->trial) : "-"));
  if (r->parent_run_id)
    row("parent", std::to_string(*r->parent_run_id) +
                      (r->fork_step ? "  from its step " + std::to_string(*r->fork_step) : ""));
  if (!r->note.empty()) row("note", safe(r->note));
  std::fprintf(out, "  params\n");
  if (params->empty()) std::fprintf(out, "    (none)\n");
  for (const auto& [k, v] : *params)
    std::fprintf(out, "    %s %s\n", pad_columns(safe(k), 24).c_str(), safe(v).c_str());
  std::fprintf(out, "  metrics%s %12s %18s %12s %12s %8s\n", std::string(21, ' ').c_str(), "latest",
               "best (step)", "min", "max", "points");
  for (const store::MetricSummary& m : *sums) {
    std::string best =
        m.best ? num(*m.best) + " (" + std::to_string(m.best_step.value_or(0)) + ")" : "-";
    std::fprintf(out, "    %s %12s %18s %12s %12s %8lld\n", pad_columns(safe(m.key), 24).c_str(),
                 num(m.latest).c_str(), best.c_str(), opt_num(m.min).c_str(),
                 opt_num(m.max).c_str(), static_cast<long long>(m.count));
  }
  if (!tags->empty()) {
    std::fprintf(out, "  tags\n");
    for (const auto& [k, v] : *tags)
      std::fprintf(out, "    %s\n", (safe(k) + (v.empty() ? "" : " = " + safe(v))).c_str());
  }
  if (!arts->empty()) {
    std::fprintf(out, "  artifacts\n");
    for (const store::ArtifactInfo& a : *arts) {
      bool there = std::filesystem::exists(s.resolve_path(a.path));
      std::fprintf(out, "    %-10s %s  %s  %s%s%s\n", safe(a.kind).c_str(), safe(a.path).c_str(),
                   bytes_text(a.bytes).c_str(), safe(a.hash).c_str(),
                   a.step ? ("  step " + std::to_string(*a.step)).c_str() : "",
                   there ? "" : "  (missing)");
    }
  }
  if (!sys->empty()) {
    std::fprintf(out, "  system\n");
    size_t w = 0;
    for (const auto& kv : *sys) w = std::max(w, std::min<size_t>(kv.first.size(), 24));
    for (const auto& [k, v] : *sys)
      std::fprintf(out, "    %s %s\n", pad_columns(safe(k), w).c_str(), safe(v).c_str());
  }
  if (tree.size() > 1) {
    std::fprintf(out, "  lineage\n");
    for (const std::string& l : tree) std::fprintf(out, "    %s\n", l.c_str());
  }
  return 0;
}

// ------------------------------------------------------------------------------------------
// compare

int compare_command(const RunsOptions& o, std::FILE* out) {
  if (o.ids.size() < 2) return fail("runs compare: give two or more run ids");
  if (o.ids.size() > 26) return fail("runs compare: at most 26 runs at once");
  auto st = open_reader(o);
  if (!st) return fail(st.error().message);
  store::RunStore& s = **st;
  struct One {
    store::RunInfo info;
    std::map<std::string, std::string> params;
    std::map<std::string, store::MetricSummary> metrics;
  };
  std::vector<One> runs;
  std::set<std::string> pkeys, mkeys;
  for (int64_t id : o.ids) {
    One one;
    auto r = s.get_run(id);
    if (!r) return fail(r.error().message);
    one.info = *r;
    auto p = s.params(id);
    if (!p) return fail(p.error().message);
    for (auto& [k, v] : *p) {
      one.params[k] = v;
      pkeys.insert(k);
    }
    auto m = s.metric_summaries(id);
    if (!m) return fail(m.error().message);
    for (auto& sum : *m) {
      mkeys.insert(sum.key);
      one.metrics[sum.key] = sum;
    }
    runs.push_back(std::move(one));
  }
  // The chart's metrics: those asked for, else the first loss, else the first key.
  std::vector<std::string> chart = o.metrics;
  for (const std::string& k : chart)
    if (!mkeys.count(k)) {
      std::vector<std::string> all(mkeys.begin(), mkeys.end());
      std::string g = store::closest(k, all);
      return fail("runs compare: no metric '" + k + "' in these runs" +
                  (g.empty() ? "" : " (did you mean " + g + "?)") +
                  (all.empty() ? "" : "; they logged " + quoted_list(all, " and ")));
    }
  if (chart.empty() && !mkeys.empty()) {
    chart.push_back(*mkeys.begin());
    for (const char* pref : {"train/loss", "val/loss"})
      if (mkeys.count(pref)) {
        chart[0] = pref;
        break;
      }
  }
  // The value at --at-step: the last point at or before it.
  std::map<std::string, std::vector<std::optional<double>>> at;
  if (o.at_step)
    for (const std::string& k : mkeys)
      for (const One& one : runs) {
        auto pts = s.metrics(one.info.id, k);
        if (!pts) return fail(pts.error().message);
        std::optional<double> v;
        for (const store::MetricPoint& p : *pts)
          if (p.step <= *o.at_step) v = p.value;
        at[k].push_back(v);
      }

  auto differ = [](const std::vector<std::string>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) != v.end();
  };
  json j = {{"runs", json::array()}, {"params", json::object()}, {"metrics", json::object()}};
  std::vector<std::string> header = {""};
  for (const One& one : runs) {
    header.push_back("run " + std::to_string(one.info.id));
    j["runs"].push_back({{"id", one.info.id}, {"name", one.info.name}});
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right(header.size(), true);
  right[0] = false;
  rows.push_back({"name"});
  rows.push_back({"status"});
  for (const One& one : runs) {
    rows[0].push_back(one.info.name);
    rows[1].push_back(shown_status(one.info));
  }
  rows.push_back({"params"});
  rows.back().resize(header.size());
  int shown_params = 0;
  for (const std::string& k : pkeys) {
    std::vector<std::string> vals;
    for (const One& one : runs) {
      auto it = one.params.find(k);
      vals.push_back(it == one.params.end() ? "-" : it->second);
    }
    for (size_t i = 0; i < runs.size(); ++i)
      j["params"][k].push_back(runs[i].params.count(k) ? json(vals[i]) : json(nullptr));
    if (o.diff_only && !differ(vals)) continue;
    ++shown_params;
    rows.push_back({"  " + k});
    rows.back().insert(rows.back().end(), vals.begin(), vals.end());
  }
  if (shown_params == 0) rows.push_back({o.diff_only ? "  (all the same)" : "  (none)"});
  rows.back().resize(header.size());
  rows.push_back({"metrics"});
  rows.back().resize(header.size());
  for (const std::string& k : mkeys) {
    struct Agg {
      const char* name;
      std::function<std::string(const store::MetricSummary&)> get;
    };
    const Agg aggs[] = {
        {"last", [](const store::MetricSummary& m) { return num(m.latest); }},
        {"best",
         [](const store::MetricSummary& m) {
           return m.best ? num(*m.best) + " @" + std::to_string(m.best_step.value_or(0)) : "-";
         }},
        {"min", [](const store::MetricSummary& m) { return opt_num(m.min); }},
        {"max", [](const store::MetricSummary& m) { return opt_num(m.max); }},
    };
    std::vector<std::vector<std::string>> block;
    bool any_differs = false;
    for (const Agg& a : aggs) {
      std::vector<std::string> vals;
      for (const One& one : runs) {
        auto it = one.metrics.find(k);
        vals.push_back(it == one.metrics.end() ? "-" : a.get(it->second));
      }
      any_differs = any_differs || differ(vals);
      block.push_back({std::string("    ") + a.name});
      block.back().insert(block.back().end(), vals.begin(), vals.end());
    }
    if (o.at_step) {
      std::vector<std::string> vals;
      for (const auto& v : at[k]) vals.push_back(v ? num(*v) : "-");
      any_differs = any_differs || differ(vals);
      block.push_back({"    at step " + std::to_string(*o.at_step)});
      block.back().insert(block.back().end(), vals.begin(), vals.end());
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].metrics.find(k);
      json m = nullptr;
      if (it != runs[i].metrics.end())
        m = {{"last", num_json(it->second.latest)},
             {"best", opt_json(it->second.best)},
             {"best_step", it->second.best_step ? json(*it->second.best_step) : json(nullptr)},
             {"min", opt_json(it->second.min)},
             {"max", opt_json(it->second.max)}};
      if (o.at_step && it != runs[i].metrics.end())
        m["at_step"] = at[k][i] ? num_json(*at[k][i]) : json(nullptr);
      j["metrics"][k].push_back(m);
    }
    if (o.diff_only && !any_differs) continue;
    rows.push_back({"  " + k});
    rows.back().resize(header.size());
    for (auto& b : block) rows.push_back(std::move(b));
  }
  // The curves.
  std::vector<std::string> charts;
  for (const std::string& key : chart) {
    std::vector<Curve> curves;
    json cj = json::object();
    for (const One& one : runs) {
      auto pts = s.metrics(one.info.id, key);
      if (!pts) return fail(pts.error().message);
      Curve c;
      c.label = "run " + std::to_string(one.info.id) + " " + safe(one.info.name);
      for (const store::MetricPoint& p : *pts)
        c.points.push_back({static_cast<double>(p.step), p.value});
      curves.push_back(std::move(c));
    }
    charts.push_back(text_chart(safe(key), curves, metric_per_epoch(key) ? "epoch" : "step"));
  }
  if (o.json) {
    j["chart"] = chart;
    std::fprintf(out, "%s\n", terminal_json(j).c_str());
    return 0;
  }
  print_table(out, header, rows, right, 32);
  for (const std::string& c : charts) std::fprintf(out, "\n%s", c.c_str());
  return 0;
}

// ------------------------------------------------------------------------------------------
// tag, note, delete, query

bool clean_text(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 && c != '\t') return false;
  return true;
}

int tag_command(const RunsOptions& o, std::FILE* out) {
  if (o.tags.empty()) return fail("runs tag: give KEY or KEY=VALUE (one or more)");
  std::vector<std::pair<std::string, std::string>> kv;
  for (const std::string& t : o.tags) {
    size_t eq = t.find('=');
    std::string k = t.substr(0, eq), v = eq == std::string::npos ? "" : t.substr(eq + 1);
    if (k.empty()) return fail("runs tag: '" + t + "' has no key (KEY or KEY=VALUE)");
    if (!clean_text(k) || !clean_text(v))
      return fail("runs tag: '" + t + "' holds a control character");
    if (k.size() > 256 || v.size() > 4096)
      return fail("runs tag: '" + k.substr(0, 40) + "' is too long (keys 256, values 4096 bytes)");
    if (o.remove && eq != std::string::npos)
      return fail("runs tag --remove: give keys only, not '" + t + "'");
    kv.push_back({k, v});
  }
  auto st = store::RunStore::open(o.db);
  if (!st) return fail(st.error().message);
  if (auto r = (*st)->get_run(o.run_id); !r) return fail(r.error().message);
  for (const auto& [k, v] : kv) {
    if (o.remove) {
      Result<bool> had = (*st)->remove_tag(o.run_id, k);
      if (!had) return fail(had.error().message);
      std::fprintf(out, "run %lld: %s %s\n", static_cast<long long>(o.run_id),
                   *had ? "removed tag" : "had no tag", safe(k).c_str());
    } else {
      if (Result<void> r = (*st)->set_tag(o.run_id, k, v); !r) return fail(r.error().message);
      std::fprintf(out, "run %lld: tag %s\n", static_cast<long long>(o.run_id),
                   (safe(k) + (v.empty() ? "" : " = " + safe(v))).c_str());
    }
  }
  return 0;
}

int note_command(const RunsOptions& o, std::FILE* out) {
  if (o.text.size() > 65536) return fail("runs note: the note is over 64 KiB");
  for (unsigned char c : o.text)
    if (c < 0x20 && c != '\t' && c != '\n')
      return fail("runs note: the text holds a control character");
  auto st = store::RunStore::open(o.db);
  if (!st) return fail(st.error().message);
  if (auto r = (*st)->get_run(o.run_id); !r) return fail(r.error().message);
  if (Result<void> r = (*st)->set_note(o.run_id, o.text); !r) return fail(r.error().message);
  std::fprintf(out, "run %lld: %s\n", static_cast<long long>(o.run_id),
               o.text.empty() ? "note cleared" : "note set");
  return 0;
}

int delete_command(const RunsOptions& o, std::FILE* out) {
  if (o.ids.empty()) return fail("runs delete: give the run ids to delete");
  if (!std::filesystem::exists(o.db)) return fail(o.db + ": no run database here");
  int code = 0;
  for (int64_t id : o.ids) {
    Result<runner::DeleteReport> r = runner::delete_run(o.db, id);
    if (!r) {
      code = fail(r.error().message);
      continue;
    }
    std::fprintf(out, "deleted run %lld: %zu file%s removed%s\n", static_cast<long long>(id),
                 r->removed.size(), r->removed.size() == 1 ? "" : "s",
                 r->removed_dir.empty() ? "" : (", folder " + safe(r->removed_dir)).c_str());
    for (const std::string& f : r->removed) std::fprintf(out, "  removed %s\n", safe(f).c_str());
    for (const std::string& f : r->kept)
      std::fprintf(out, "  kept    %s (another run lists it, or not a checkpoint file)\n",
                   safe(f).c_str());
    for (const std::string& f : r->problems)
      std::fprintf(stderr, "mlstudio: run %lld: could not remove %s\n", static_cast<long long>(id),
                   safe(f).c_str());
  }
  return code;
}

int query_command(const RunsOptions& o, std::FILE* out) {
  if (o.sql.empty()) return fail("runs query: give a SELECT statement");
  Result<store::QueryResult> r = store::run_query(o.db, o.sql);
  if (!r) return fail(r.error().message);
  if (o.json || o.format == "json") {
    json arr = json::array();
    for (const auto& row : r->rows) {
      json obj = json::object();
      for (size_t i = 0; i < row.size(); ++i) obj[r->columns[i]] = cell_json(row[i]);
      arr.push_back(obj);
    }
    std::fprintf(out, "%s\n", terminal_json(arr).c_str());
  } else if (o.format == "csv") {
    std::string s;
    for (size_t i = 0; i < r->columns.size(); ++i) s += (i ? "," : "") + csv_cell(r->columns[i]);
    std::fprintf(out, "%s\n", s.c_str());
    for (const auto& row : r->rows) {
      s.clear();
      for (size_t i = 0; i < row.size(); ++i)
        s += (i ? "," : "") + (row[i].kind == store::Cell::Kind::Number ? num(row[i].number)
                               : row[i].kind == store::Cell::Kind::Text ? csv_cell(row[i].text)
                                                                        : std::string());
      std::fprintf(out, "%s\n", s.c_str());
    }
  } else {
    std::vector<std::vector<std::string>> rows;
    std::vector<bool> right(r->columns.size(), false);
    for (const auto& row : r->rows) {
      rows.emplace_back();
      for (size_t i = 0; i < row.size(); ++i) {
        rows.back().push_back(cell_text(row[i]));
        if (row[i].kind == store::Cell::Kind::Number) right[i] = true;
      }
    }
    print_table(out, r->columns, rows, right);
  }
  if (r->truncated)
    std::fprintf(stderr,
                 "mlstudio: runs query: only the first %zu rows (10,000 rows or 64 MiB of text "
                 "at most; add a LIMIT or select fewer columns)\n",
                 r->rows.size());
  return 0;
}

}  // namespace

std::string latex_escape(const std::string& raw) {
  // Control characters first become \xNN (terminal_safe), whose backslash is escaped below.
  const std::string text = terminal_safe(raw);
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
      case '%':
      case '$':
      case '#':
      case '_':
      case '{':
      case '}':
        out += '\\';
        out += c;
        break;
      case '~':
        out += "\\textasciitilde{}";
        break;
      case '^':
        out += "\\textasciicircum{}";
        break;
      case '\\':
        out += "\\textbackslash{}";
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string text_chart(const std::string& title, const std::vector<Curve>& curves,
                       const std::string& x_label, int width, int height) {
  static const char kSymbols[] = "*o+x#@%&=$ABCDEFGHIJKLMNOP";
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Curve& c : curves)
    for (auto [x, y] : c.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  std::string out = title + "\n";
  if (!std::isfinite(x0)) return out + "  (no points)\n";
  if (y1 == y0) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  if (x1 == x0) x1 = x0 + 1;
  std::vector<std::string> grid(static_cast<size_t>(height), std::string(width, ' '));
  bool shared = false;
  for (size_t ci = 0; ci < curves.size(); ++ci) {
    char sym = kSymbols[ci % (sizeof kSymbols - 1)];
    // Each column gets the mean of the points that fall in it, so 1,000 steps draw as a line.
    std::vector<double> sum(width, 0);
    std::vector<int> n(width, 0);
    for (auto [x, y] : curves[ci].points) {
      if (!std::isfinite(y)) continue;
      int col = static_cast<int>(std::lround((x - x0) / (x1 - x0) * (width - 1)));
      sum[col] += y;
      ++n[col];
    }
    for (int col = 0; col < width; ++col) {
      if (!n[col]) continue;
      double y = sum[col] / n[col];
      int row = static_cast<int>(std::lround((y1 - y) / (y1 - y0) * (height - 1)));
      char& cell = grid[row][col];
      cell = cell == ' ' || cell == sym ? sym : '?';  // '?': two runs on one cell
      shared = shared || cell == '?';
    }
  }
  std::vector<std::string> ylab(height);
  ylab[0] = num(y1);
  ylab[height - 1] = num(y0);
  ylab[(height - 1) / 2] = num(y1 - (y1 - y0) * ((height - 1) / 2) / (height - 1));
  size_t lw = 0;
  for (const std::string& l : ylab) lw = std::max(lw, l.size());
  for (int r = 0; r < height; ++r) out += pad_columns(ylab[r], lw, true) + " |" + grid[r] + "\n";
  out += std::string(lw, ' ') + " +" + std::string(width, '-') + "\n";
  std::string xl = num(x0), xr = num(x1);
  std::string xaxis =
      xl + std::string(std::max<int>(1, width - static_cast<int>(xl.size() + xr.size())), ' ') + xr;
  out += std::string(lw + 2, ' ') + xaxis + "\n";
  out += std::string(lw + 2, ' ') + pad_columns("", static_cast<size_t>(width / 2 - 2)) + x_label +
         "\n";
  for (size_t ci = 0; ci < curves.size(); ++ci)
    out +=
        std::string("  ") + kSymbols[ci % (sizeof kSymbols - 1)] + "  " + curves[ci].label + "\n";
  if (shared) out += "  ?  more than one run\n";
  return out;
}

int runs_command(const RunsOptions& o) {
  std::FILE* out = stdout;
  const std::string& a = o.action;
  if (a == "fork") return runs_fork_command(o);
  if (a == "reproduce") return runs_reproduce_command(o);
  if (a == "diff") return runs_diff_command(o);
  if (a == "delete") return delete_command(o, out);
  if (a == "tag") return tag_command(o, out);
  if (a == "note") return note_command(o, out);
  if (!std::filesystem::exists(o.db))
    return fail(o.db + ": no run database here (train with `mlstudio --run P.mls --db " + o.db +
                "` first)");
  if (a == "list") return list_command(o, out);
  if (a == "show") return show_command(o, out);
  if (a == "compare") return compare_command(o, out);
  if (a == "export") return export_command(o, out);
  if (a == "query") return query_command(o, out);
  return fail("runs: unknown action '" + a + "'");
}

CLI::App* add_runs_command(CLI::App& app, RunsOptions& o) {
  CLI::App* runs = app.add_subcommand(
      "runs",
      "The experiment database: list, show, compare, tag, note, delete, export, query, "
      "fork, reproduce and diff runs");
  // A missing or unknown subcommand is named by runs_main, not CLI11's "A subcommand is
  // required": the word goes to the extras.
  runs->require_subcommand(0, 1);
  runs->allow_extras();
  const CLI::Validator id = whole<int64_t>(1, std::numeric_limits<int64_t>::max());
  const CLI::Validator count = whole<int64_t>(0, std::numeric_limits<int64_t>::max());
  const std::string fields =
      "fields: id name status started ended duration device seed world_size experiment parent "
      "fork_step sweep trial note project project_hash, params.KEY, metrics.KEY[.latest|min|max|"
      "best|count|step|best_step], tags.KEY";

  auto* list = runs->add_subcommand("list", "One line per run, filtered and sorted");
  auto* show = runs->add_subcommand(
      "show", "Everything about a run: params, metrics, tags, note, artifacts, system, lineage");
  auto* compare = runs->add_subcommand(
      "compare", "Runs side by side: params, metrics (last, best, min, max) and a chart");
  auto* tag = runs->add_subcommand("tag", "Tag a run: KEY or KEY=VALUE (or remove tags)");
  auto* note = runs->add_subcommand("note", "Set a run's note (\"\" clears it)");
  auto* del = runs->add_subcommand("delete", "Delete runs with their checkpoints and artifacts");
  auto* exp = runs->add_subcommand("export", "The run table as CSV, JSON or a LaTeX table");
  auto* query = runs->add_subcommand("query", "Run a read-only SQL SELECT on the database");
  auto* fork = runs->add_subcommand(
      "fork", "Continue a run's checkpoint as a child run with changed settings or graph");
  auto* repro = runs->add_subcommand(
      "reproduce", "Re-run a run from its snapshot and compare the metrics step by step");
  auto* diff = runs->add_subcommand("diff", "Two runs' graphs and settings, node by node");

  for (auto* c : {list, show, compare, tag, note, del, exp, query, fork, repro, diff})
    c->add_option("--db", o.db, "The run database (SQLite)")->capture_default_str();
  for (auto* c : {list, exp}) {
    c->add_option(
        "--where", o.where,
        "Filter: comparisons (= != < <= > >= ~ LIKE) joined by AND, OR, NOT and "
        "parentheses, e.g. \"params.lr < 0.01 AND (status = 'finished' OR tags.keep)\"; " +
            fields);
    c->add_option("--sort", o.sort,
                  "Sort by a field (repeatable; then by id): KEY ascending, KEY:desc or "
                  "--sort=-KEY descending; missing values last")
        ->allow_extra_args(false);
    c->add_option("--columns", o.columns,
                  "Comma-separated fields to show (default: id, "
                  "status, name, started, device and key metrics)")
        ->delimiter(',');
    c->add_option("--limit", o.limit, "At most N runs (0: all)")->check(count);
  }
  list->add_flag("--json", o.json, "JSON: an array of objects, one per run");
  auto* csv = exp->add_flag_callback(
      "--csv", [&o] { o.format = "csv"; }, "CSV (RFC 4180)");
  auto* js = exp->add_flag_callback(
      "--json", [&o] { o.format = "json"; }, "JSON array");
  auto* tex = exp->add_flag_callback(
      "--latex", [&o] { o.format = "latex"; }, "A LaTeX booktabs tabular, text escaped");
  csv->excludes(js)->excludes(tex);
  js->excludes(tex);

  show->add_option("id", o.run_id, "Run id")->required()->check(id);
  show->add_flag("--json", o.json, "JSON output");

  compare->add_option("ids", o.ids, "Two or more run ids")->required()->check(id);
  compare->add_flag("--diff-only", o.diff_only, "Only the params and metrics that differ");
  compare
      ->add_option("--at-step", o.at_step,
                   "Also each metric's value at this step (the last point at or before it)")
      ->check(count);
  compare
      ->add_option("--metric", o.metrics,
                   "The metric to chart (repeatable; default: train/loss, else val/loss, else "
                   "the first)")
      ->allow_extra_args(false);
  compare->add_flag("--json", o.json, "JSON output");

  tag->add_option("id", o.run_id, "Run id")->required()->check(id);
  tag->add_option("tags", o.tags, "KEY or KEY=VALUE (repeatable)")->required();
  tag->add_flag("--remove", o.remove, "Remove the tags named (keys only)");

  note->add_option("id", o.run_id, "Run id")->required()->check(id);
  note->add_option("text", o.text, "The note (\"\" clears it)")->required();

  del->add_option("ids", o.ids, "The runs to delete")->required()->check(id);

  query->add_option("sql", o.sql, "One SELECT (or WITH, or a reading PRAGMA)")->required();
  auto* qj = query->add_flag("--json", o.json, "JSON: an array of objects");
  query
      ->add_flag_callback(
          "--csv", [&o] { o.format = "csv"; }, "CSV (RFC 4180)")
      ->excludes(qj);

  fork->add_option("id", o.run_id, "The run to continue")->required()->check(id);
  fork->add_option("--step", o.step,
                   "The parent's step to continue from: its last epoch checkpoint at or before "
                   "it (default: its last checkpoint)")
      ->check(count);
  fork->add_option("--set", o.sets,
                   "KEY=VALUE: a training setting, a path in training or dataset, or a node's "
                   "parameter (repeatable)")
      ->allow_extra_args(false);
  fork->add_option("--project", o.project, "Continue with this project's graph instead")
      ->check(CLI::ExistingFile);
  fork->add_option("--epochs", o.epochs, "Train to this many epochs in all")
      ->check(whole<int64_t>(1, 1000000));
  fork->add_flag("--quiet", o.quiet, "No per-epoch lines");

  repro->add_option("id", o.run_id, "The run to re-run")->required()->check(id);
  repro->add_flag("--quiet", o.quiet, "No per-epoch lines");
  diff->add_option("ids", o.ids, "Two run ids: A B")->required()->expected(2)->check(id);
  return runs;
}

int runs_main(CLI::App* runs_cmd, RunsOptions& o) {
  std::vector<CLI::App*> given = runs_cmd->get_subcommands();
  if (given.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* s : runs_cmd->get_subcommands([](CLI::App*) { return true; }))
      names.push_back(s->get_name());
    std::string word;
    for (const std::string& w : runs_cmd->remaining())
      if (!w.empty() && w[0] != '-') {
        word = w;
        break;
      }
    std::string guess = word.empty() ? "" : store::closest(word, names);
    return fail("runs: " +
                (word.empty() ? std::string("say what to do")
                              : "unknown action '" + word + "'" +
                                    (guess.empty() ? "" : " (did you mean " + guess + "?)")) +
                "; one of " + quoted_list(names));
  }
  o.action = given.front()->get_name();
  return runs_command(o);
}

}  // namespace mls::app
