// [SECTION] tensors   tables of the printed values, heatmaps, image grids
// [SECTION] summaries projects (nodes/analysis.h) and mls.nn modules (their own parameters)
// [SECTION] returned  a cell's returned value to its rich outputs
#include "scripting/notebook/rich_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "datasets/dataset_spec.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/notebook/graph_figure.h"
#include "scripting/notebook/plot.h"
#include "scripting/train_lib.h"

namespace mls::lua {

namespace {

std::string dims_text(const std::vector<int64_t>& dims, bool batch = false) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + (batch && dims[i] < 0 ? std::string("N") : std::to_string(dims[i]));
  return s + "]";
}

// [SECTION] tensors

Table make_tensor_table(const Shape& s, DType dtype, const std::vector<double>& v,
                        const std::string& title, TableLimits limits) {
  Table t;
  t.title = title;
  t.shape = s;
  if (s.empty()) return t;
  const ElementFormat fmt = element_format(dtype, v);
  const int64_t cols = s.size() == 1 ? 1 : s.back();
  const int64_t rows = s.size() == 1 ? s[0] : (cols == 0 ? 0 : numel(s) / cols);
  t.total_rows = static_cast<size_t>(rows);
  t.total_cols = static_cast<size_t>(cols);
  const size_t nr = std::min(t.total_rows, limits.rows), nc = std::min(t.total_cols, limits.cols);
  t.truncated = nr < t.total_rows || nc < t.total_cols;
  if (s.size() == 1) {
    t.columns = {"value"};
  } else {
    for (size_t c = 0; c < nc; ++c) t.columns.push_back(std::to_string(c));
  }
  // Row labels: the index, or for more than 2 dims the index of every leading dim.
  std::vector<int64_t> lead(s.begin(), s.size() == 1 ? s.end() : s.end() - 1);
  for (size_t r = 0; r < nr; ++r) {
    if (lead.size() <= 1) {
      t.row_labels.push_back(std::to_string(r));
    } else {
      std::vector<int64_t> idx(lead.size());
      int64_t rest = static_cast<int64_t>(r);
      for (size_t k = lead.size(); k-- > 0;) {
        idx[k] = rest % lead[k];
        rest /= lead[k];
      }
      std::string label = "[";
      for (size_t k = 0; k < idx.size(); ++k) label += (k ? "," : "") + std::to_string(idx[k]);
      t.row_labels.push_back(label + "]");
    }
    std::vector<std::string> row;
    row.reserve(nc);
    for (size_t c = 0; c < nc; ++c) row.push_back(fmt(v[r * static_cast<size_t>(cols) + c]));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// A rows x cols matrix averaged over blocks so that neither side passes `max_side`.
struct Blocks {
  int rows, cols, block_rows, block_cols;
  std::vector<double> values;
};
Blocks block_mean(int64_t rows, int64_t cols, const std::vector<double>& v, int64_t max_side) {
  const int64_t br = (rows + max_side - 1) / max_side, bc = (cols + max_side - 1) / max_side;
  Blocks b{static_cast<int>((rows + br - 1) / br),
           static_cast<int>((cols + bc - 1) / bc),
           static_cast<int>(br),
           static_cast<int>(bc),
           {}};
  b.values.resize(static_cast<size_t>(b.rows) * static_cast<size_t>(b.cols));
  for (int i = 0; i < b.rows; ++i)
    for (int j = 0; j < b.cols; ++j) {
      double sum = 0;
      int64_t n = 0;
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r)
        for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) {
          const double x = v[static_cast<size_t>(r * cols + c)];
          if (std::isfinite(x)) sum += x, ++n;
        }
      b.values[static_cast<size_t>(i) * b.cols + j] =
          n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
    }
  return b;
}

std::vector<Figure> make_tensor_figures(const Shape& s, const std::vector<double>& v,
                                        const std::string& title) {
  std::vector<Figure> out;
  if (numel(s) == 0) return out;
  auto add = [&](Result<std::string> svg, const std::string& t) {
    if (!svg) return;
    // The size the renderer chose, from its root element.
    auto attr = [&](const char* a) {
      const size_t p = svg->find(std::string(" ") + a + "=\"");
      return p == std::string::npos ? 0 : std::atoi(svg->c_str() + p + std::strlen(a) + 3);
    };
    out.push_back({.svg = *svg, .title = t, .width = attr("width"), .height = attr("height")});
  };
  if (s.size() == 2) {
    constexpr int64_t kSide = 64;
    if (s[0] <= kSide && s[1] <= kSide) {
      add(plot::render_heatmap(static_cast<int>(s[0]), static_cast<int>(s[1]), v, title), title);
    } else {
      const Blocks b = block_mean(s[0], s[1], v, kSide);
      const std::string t = title + " (means of " + std::to_string(b.block_rows) + "x" +
                            std::to_string(b.block_cols) + " blocks)";
      add(plot::render_heatmap(b.rows, b.cols, b.values, t), t);
    }
    return out;
  }
  const bool images = s.size() == 3 || (s.size() == 4 && (s[1] == 1 || s[1] == 3));
  if (!images) return out;
  const int64_t n = s[0], c = s.size() == 4 ? s[1] : 1, h = s[s.size() - 2], w = s.back();
  constexpr int64_t kImages = 16;
  const int64_t shown = std::min(n, kImages);
  const std::vector<plot::Image> ims = plot::images_from_planes(v, n, c, h, w, kImages);
  const std::string t =
      shown < n ? title + " (the first " + std::to_string(shown) + " of " + std::to_string(n) + ")"
                : title;
  add(plot::render_images(ims, static_cast<int>(std::min<int64_t>(shown, 8)), t), t);
  return out;
}

// [SECTION] summaries

// Walks an mls.nn module (argument 1) with is_tensor (argument 2): {path, type, parameter
// shapes, count} for each leaf module and each module with parameters of its own, and the
// total. Lua, so that a module's own methods (children) decide what it holds.
constexpr const char* kWalkModule = R"lua(
local m, is_tensor = ...
local rows = {}
local function own(mod)
  local n, shapes = 0, {}
  for _, k in ipairs(rawget(mod, "_order") or {}) do
    local v = rawget(mod, k)
    if is_tensor(v) and v:needs_grad() then
      n = n + v:numel()
      shapes[#shapes + 1] = k .. " [" .. table.concat(v:shape(), ", ") .. "]"
    end
  end
  return n, table.concat(shapes, ", ")
end
local function walk(mod, path, depth)
  local kids = depth < 32 and mod:children() or {}
  local n, shapes = own(mod)
  if #kids == 0 or n > 0 then
    rows[#rows + 1] = {path == "" and "(model)" or path, tostring(rawget(getmetatable(mod), "__name")), shapes, n}
  end
  for _, kv in ipairs(kids) do
    walk(kv[2], path == "" and tostring(kv[1]) or path .. "." .. tostring(kv[1]), depth + 1)
  end
end
walk(m, "", 0)
return rows, m:num_parameters()
)lua";

int is_tensor_fn(lua_State* L) {
  lua_pushboolean(L, luaL_testudata(L, 1, "mls.Tensor") != nullptr);
  return 1;
}

bool is_module(lua_State* L, int idx) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return false;
  lua_pushstring(L, "__is_module");
  lua_rawget(L, -2);
  const bool yes = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return yes;
}

std::string string_at(lua_State* L, int table, int i) {
  lua_rawgeti(L, table, i);
  size_t n = 0;
  const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : nullptr;
  std::string out = s ? std::string(s, n) : std::string();
  lua_pop(L, 1);
  return out;
}

// The module's summary; false when its walk failed (a module whose methods raise).
bool module_summary(lua_State* L, int idx, Table* out) {
  const int top = lua_gettop(L);
  if (luaL_loadbufferx(L, kWalkModule, std::strlen(kWalkModule), "=module summary", "t") !=
      LUA_OK) {
    lua_settop(L, top);
    return false;
  }
  lua_pushvalue(L, idx);
  lua_pushcfunction(L, is_tensor_fn);
  if (lua_pcall(L, 2, 2, 0) != LUA_OK || !lua_istable(L, -2)) {
    lua_settop(L, top);
    return false;
  }
  const int rows = lua_absindex(L, -2);
  const int64_t total =
      lua_isinteger(L, -1) ? lua_tointeger(L, -1) : static_cast<int64_t>(lua_tonumber(L, -1));
  std::vector<SummaryRow> summary;
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, rows));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, rows, i);
    const int row = lua_gettop(L);
    SummaryRow r;
    r.name = string_at(L, row, 1);
    r.type = string_at(L, row, 2);
    r.shape = string_at(L, row, 3);
    lua_rawgeti(L, row, 4);
    r.params = static_cast<int64_t>(lua_tonumber(L, -1));
    lua_pop(L, 2);
    summary.push_back(std::move(r));
  }
  lua_getmetatable(L, idx);
  lua_pushstring(L, "__name");
  lua_rawget(L, -2);
  const std::string name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "module";
  lua_settop(L, top);
  *out = summary_table("model summary: " + name, "parameter shapes", summary, total);
  out->note = "output shapes follow the input: a module has none until it runs";
  return true;
}

