// mls.plot: line, scatter, hist, image, heatmap (the API in plot.h's renderer). Each call
// renders an SVG figure, appends it to the running cell's output (Runtime::cell_output) when
// there is one, and writes it to `file` (through Runtime::allowed_path) when given.
//
//   mls.plot.line{x = steps, y = losses, title = "loss", xlabel = "step"}
//   mls.plot.line{series = {{name = "train", y = tr}, {name = "val", y = va}}}
//   mls.plot.hist{values = w, bins = 30}
//   mls.plot.image{batch, cols = 8}      -- (H,W), (N,H,W), (N,1,H,W) or (N,3,H,W)
//   mls.plot.heatmap{m, title = "attention"}
//
// Arguments are checked first (raising before any C++ object exists); the rendering runs in
// a scope and its error is raised after it, as bindings.h asks.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/notebook/plot.h"

namespace mls::lua {

namespace {

// "[2,3,4]" into buf (no allocation: it may be raised).
const char* shape_buf(const Shape& s, char* buf, size_t n) {
  size_t o = static_cast<size_t>(std::snprintf(buf, n, "["));
  for (size_t i = 0; i < s.size() && o < n; ++i)
    o += static_cast<size_t>(
        std::snprintf(buf + o, n - o, i ? ",%lld" : "%lld", static_cast<long long>(s[i])));
  if (o < n) std::snprintf(buf + o, n - o, "]");
  return buf;
}

// Checks the value on the top of the stack as data of rank 1 (`rank` 1), 2 (`rank` 2) or an
// image batch (`rank` 0: 2, 3 or 4 dims, a 4-D one with 1 or 3 channels). Tables: numbers for
// rank 1, a table of equal-length rows of numbers otherwise. Raises naming `who` and `what`.
void check_data(lua_State* L, const char* who, const char* what, int rank) {
  const int idx = lua_gettop(L);
  if (LuaTensor* t = to_tensor(L, idx)) {
    if (t->closed) luaL_error(L, "%s: %s: the tensor was closed", who, what);
    if (t->trace_id) luaL_error(L, "%s: %s: a traced value has no data", who, what);
    const Shape& s = t->value.shape();
    char buf[128];
    const bool ok =
        rank == 0 ? (s.size() == 2 || s.size() == 3 || (s.size() == 4 && (s[1] == 1 || s[1] == 3)))
                  : s.size() == static_cast<size_t>(rank);
    if (!ok) {
      luaL_error(L, "%s: %s must be %s, got shape %s", who, what,
                 rank == 1   ? "1-D"
                 : rank == 2 ? "2-D"
                             : "(H,W), (N,H,W), (N,1,H,W) or (N,3,H,W)",
                 shape_buf(s, buf, sizeof buf));
    }
    if (numel(s) == 0)
      luaL_error(L, "%s: %s is empty (shape %s)", who, what, shape_buf(s, buf, sizeof buf));
    return;
  }
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: %s must be a tensor or a table, got %s", who, what, luaL_typename(L, idx));
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, idx));
  if (n == 0) luaL_error(L, "%s: %s is empty", who, what);
  lua_Integer cols = -1;
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    if (rank == 1) {
      if (!lua_isnumber(L, -1))
        luaL_error(L, "%s: %s[%d] is not a number", who, what, static_cast<int>(i));
    } else {
      if (!lua_istable(L, -1))
        luaL_error(L, "%s: %s[%d] is not a row (a table)", who, what, static_cast<int>(i));
      const lua_Integer m = static_cast<lua_Integer>(lua_rawlen(L, -1));
      if (m == 0 || (cols >= 0 && m != cols))
        luaL_error(L, "%s: %s: row %d has %d values (rows must have the same, non-zero length)",
                   who, what, static_cast<int>(i), static_cast<int>(m));
      cols = m;
      for (lua_Integer j = 1; j <= m; ++j) {
        lua_rawgeti(L, -1, j);
        if (!lua_isnumber(L, -1))
          luaL_error(L, "%s: %s[%d][%d] is not a number", who, what, static_cast<int>(i),
                     static_cast<int>(j));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}

// The checked data on the top of the stack: its values (row-major) and shape. Never raises.
void read_data(lua_State* L, std::vector<double>* v, Shape* shape) {
  const int idx = lua_gettop(L);
  if (LuaTensor* t = to_tensor(L, idx)) {
    *v = t->value.to_f64();
    *shape = t->value.shape();
    return;
  }
  const auto n = static_cast<lua_Integer>(lua_rawlen(L, idx));
  lua_rawgeti(L, idx, 1);
  const bool rows = lua_istable(L, -1);
  lua_pop(L, 1);
  if (!rows) {
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, i);
      v->push_back(lua_tonumber(L, -1));
      lua_pop(L, 1);
    }
    *shape = {n};
    return;
  }
  int64_t cols = 0;
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    cols = static_cast<int64_t>(lua_rawlen(L, -1));
    for (lua_Integer j = 1; j <= cols; ++j) {
      lua_rawgeti(L, -1, j);
      v->push_back(lua_tonumber(L, -1));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  *shape = {n, cols};
}

void check_string_field(lua_State* L, int arg, const char* who, const char* key) {
  lua_getfield(L, arg, key);
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "%s: %s must be a string, got %s", who, key, luaL_typename(L, -1));
  lua_pop(L, 1);
}

