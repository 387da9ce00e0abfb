// The notebook section of a .mls: parsing (messages name the JSON pointer) and saving
// (sources as arrays of lines, optional flags only when set).
#include "nodes/notebook.h"

#include <algorithm>
#include <set>

#include "nodes/document.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;

std::string at(const std::string& source_name, const std::string& path) {
  return source_name + ": " + path + ": ";
}

// Lines joined with "\n"; a string taken as it is.
Result<std::string> read_source(const json& s, const std::string& where) {
  if (s.is_string()) return s.get<std::string>();
  if (!s.is_array()) return make_error(where + "must be a string or an array of lines");
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!s[i].is_string())
      return make_error(where.substr(0, where.size() - 2) + "/" + std::to_string(i) +
                        ": must be a string");
    if (i) out += "\n";
    out += s[i].get<std::string>();
  }
  return out;
}

Result<Cell> parse_cell(const json& c, const std::string& source_name, const std::string& path) {
  if (!c.is_object()) return make_error(at(source_name, path) + "must be an object");
  static const std::vector<std::string> keys = {"id",        "kind", "source", "view",
                                                "on_demand", "role", "starter"};
  for (const auto& [key, value] : c.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      return make_error(at(source_name, path + "/" + key) + "unknown key '" + key +
                        "' (expected 'id', 'kind', 'source', 'view', 'on_demand', 'role', "
                        "'starter')");
  Cell cell;
  auto id = c.find("id");
  if (id == c.end()) return make_error(at(source_name, path) + "a cell needs an \"id\"");
  if (!id->is_string() || !is_valid_node_id(id->get<std::string>()))
    return make_error(at(source_name, path + "/id") +
                      "must be a string matching [A-Za-z_][A-Za-z0-9_.-]*");
  cell.id = id->get<std::string>();
  auto kind = c.find("kind");
  if (kind == c.end()) return make_error(at(source_name, path) + "a cell needs a \"kind\"");
  std::optional<CellKind> k;
  if (kind->is_string()) k = parse_cell_kind(kind->get<std::string>());
  if (!k)
    return make_error(at(source_name, path + "/kind") + "unknown cell kind " + kind->dump() +
                      " (expected 'lua', 'markdown', 'view')");
  cell.kind = *k;
  if (auto s = c.find("source"); s != c.end()) {
    auto src = read_source(*s, at(source_name, path + "/source"));
    if (!src) return src.error();
    cell.source = std::move(*src);
  }
  if (auto v = c.find("view"); v != c.end()) {
    if (cell.kind != CellKind::View)
      return make_error(at(source_name, path + "/view") + "only a view cell has a view");
    if (!v->is_string() || !is_cell_view(v->get<std::string>()))
      return make_error(at(source_name, path + "/view") + "unknown view " + v->dump() +
                        " (expected " + cell_views_list() + ")");
    cell.view = v->get<std::string>();
  } else if (cell.kind == CellKind::View) {
    return make_error(at(source_name, path) + "a view cell needs a \"view\" (" + cell_views_list() +
                      ")");
  }
  if (auto d = c.find("on_demand"); d != c.end()) {
    if (!d->is_boolean())
      return make_error(at(source_name, path + "/on_demand") + "must be true or false");
    cell.on_demand = d->get<bool>();
  }
  if (auto r = c.find("role"); r != c.end()) {
    std::optional<CellRole> role;
    if (r->is_string() && !r->get<std::string>().empty())
      role = parse_cell_role(r->get<std::string>());
    if (!role)
      return make_error(at(source_name, path + "/role") + "unknown role " + r->dump() +
                        " (expected 'locked', 'answer', 'check', 'hidden-check')");
    if (cell.kind != CellKind::Lua && *role != CellRole::Locked)
      return make_error(at(source_name, path + "/role") + "a " +
                        std::string(cell_kind_name(cell.kind)) +
                        " cell can only be 'locked' (answers and checks are Lua cells)");
    cell.role = *role;
  }
  if (auto s = c.find("starter"); s != c.end()) {
    if (cell.role != CellRole::Answer)
      return make_error(at(source_name, path + "/starter") + "only an answer cell has a starter");
    auto src = read_source(*s, at(source_name, path + "/starter"));
    if (!src) return src.error();
    cell.starter = std::move(*src);
  }
  return cell;
}

Result<Notebook> parse(const json& j, const std::string& source_name,
                       std::vector<std::string>* salvage_warnings) {
  Notebook nb;
  nb.present = true;
  const std::string path = "/notebook";
  if (!j.is_object()) return make_error(at(source_name, path) + "must be an object");
  for (const auto& [key, value] : j.items())
    if (key != "cells" && key != "lazy")
      return make_error(at(source_name, path + "/" + key) + "unknown key '" + key +
                        "' (expected 'cells', 'lazy')");
  if (auto l = j.find("lazy"); l != j.end()) {
    if (!l->is_boolean())
      return make_error(at(source_name, path + "/lazy") + "must be true or false");
    nb.lazy = l->get<bool>();
  }
  auto cells = j.find("cells");
  if (cells == j.end()) return nb;
  if (!cells->is_array()) return make_error(at(source_name, path + "/cells") + "must be an array");
  std::set<std::string> ids;
  for (size_t i = 0; i < cells->size(); ++i) {
    const std::string cpath = path + "/cells/" + std::to_string(i);
    Result<Cell> cell = parse_cell((*cells)[i], source_name, cpath);
    if (cell && ids.count(cell->id))
      cell = make_error(at(source_name, cpath + "/id") + "duplicate cell id '" + cell->id + "'");
    if (!cell) {
      if (!salvage_warnings) return cell.error();
      salvage_warnings->push_back(cell.error().message + " (cell left out)");
      continue;
    }
    ids.insert(cell->id);
    nb.cells.push_back(std::move(*cell));
  }
  return nb;
}

}  // namespace