// [SECTION] returned

// The project's summary table, then its graph drawn (graph_figure.h).
void add_project(lua_State* L, const nodes::Document& doc, const std::string& path,
                 CellOutput& out) {
  Runtime& rt = runtime(L);
  namespace fs = std::filesystem;
  const fs::path base = path.empty() ? fs::current_path() : fs::absolute(path).parent_path();
  data::DatasetSpec spec = doc.dataset;
  for (std::string* p : {&spec.path, &spec.npy.labels})
    if (!p->empty() && fs::path(*p).is_relative()) *p = (base / *p).string();
  nodes::InferContext data;
  std::string data_error;
  if (auto ok = check_dataset_paths(rt, spec); !ok) {
    data_error = ok.error().message;
  } else if (auto splits = data::open_dataset(spec, base.string(), 0, /*prefetch=*/false);
             !splits) {
    data_error = splits.error().message;
  } else {
    data = nodes::InferContext{
        splits->sample_shape, splits->num_classes,
        splits->target_kind == TargetKind::Values ? splits->target_shape : Shape{}};
  }
  const std::string name = !doc.name.empty() ? doc.name
                           : path.empty()    ? "untitled"
                                             : fs::path(path).stem().string();
  const nodes::DocumentAnalysis a =
      nodes::analyze_document(doc, data, path.empty() ? "untitled" : path);
  Table t = project_summary(doc, a, "model summary: " + name);
  if (!data_error.empty())
    t.note = "no shapes: the dataset did not open (" + data_error + ")" +
             (t.note.empty() ? "" : "; " + t.note);
  out.tables.push_back(std::move(t));
  out.figures.push_back(graph_figure(doc, a, name));
}

}  // namespace

