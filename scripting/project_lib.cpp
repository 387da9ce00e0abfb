// mls.project: read and edit a project's node graph through the document's edit commands
// (nodes/edit.h), the same ones the editor pushes on its undo stack, so every edit a script
// makes can be undone there.
//
//   local p = mls.project.open("resources/examples/fashion-mnist-mlp.mls")
//   p:add_node("fc4", "mls.linear", {out_features = 64})
//   p:connect("relu2:out", "fc4:in")        -- refused with the reason: fc4's input is free,
//   p:undo()                                 --   relu2's output may feed many
//   for _, n in ipairs(p:nodes()) do print(n.id, n.type) end
//   p:save("copy.mls")
//   local q = mls.project.current()          -- in the editor's console: the open project;
//   q:add_node("drop", "mls.dropout")        --   the edit shows on the canvas, Ctrl+Z undoes it
//   local id = p:add_cell{kind = "lua", source = "x = 1", at = 1}   -- notebook cells, the same
//   p:set_cell_source(id, "x = 2"); p:remove_cell(id)                --   undoable commands
#include "nodes/edit.h"
#include "nodes/lab_edit.h"
#include "nodes/notebook_edit.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

using nlohmann::json;

constexpr const char* kProjectMeta = "mls.Project";

// A script's handle on a project: one it opened (owning its history), or the project the
// host has open (mls.project.current), edited through the host's history.
struct ProjectBox {
  std::string path;
  std::unique_ptr<nodes::OwnedHistory> owned;
  nodes::DocumentHistory* history = nullptr;  // owned.get() or the host's
  bool current = false;                       // the host's project: its path is the host's
  const nodes::Document& doc() const { return history->doc(); }
};

ProjectBox* check_project(lua_State* L, int idx) {
  return check_object<ProjectBox>(L, idx, kProjectMeta, "project");
}

json params_json(lua_State* L, int idx) {
  json j = json::object();
  if (!lua_istable(L, idx)) return j;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    const char* k = lua_tostring(L, -2);
    if (lua_isinteger(L, -1))
      j[k] = lua_tointeger(L, -1);
    else if (lua_isnumber(L, -1))
      j[k] = lua_tonumber(L, -1);
    else if (lua_isboolean(L, -1))
      j[k] = lua_toboolean(L, -1) != 0;
    else if (lua_isstring(L, -1))
      j[k] = lua_tostring(L, -1);
    else if (lua_istable(L, -1)) {
      json a = json::array();
      for (lua_Integer i = 1; i <= luaL_len(L, -1); ++i) {
        lua_geti(L, -1, i);
        if (lua_isinteger(L, -1))
          a.push_back(lua_tointeger(L, -1));
        else
          a.push_back(lua_tonumber(L, -1));
        lua_pop(L, 1);
      }
      j[k] = a;
    }
    lua_pop(L, 1);
  }
  return j;
}

void push_json(lua_State* L, const json& j) {
  if (j.is_object()) {
    lua_createtable(L, 0, static_cast<int>(j.size()));
    for (auto it = j.begin(); it != j.end(); ++it) {
      push_json(L, it.value());
      lua_setfield(L, -2, it.key().c_str());
    }
  } else if (j.is_array()) {
    lua_createtable(L, static_cast<int>(j.size()), 0);
    for (size_t i = 0; i < j.size(); ++i) {
      push_json(L, j[i]);
      lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else if (j.is_boolean()) {
    lua_pushboolean(L, j.get<bool>());
  } else if (j.is_number_integer()) {
    lua_pushinteger(L, j.get<int64_t>());
  } else if (j.is_number()) {
    lua_pushnumber(L, j.get<double>());
  } else if (j.is_string()) {
    lua_pushstring(L, j.get<std::string>().c_str());
  } else {
    lua_pushnil(L);
  }
}

// mls.project.open(path): a draft may be incomplete (unlinked inputs are warnings).
int l_open(lua_State* L) {
  const std::string path = luaL_checkstring(L, 1);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    auto c = rt.allowed_path(path, false);
    if (!c) {
      rt.error = c.error().message;
      ok = false;
    }
    const std::string p = c ? *c : path;
    auto doc = ok ? nodes::load_document(p, nodes::GraphCheck::Draft)
                  : Result<nodes::Document>(make_error(rt.error));
    if (!doc) {
      rt.error = "mls.project.open: " + doc.error().message;
      ok = false;
    } else {
      auto owned = std::make_unique<nodes::OwnedHistory>(std::move(*doc));
      nodes::DocumentHistory* h = owned.get();
      push_object(L, kProjectMeta,
                  std::make_unique<ProjectBox>(ProjectBox{p, std::move(owned), h, false}));
    }
  }
  return ok ? 1 : raise(L);
}

int l_new(lua_State* L) {
  auto owned = std::make_unique<nodes::OwnedHistory>();
  nodes::DocumentHistory* h = owned.get();
  push_object(L, kProjectMeta,
              std::make_unique<ProjectBox>(ProjectBox{"", std::move(owned), h, false}));
  return 1;
}

// mls.project.current(): the project open in the editor; its edits are undoable there.
int l_current(lua_State* L) {
  Runtime& rt = runtime(L);
  if (!rt.project)
    return luaL_error(
        L,
        "mls.project.current: no project is open here (it is the editor's open project; "
        "use mls.project.open(path) for a file)");
  push_object(L, kProjectMeta,
              std::make_unique<ProjectBox>(ProjectBox{rt.project_path, nullptr, rt.project, true}));
  return 1;
}

// Pushes a command made by `make`; raises the refusal's message.
template <typename F>
int edit(lua_State* L, F make) {
  ProjectBox* p = check_project(L, 1);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    auto r = p->history->push(make(p->doc()));
    if (!r) {
      rt.error = r.error().message;
      ok = false;
    }
  }
  if (!ok) return raise(L);
  lua_settop(L, 1);
  return 1;
}

