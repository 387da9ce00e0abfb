#include "scripting/notebook/outputs.h"

#include <cstdint>
#include <filesystem>

#include "engine/core/atomic_file.h"
#include "nodes/json_text.h"

namespace mls::lua {

using nlohmann::json;

namespace {

constexpr int kOutputsFormat = 1;
constexpr uint64_t kMaxOutputsBytes = uint64_t{1} << 30;

Error bad(const std::string& where, const std::string& what) {
  return make_error(where + ": " + what);
}

// Reads an optional key of the expected type; a wrong type is an error naming the key.
template <typename T>
Result<void> get(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    return bad(where + "/" + key, "has the wrong type");
  }
  return {};
}

}  // namespace

json figure_to_json(const Figure& f) {
  return {{"svg", f.svg}, {"title", f.title}, {"width", f.width}, {"height", f.height}};
}

json widget_to_json(const Widget& w) {
  json j = {{"kind", w.kind}, {"name", w.name}, {"label", w.label}, {"value", w.value}};
  if (w.kind == "slider") {
    j["min"] = w.min;
    j["max"] = w.max;
    j["step"] = w.step;
  }
  if (!w.options.empty()) j["options"] = w.options;
  return j;
}

json table_to_json(const Table& t) {
  json j = {{"title", t.title},         {"columns", t.columns},       {"rows", t.rows},
            {"truncated", t.truncated}, {"total_rows", t.total_rows}, {"total_cols", t.total_cols}};
  if (!t.shape.empty()) j["shape"] = t.shape;
  if (!t.row_labels.empty()) j["row_labels"] = t.row_labels;
  if (!t.note.empty()) j["note"] = t.note;
  return j;
}

json cell_output_to_json(const CellOutput& o) {
  json j = {{"text", o.text}, {"ok", o.ok}, {"seconds", o.seconds}, {"hash", o.hash}};
  if (!o.ok) {
    j["error"] = o.error;
    j["error_line"] = o.error_line;
  }
  if (!o.figures.empty()) {
    j["figures"] = json::array();
    for (const auto& f : o.figures) j["figures"].push_back(figure_to_json(f));
  }
  if (!o.widgets.empty()) {
    j["widgets"] = json::array();
    for (const auto& w : o.widgets) j["widgets"].push_back(widget_to_json(w));
  }
  if (!o.tables.empty()) {
    j["tables"] = json::array();
    for (const auto& t : o.tables) j["tables"].push_back(table_to_json(t));
  }
  if (o.run_id != 0) j["run_id"] = o.run_id;
  return j;
}

Result<Figure> figure_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a figure must be an object");
  Figure f;
  if (auto r = get(j, "svg", f.svg, where); !r) return r.error();
  if (auto r = get(j, "title", f.title, where); !r) return r.error();
  if (auto r = get(j, "width", f.width, where); !r) return r.error();
  if (auto r = get(j, "height", f.height, where); !r) return r.error();
  return f;
}

Result<Widget> widget_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a widget must be an object");
  Widget w;
  for (auto [key, out] : {std::pair{"kind", &w.kind}, {"name", &w.name}, {"label", &w.label}})
    if (auto r = get(j, key, *out, where); !r) return r.error();
  for (auto [key, out] : {std::pair{"min", &w.min}, {"max", &w.max}, {"step", &w.step}})
    if (auto r = get(j, key, *out, where); !r) return r.error();
  if (auto r = get(j, "options", w.options, where); !r) return r.error();
  if (auto it = j.find("value"); it != j.end()) w.value = *it;
  if (w.name.empty()) return bad(where, "a widget needs a name");
  return w;
}