Table tensor_table(const Tensor& t, const std::string& title, TableLimits limits) {
  return make_tensor_table(t.shape(), t.dtype(), t.to_f64(), title, limits);
}

std::vector<Figure> tensor_figures(const Tensor& t, const std::string& title) {
  return make_tensor_figures(t.shape(), t.to_f64(), title);
}

Table summary_table(const std::string& title, const std::string& shape_column,
                    const std::vector<SummaryRow>& rows, int64_t total) {
  Table t;
  t.title = title;
  t.columns = {"layer", "type", shape_column, "parameters"};
  for (const SummaryRow& r : rows)
    t.rows.push_back({r.name, r.type, r.shape, r.known ? std::to_string(r.params) : "?"});
  t.rows.push_back({"total", "", "", std::to_string(total)});
  t.total_rows = t.rows.size();
  t.total_cols = t.columns.size();
  return t;
}

Table project_summary(const nodes::Document& doc, const nodes::DocumentAnalysis& a,
                      const std::string& title) {
  std::vector<SummaryRow> rows;
  std::string first_missing;
  for (size_t i : nodes::topological_order(doc)) {
    const nodes::NodeDoc& node = doc.nodes[i];
    SummaryRow r;
    r.name = node.id;
    r.type = node.type;
    auto it = a.nodes.find(node.id);
    if (it != a.nodes.end() && it->second.inferred) {
      for (size_t k = 0; k < it->second.outputs.size(); ++k)
        r.shape += (k ? " " : "") + dims_text(it->second.outputs[k], true);
      r.params = it->second.params;
    } else {
      r.known = false;
      if (first_missing.empty()) {
        const std::string why = it == a.nodes.end()         ? std::string("not analysed")
                                : !it->second.error.empty() ? it->second.error
                                                            : it->second.waiting;
        first_missing = node.id + ": " + why;
      }
    }
    rows.push_back(std::move(r));
  }
  Table t = summary_table(title, "output shape", rows, a.total_params);
  if (!first_missing.empty()) t.note = "no shapes for " + first_missing;
  return t;
}

bool add_returned_value(lua_State* L, int idx, int position, CellOutput& out, std::string* text) {
  idx = lua_absindex(L, idx);
  const std::string prefix = position > 1 ? "value " + std::to_string(position) + ": " : "";
  try {
    if (auto* t = static_cast<LuaTensor*>(luaL_testudata(L, idx, "mls.Tensor"))) {
      if (t->closed || t->trace_id || !t->value.defined() || t->value.shape().empty()) return false;
      const Shape s = t->value.shape();
      const std::vector<double> v = t->value.to_f64();
      const std::string name = "tensor " + dims_text(s) + " " +
                               std::string(dtype_name(t->value.dtype())) +
                               (t->requires_grad ? " (requires grad)" : "");
      out.tables.push_back(make_tensor_table(s, t->value.dtype(), v, prefix + name, {}));
      for (Figure& f : make_tensor_figures(s, v, prefix + name))
        out.figures.push_back(std::move(f));
      *text = name;
      return true;
    }
    std::string path;
    if (const nodes::Document* doc = project_document(L, idx, &path)) {
      add_project(L, *doc, path, out);
      return false;
    }
    if (is_module(L, idx)) {
      Table t;
      if (module_summary(L, idx, &t)) out.tables.push_back(std::move(t));
    }
  } catch (const std::exception&) {
    // A value that cannot be shown richly keeps its text.
  }
  return false;
}

}  // namespace mls::lua