std::string field_string(lua_State* L, int arg, const char* key) {
  lua_getfield(L, arg, key);
  std::string s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  return s;
}

void check_common(lua_State* L, const char* who) {
  luaL_checktype(L, 1, LUA_TTABLE);
  for (const char* k : {"title", "xlabel", "ylabel", "file"}) check_string_field(L, 1, who, k);
}

int svg_size(const std::string& svg, const char* attr) {
  const size_t p = svg.find(std::string(" ") + attr + "=\"");
  return p == std::string::npos ? 0 : std::atoi(svg.c_str() + p + std::strlen(attr) + 3);
}

// Appends the figure to the cell's output and writes `file`; false with Runtime::error set
// when the render or the write failed.
bool emit(lua_State* L, const char* who, Result<std::string> svg) {
  Runtime& rt = runtime(L);
  if (!svg) {
    rt.error = std::string(who) + ": " + svg.error().message;
    return false;
  }
  const std::string title = field_string(L, 1, "title");
  const std::string file = field_string(L, 1, "file");
  if (rt.cell_output != nullptr) {
    rt.cell_output->figures.push_back({.svg = *svg,
                                       .title = title,
                                       .width = svg_size(*svg, "width"),
                                       .height = svg_size(*svg, "height")});
  }
  if (!file.empty()) {
    Result<std::string> path = rt.allowed_path(file, true);
    if (!path) {
      rt.error = std::string(who) + ": " + path.error().message;
      return false;
    }
    std::ofstream f(*path, std::ios::binary);
    f << *svg;
    if (!f.good()) {
      rt.error = std::string(who) + ": cannot write " + file;
      return false;
    }
  }
  return true;
}

// line and scatter: {x =, y =} or {series = {{name =, x =, y =}, ...}}.
int chart(lua_State* L, plot::Kind kind, const char* who) {
  check_common(L, who);
  lua_getfield(L, 1, "series");
  const bool has_series = !lua_isnil(L, -1);
  int n = 1;
  if (has_series) {
    if (!lua_istable(L, -1)) luaL_error(L, "%s: series must be a table of {name =, x =, y =}", who);
    n = static_cast<int>(lua_rawlen(L, -1));
    if (n == 0) luaL_error(L, "%s: series is empty", who);
  }
  const int series = lua_gettop(L);
  for (int i = 1; i <= n; ++i) {
    int tbl = 1;
    if (has_series) {
      lua_rawgeti(L, series, i);
      if (!lua_istable(L, -1)) luaL_error(L, "%s: series[%d] is not a table", who, i);
      tbl = lua_gettop(L);
      check_string_field(L, tbl, who, "name");
    }
    lua_getfield(L, tbl, "y");
    if (lua_isnil(L, -1))
      luaL_error(L, has_series ? "%s: series[%d].y is missing" : "%s: y is missing", who, i);
    check_data(L, who, "y", 1);
    lua_pop(L, 1);
    lua_getfield(L, tbl, "x");
    if (!lua_isnil(L, -1)) check_data(L, who, "x", 1);
    lua_pop(L, 1);
    if (has_series) lua_pop(L, 1);
  }
  bool ok = true;
  {
    plot::Chart c;
    c.kind = kind;
    c.title = field_string(L, 1, "title");
    c.xlabel = field_string(L, 1, "xlabel");
    c.ylabel = field_string(L, 1, "ylabel");
    for (int i = 1; i <= n; ++i) {
      int tbl = 1;
      if (has_series) {
        lua_rawgeti(L, series, i);
        tbl = lua_gettop(L);
      }
      plot::Series s;
      s.name = field_string(L, tbl, "name");
      Shape shape;
      lua_getfield(L, tbl, "y");
      read_data(L, &s.y, &shape);
      lua_pop(L, 1);
      lua_getfield(L, tbl, "x");
      if (lua_isnil(L, -1)) {
        for (size_t k = 0; k < s.y.size(); ++k) s.x.push_back(static_cast<double>(k + 1));
      } else {
        read_data(L, &s.x, &shape);
      }
      lua_pop(L, 1);
      if (has_series) lua_pop(L, 1);
      c.series.push_back(std::move(s));
    }
    ok = emit(L, who, plot::render_chart(c));
  }
  return ok ? 0 : raise(L);
}