Result<Table> table_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a table must be an object");
  Table t;
  if (auto r = get(j, "title", t.title, where); !r) return r.error();
  if (auto r = get(j, "shape", t.shape, where); !r) return r.error();
  if (auto r = get(j, "columns", t.columns, where); !r) return r.error();
  if (auto r = get(j, "row_labels", t.row_labels, where); !r) return r.error();
  if (auto r = get(j, "rows", t.rows, where); !r) return r.error();
  if (auto r = get(j, "truncated", t.truncated, where); !r) return r.error();
  if (auto r = get(j, "total_rows", t.total_rows, where); !r) return r.error();
  if (auto r = get(j, "total_cols", t.total_cols, where); !r) return r.error();
  if (auto r = get(j, "note", t.note, where); !r) return r.error();
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (t.rows[i].size() != t.columns.size())
      return bad(where + "/rows/" + std::to_string(i),
                 "has " + std::to_string(t.rows[i].size()) + " cells for " +
                     std::to_string(t.columns.size()) + " columns");
  if (!t.row_labels.empty() && t.row_labels.size() != t.rows.size())
    return bad(where + "/row_labels", "must have one label per row");
  return t;
}

Result<CellOutput> cell_output_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a cell's output must be an object");
  CellOutput o;
  if (auto r = get(j, "text", o.text, where); !r) return r.error();
  if (auto r = get(j, "ok", o.ok, where); !r) return r.error();
  if (auto r = get(j, "error", o.error, where); !r) return r.error();
  if (auto r = get(j, "error_line", o.error_line, where); !r) return r.error();
  if (auto r = get(j, "seconds", o.seconds, where); !r) return r.error();
  if (auto r = get(j, "run_id", o.run_id, where); !r) return r.error();
  if (auto r = get(j, "hash", o.hash, where); !r) return r.error();
  if (auto it = j.find("figures"); it != j.end()) {
    if (!it->is_array()) return bad(where + "/figures", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      auto f = figure_from_json((*it)[i], where + "/figures/" + std::to_string(i));
      if (!f) return f.error();
      o.figures.push_back(std::move(*f));
    }
  }
  if (auto it = j.find("tables"); it != j.end()) {
    if (!it->is_array()) return bad(where + "/tables", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      auto t = table_from_json((*it)[i], where + "/tables/" + std::to_string(i));
      if (!t) return t.error();
      o.tables.push_back(std::move(*t));
    }
  }
  if (auto it = j.find("widgets"); it != j.end()) {
    if (!it->is_array()) return bad(where + "/widgets", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      auto w = widget_from_json((*it)[i], where + "/widgets/" + std::to_string(i));
      if (!w) return w.error();
      o.widgets.push_back(std::move(*w));
    }
  }
  return o;
}

std::string outputs_path(const std::string& project_path) {
  const std::string ext = ".mls";
  if (project_path.size() > ext.size() &&
      project_path.compare(project_path.size() - ext.size(), ext.size(), ext) == 0)
    return project_path.substr(0, project_path.size() - ext.size()) + ".outputs.json";
  return project_path + ".outputs.json";
}

Result<std::optional<SavedOutputs>> load_outputs(const std::string& project_path) {
  const std::string path = outputs_path(project_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<SavedOutputs>{};
  auto bytes = read_whole_file(path, kMaxOutputsBytes);
  if (!bytes) return bytes.error();
  json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (j.is_discarded())
    return bad(path, "not valid JSON (a broken outputs file; delete it and run again)");
  if (!j.is_object()) return bad(path, "must be a JSON object");
  if (!j.contains("format") || j["format"] != kOutputsFormat)
    return bad(path, "/format: expected " + std::to_string(kOutputsFormat));
  auto cells = j.find("cells");
  if (cells == j.end() || !cells->is_object()) return bad(path, "/cells: expected an object");
  SavedOutputs out;
  for (auto it = cells->begin(); it != cells->end(); ++it) {
    auto o = cell_output_from_json(it.value(), path + ": /cells/" + it.key());
    if (!o) return o.error();
    o->cell_id = it.key();
    out.emplace(it.key(), std::move(*o));
  }
  return std::optional<SavedOutputs>(std::move(out));
}

Result<void> save_outputs(const std::string& project_path, const SavedOutputs& outputs) {
  const std::string path = outputs_path(project_path);
  json cells = json::object();
  for (const auto& [id, o] : outputs) cells[id] = cell_output_to_json(o);
  json j = {{"format", kOutputsFormat}, {"cells", cells}};
  auto r = write_text_atomically(path, nodes::json_text(j, 1) + "\n");
  if (!r) return make_error("cannot save " + path + ": " + r.error().message);
  return {};
}

}  // namespace mls::lua