std::string_view cell_kind_name(CellKind k) {
  switch (k) {
    case CellKind::Lua:
      return "lua";
    case CellKind::Markdown:
      return "markdown";
    case CellKind::View:
      return "view";
  }
  return "lua";
}

std::string_view cell_role_name(CellRole r) {
  switch (r) {
    case CellRole::Free:
      return "";
    case CellRole::Locked:
      return "locked";
    case CellRole::Answer:
      return "answer";
    case CellRole::Check:
      return "check";
    case CellRole::HiddenCheck:
      return "hidden-check";
  }
  return "";
}

std::optional<CellRole> parse_cell_role(std::string_view name) {
  for (CellRole r : {CellRole::Locked, CellRole::Answer, CellRole::Check, CellRole::HiddenCheck})
    if (cell_role_name(r) == name) return r;
  return std::nullopt;
}

bool is_cell_view(std::string_view view) {
  return std::any_of(std::begin(kCellViews), std::end(kCellViews),
                     [&](const char* k) { return view == k; });
}

std::string cell_views_list() {
  std::string out;
  for (const char* v : kCellViews) out += std::string(out.empty() ? "'" : ", '") + v + "'";
  return out;
}

std::optional<CellKind> parse_cell_kind(std::string_view name) {
  for (CellKind k : {CellKind::Lua, CellKind::Markdown, CellKind::View})
    if (cell_kind_name(k) == name) return k;
  return std::nullopt;
}

const Cell* Notebook::find(std::string_view id) const {
  for (const Cell& c : cells)
    if (c.id == id) return &c;
  return nullptr;
}

std::optional<size_t> Notebook::index_of(std::string_view id) const {
  for (size_t i = 0; i < cells.size(); ++i)
    if (cells[i].id == id) return i;
  return std::nullopt;
}

Result<Notebook> parse_notebook(const nlohmann::json& j, const std::string& source_name) {
  return parse(j, source_name, nullptr);
}

Result<Notebook> parse_notebook(const nlohmann::json& j, const std::string& source_name,
                                std::vector<std::string>& salvage_warnings) {
  return parse(j, source_name, &salvage_warnings);
}

nlohmann::json notebook_to_json(const Notebook& nb) {
  return nlohmann::json::parse(notebook_to_ordered_json(nb).dump());
}

namespace {
// A text as an array of its lines (diffs stay readable).
nlohmann::ordered_json lines_json(const std::string& text) {
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  size_t start = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}
}  // namespace

nlohmann::ordered_json notebook_to_ordered_json(const Notebook& nb) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (nb.lazy) out["lazy"] = true;
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const Cell& c : nb.cells) {
    nlohmann::ordered_json cell = {{"id", c.id}, {"kind", std::string(cell_kind_name(c.kind))}};
    if (c.kind == CellKind::View) {
      if (!c.source.empty()) cell["source"] = c.source;
      cell["view"] = c.view;
    } else {
      cell["source"] = lines_json(c.source);
    }
    if (c.on_demand) cell["on_demand"] = true;
    if (c.role != CellRole::Free) cell["role"] = std::string(cell_role_name(c.role));
    if (c.role == CellRole::Answer && !c.starter.empty()) cell["starter"] = lines_json(c.starter);
    cells.push_back(std::move(cell));
  }
  out["cells"] = std::move(cells);
  return out;
}

}  // namespace mls::nodes