int l_line(lua_State* L) {
  return chart(L, plot::Kind::Line, "mls.plot.line");
}
int l_scatter(lua_State* L) {
  return chart(L, plot::Kind::Scatter, "mls.plot.scatter");
}

int l_hist(lua_State* L) {
  const char* who = "mls.plot.hist";
  check_common(L, who);
  lua_getfield(L, 1, "values");
  if (lua_isnil(L, -1)) lua_rawgeti(L, 1, 1);
  if (lua_isnil(L, -1)) luaL_error(L, "%s: values is missing", who);
  if (LuaTensor* t = to_tensor(L, -1); t == nullptr || t->value.shape().size() != 1) {
    // Any tensor is flattened; a table must be a list of numbers.
    if (t == nullptr) check_data(L, who, "values", 1);
  }
  if (LuaTensor* t = to_tensor(L, -1)) {
    if (t->closed || t->trace_id)
      luaL_error(L, "%s: values: a closed or traced tensor has no data", who);
  }
  const lua_Integer bins = opt_integer(L, 1, "bins", 0);
  if (bins < 0 || bins > 10000)
    luaL_error(L, "%s: bins must be in 1..10000 (0: automatic), got %d", who,
               static_cast<int>(bins));
  bool ok = true;
  {
    std::vector<double> v;
    Shape shape;
    read_data(L, &v, &shape);
    ok = emit(L, who,
              plot::render_histogram(v, static_cast<int>(bins), field_string(L, 1, "title")));
  }
  return ok ? 0 : raise(L);
}

// mls.plot.image{img} and heatmap{m}: the options, then the table's first element (`what`)
// checked as check_data does and left on the stack for read_data.
void check_first(lua_State* L, const char* who, const char* what, int rank) {
  check_common(L, who);
  lua_rawgeti(L, 1, 1);
  if (lua_isnil(L, -1)) luaL_error(L, "%s: %s (argument 1 of the table) is missing", who, what);
  check_data(L, who, what, rank);
}

int l_image(lua_State* L) {
  const char* who = "mls.plot.image";
  check_first(L, who, "the image", 0);
  const lua_Integer cols = opt_integer(L, 1, "cols", 8);
  if (cols < 1) luaL_error(L, "%s: cols must be >= 1, got %d", who, static_cast<int>(cols));
  bool ok = true;
  {
    std::vector<double> v;
    Shape s;
    read_data(L, &v, &s);
    int64_t n = 1, c = 1, h = s[0], w = s[1];
    if (s.size() == 3) n = s[0], h = s[1], w = s[2];
    if (s.size() == 4) n = s[0], c = s[1], h = s[2], w = s[3];
    if (n * h * w <= (int64_t{1} << 22)) {
      ok = emit(L, who,
                plot::render_images(plot::images_from_planes(v, n, c, h, w), static_cast<int>(cols),
                                    field_string(L, 1, "title")));
    } else {
      runtime(L).error = std::string(who) + ": more than 4M pixels";
      ok = false;
    }
  }
  return ok ? 0 : raise(L);
}

int l_heatmap(lua_State* L) {
  const char* who = "mls.plot.heatmap";
  check_first(L, who, "the matrix", 2);
  bool ok = true;
  {
    std::vector<double> v;
    Shape s;
    read_data(L, &v, &s);
    ok = emit(L, who,
              plot::render_heatmap(static_cast<int>(s[0]), static_cast<int>(s[1]), v,
                                   field_string(L, 1, "title")));
  }
  return ok ? 0 : raise(L);
}

const luaL_Reg kPlot[] = {{"line", l_line},   {"scatter", l_scatter}, {"hist", l_hist},
                          {"image", l_image}, {"heatmap", l_heatmap}, {nullptr, nullptr}};

}  // namespace

void open_plot_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kPlot);
  lua_setfield(L, -2, "plot");
}

}  // namespace mls::lua