int l_add_node(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2), type = luaL_checkstring(L, 3);
  json params = params_json(L, 4);
  std::optional<nodes::LayoutPos> pos;
  if (lua_istable(L, 5)) pos = nodes::LayoutPos{opt_number(L, 5, "x", 0), opt_number(L, 5, "y", 0)};
  return edit(
      L, [&](const nodes::Document& d) { return nodes::make_add_node(d, id, type, params, pos); });
}
int l_remove_node(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_remove_node(d, id); });
}
int l_connect(lua_State* L) {
  const std::string a = luaL_checkstring(L, 2), b = luaL_checkstring(L, 3);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_connect(d, a, b); });
}
int l_disconnect(lua_State* L) {
  const std::string a = luaL_checkstring(L, 2), b = luaL_checkstring(L, 3);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_disconnect(d, a, b); });
}
int l_set_params(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2);
  json params = params_json(L, 3);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_set_params(d, id, params); });
}
int l_rename(lua_State* L) {
  const std::string a = luaL_checkstring(L, 2), b = luaL_checkstring(L, 3);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_rename_node(d, a, b); });
}
int l_set_training(lua_State* L) {
  json patch = params_json(L, 2);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_set_training(d, patch); });
}

// p:add_cell{kind = "lua" | "markdown" | "view", source =, view =, id =, at =, on_demand =}:
// `at` is the 1-based position the cell takes (default: the end); returns the cell's id.
int l_add_cell(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  nodes::Cell cell;
  auto opt_string = [&](const char* key) {
    std::string out;
    if (lua_getfield(L, 2, key) != LUA_TNIL) out = luaL_checkstring(L, -1);
    lua_pop(L, 1);
    return out;
  };
  const std::string kind = opt_string("kind");
  if (!kind.empty()) {
    auto k = nodes::parse_cell_kind(kind);
    if (!k)
      return luaL_error(L, "add_cell: unknown kind '%s' (expected 'lua', 'markdown', 'view')",
                        kind.c_str());
    cell.kind = *k;
  }
  cell.source = opt_string("source");
  cell.view = opt_string("view");
  cell.id = opt_string("id");
  lua_getfield(L, 2, "on_demand");
  cell.on_demand = lua_toboolean(L, -1);
  lua_pop(L, 1);
  size_t at = p->doc().notebook.cells.size();
  if (lua_getfield(L, 2, "at") != LUA_TNIL) {
    lua_Integer i = luaL_checkinteger(L, -1);
    if (i < 1) return luaL_error(L, "add_cell: at must be 1 or more (got %d)", static_cast<int>(i));
    at = static_cast<size_t>(i - 1);
  }
  lua_pop(L, 1);
  if (cell.id.empty()) cell.id = nodes::fresh_cell_id(p->doc());
  const std::string id = cell.id;
  edit(L, [&](const nodes::Document& d) { return nodes::make_add_cell(d, at, cell); });
  lua_pushstring(L, id.c_str());
  return 1;
}
int l_remove_cell(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2);
  return edit(L, [&](const nodes::Document& d) { return nodes::make_remove_cell(d, id); });
}
int l_set_cell_source(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2), source = luaL_checkstring(L, 3);
  return edit(L,
              [&](const nodes::Document& d) { return nodes::make_set_cell_source(d, id, source); });
}
// Lab authoring (nodes/lab.h, lab_edit.h). p:set_cell_role(id, "locked"|"answer"|"check"|
// "hidden-check"|"" [, starter]).
int l_set_cell_role(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2), name = luaL_checkstring(L, 3);
  const std::string starter = luaL_optstring(L, 4, "");
  std::optional<nodes::CellRole> role =
      name.empty() ? std::optional(nodes::CellRole::Free) : nodes::parse_cell_role(name);
  if (!role)
    return luaL_error(L, "set_cell_role: unknown role '%s' (locked, answer, check, hidden-check, "
                         "or \"\" for an ordinary cell)", name.c_str());
  return edit(L, [&](const nodes::Document& d) {
    return nodes::make_set_cell_role(d, id, *role, starter);
  });
}
// p:set_node_marks(id, {locked = true, solution = false})
int l_set_node_marks(lua_State* L) {
  const std::string id = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_getfield(L, 3, "locked");
  const bool locked = lua_toboolean(L, -1);
  lua_getfield(L, 3, "solution");
  const bool solution = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return edit(L, [&](const nodes::Document& d) {
    return nodes::make_set_node_marks(d, id, locked, solution);
  });
}
// p:set_lab{title =, goals = {{id =, text =, hidden =}, ...}, time_limit_s =, memory_mb =};
// p:set_lab(nil) removes it.
int l_set_lab(lua_State* L) {
  nodes::LabSpec lab;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lab.present = true;
    lua_getfield(L, 2, "title");
    if (lua_isstring(L, -1)) lab.title = lua_tostring(L, -1);
    lua_getfield(L, 2, "time_limit_s");
    if (lua_isnumber(L, -1)) lab.time_limit_s = lua_tonumber(L, -1);
    lua_getfield(L, 2, "memory_mb");
    if (lua_isinteger(L, -1)) lab.memory_mb = lua_tointeger(L, -1);
    lua_pop(L, 3);
    lua_getfield(L, 2, "goals");
    if (lua_istable(L, -1)) {
      const lua_Integer n = luaL_len(L, -1);
      for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, -1, i);
        if (!lua_istable(L, -1))
          return luaL_error(L, "set_lab: goal %d must be a table {id =, text = [, hidden =]}",
                            static_cast<int>(i));
        nodes::LabGoal g;
        lua_getfield(L, -1, "id");
        if (lua_isstring(L, -1)) g.id = lua_tostring(L, -1);
        lua_getfield(L, -2, "text");
        if (lua_isstring(L, -1)) g.text = lua_tostring(L, -1);
        lua_getfield(L, -3, "hidden");
        g.hidden = lua_toboolean(L, -1);
        lua_pop(L, 4);
        lab.goals.push_back(std::move(g));
      }
    }
    lua_pop(L, 1);
  }
  return edit(L, [&](const nodes::Document& d) { return nodes::make_set_lab(d, lab); });
}
// p:cells(): {id =, kind =, source =, view = (view cells), on_demand =, role = (labs)} tables,
// in order.
int l_cells(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  const auto& cells = p->doc().notebook.cells;
  lua_createtable(L, static_cast<int>(cells.size()), 0);
  for (size_t i = 0; i < cells.size(); ++i) {
    const nodes::Cell& c = cells[i];
    lua_createtable(L, 0, 5);
    lua_pushstring(L, c.id.c_str());
    lua_setfield(L, -2, "id");
    lua_pushstring(L, std::string(nodes::cell_kind_name(c.kind)).c_str());
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, c.source.data(), c.source.size());
    lua_setfield(L, -2, "source");
    if (c.kind == nodes::CellKind::View) {
      lua_pushstring(L, c.view.c_str());
      lua_setfield(L, -2, "view");
    }
    lua_pushboolean(L, c.on_demand);
    lua_setfield(L, -2, "on_demand");
    if (c.role != nodes::CellRole::Free) {
      lua_pushstring(L, std::string(nodes::cell_role_name(c.role)).c_str());
      lua_setfield(L, -2, "role");
    }
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int l_undo(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  lua_pushboolean(L, p->history->undo());
  return 1;
}
int l_redo(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  lua_pushboolean(L, p->history->redo());
  return 1;
}
int l_history(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  const std::vector<std::string> texts = p->history->history();
  lua_createtable(L, static_cast<int>(texts.size()), 0);
  for (size_t i = 0; i < texts.size(); ++i) {
    lua_pushstring(L, texts[i].c_str());
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_pushinteger(L, static_cast<lua_Integer>(p->history->history_index()));
  return 2;
}

int l_nodes(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  lua_createtable(L, static_cast<int>(p->doc().nodes.size()), 0);
  for (size_t i = 0; i < p->doc().nodes.size(); ++i) {
    const auto& n = p->doc().nodes[i];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, n.id.c_str());
    lua_setfield(L, -2, "id");
    lua_pushstring(L, n.type.c_str());
    lua_setfield(L, -2, "type");
    push_json(L, n.params);
    lua_setfield(L, -2, "params");
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int l_links(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  lua_createtable(L, static_cast<int>(p->doc().links.size()), 0);
  for (size_t i = 0; i < p->doc().links.size(); ++i) {
    const auto& l = p->doc().links[i];
    lua_createtable(L, 0, 2);
    lua_pushstring(L, (l.from_node + ":" + l.from_port).c_str());
    lua_setfield(L, -2, "from");
    lua_pushstring(L, (l.to_node + ":" + l.to_port).c_str());
    lua_setfield(L, -2, "to");
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// p:problems(): what keeps the graph from training (unlinked inputs, cycles, the loss).
int l_problems(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  const auto probs = nodes::graph_problems(p->doc(), p->path.empty() ? "project" : p->path);
  lua_createtable(L, static_cast<int>(probs.size()), 0);
  for (size_t i = 0; i < probs.size(); ++i) {
    lua_pushstring(L, probs[i].c_str());
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int l_text(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  const std::string s = nodes::serialize_document(p->doc());
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int l_save(lua_State* L) {
  ProjectBox* p = check_project(L, 1);
  std::string path = luaL_optstring(L, 2, p->path.c_str());
  if (path.empty())
    return luaL_error(L, "save: give a path (the project was made with mls.project.new)");
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    // The resolved path: a link planted in the folder is not followed out of it. Checked
    // once, and that result is what is written.
    auto c = rt.allowed_path(path, true);
    if (!c) {
      rt.error = c.error().message;
      ok = false;
    }
    const std::string target = c ? *c : path;
    if (ok) {
      if (auto r = nodes::save_document(p->doc(), target); !r) {
        rt.error = "save: " + r.error().message;
        ok = false;
      } else {
        // A copy saved elsewhere leaves the editor's project unsaved.
        if (!p->current || path == p->path) {
          p->path = path;
          p->history->mark_saved();
        }
      }
    }
  }
  return ok ? 0 : raise(L);
}

// Its name and size, not an address: a notebook cell returning a project prints the same
// text on every run (`mlstudio notebook check` compares it).
int l_project_tostring(lua_State* L) {
  ProjectBox* p = test_object<ProjectBox>(L, 1, kProjectMeta);
  if (!p || !p->history) {
    lua_pushliteral(L, "project (closed)");
    return 1;
  }
  const nodes::Document& d = p->doc();
  lua_pushfstring(L, "project '%s' (%d nodes, %d notebook cells)", d.name.c_str(),
                  static_cast<int>(d.nodes.size()), static_cast<int>(d.notebook.cells.size()));
  return 1;
}

int l_project_gc(lua_State* L) {
  take_object<ProjectBox>(L, 1, kProjectMeta);
  return 0;
}

const luaL_Reg kMethods[] = {{"add_node", l_add_node},
                             {"remove_node", l_remove_node},
                             {"connect", l_connect},
                             {"disconnect", l_disconnect},
                             {"set_params", l_set_params},
                             {"rename", l_rename},
                             {"set_training", l_set_training},
                             {"add_cell", l_add_cell},
                             {"remove_cell", l_remove_cell},
                             {"set_cell_source", l_set_cell_source},
                             {"cells", l_cells},
                             {"set_cell_role", l_set_cell_role},
                             {"set_node_marks", l_set_node_marks},
                             {"set_lab", l_set_lab},
                             {"undo", l_undo},
                             {"redo", l_redo},
                             {"history", l_history},
                             {"nodes", l_nodes},
                             {"links", l_links},
                             {"problems", l_problems},
                             {"text", l_text},
                             {"save", l_save},
                             {nullptr, nullptr}};
const luaL_Reg kProjectFuncs[] = {
    {"open", l_open}, {"new", l_new}, {"current", l_current}, {nullptr, nullptr}};

}  // namespace

const nodes::Document* project_document(lua_State* L, int idx, std::string* path) {
  ProjectBox* p = test_object<ProjectBox>(L, idx, kProjectMeta);
  if (!p || !p->history) return nullptr;
  if (path) *path = p->current ? runtime(L).project_path : p->path;
  return &p->doc();
}

void open_project_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kProjectFuncs);
  lua_setfield(L, -2, "project");
  register_class(L, kProjectMeta, kMethods, l_project_tostring, l_project_gc);
}

}  // namespace mls::lua
