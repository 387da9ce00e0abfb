// help(x): the entries of help_docs.cpp, found by name or by the value (help.h).
#include "scripting/help.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "scripting/pretty.h"

namespace mls::lua {

namespace {

// The objects the mls module makes: their metatable's name and the prefix of their methods'
// entries ("Tensor:sum").
const std::pair<const char*, const char*> kObjects[] = {{"mls.Tensor", "Tensor"},
                                                        {"mls.Dataset", "Dataset"},
                                                        {"mls.Optimizer", "Optimizer"},
                                                        {"mls.Graph", "Graph"},
                                                        {"mls.TracedFunction", "TracedFunction"},
                                                        {"mls.Project", "Project"}};

// The methods every class defines for itself: documented once, on Module.
bool per_class_method(const std::string& k) {
  return k == "init" || k == "forward" || k == "extra_repr";
}

bool is_class(lua_State* L, int idx) {
  lua_getfield(L, idx, "__is_module");  // through __index: instances answer too
  const bool yes = lua_toboolean(L, -1) != 0;
  lua_pop(L, 1);
  return yes;
}

// The string keys of the table at `idx` that do not start with '_', sorted.
std::vector<std::string> public_keys(lua_State* L, int idx) {
  std::vector<std::string> ks;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      std::string k = lua_tostring(L, -1);
      if (!k.empty() && k[0] != '_') ks.push_back(std::move(k));
    }
  }
  std::sort(ks.begin(), ks.end());
  return ks;
}

enum class Kind { Function, Module, Class };
// Called with the value on the top of the stack; returns true to stop the walk.
using Visit = std::function<bool(const std::string& name, Kind kind)>;

bool walk_methods(lua_State* L, int idx, const std::string& prefix, const Visit& visit,
                  bool skip_per_class) {
  for (const std::string& k : public_keys(L, idx)) {
    if (skip_per_class && per_class_method(k)) continue;
    if (lua_getfield(L, idx, k.c_str()) == LUA_TFUNCTION && visit(prefix + k, Kind::Function))
      return true;
    lua_pop(L, 1);
  }
  return false;
}

bool walk_table(lua_State* L, int idx, const std::string& prefix, const Visit& visit,
                std::set<const void*>& seen) {
  idx = lua_absindex(L, idx);
  if (!seen.insert(lua_topointer(L, idx)).second) return false;
  luaL_checkstack(L, 8, "help: walking the mls module");
  for (const std::string& k : public_keys(L, idx)) {
    const std::string name = prefix + "." + k;
    const int t = lua_getfield(L, idx, k.c_str());
    bool stop = false;
    if (t == LUA_TFUNCTION) {
      stop = visit(name, Kind::Function);
    } else if (t == LUA_TTABLE) {
      if (is_class(L, -1)) {
        stop = visit(name, Kind::Class);
        if (!stop && seen.insert(lua_topointer(L, -1)).second)
          stop =
              walk_methods(L, lua_gettop(L), k == "Module" ? "Module:" : name + ":", visit, true);
      } else {
        stop = visit(name, Kind::Module) || walk_table(L, -1, name, visit, seen);
      }
    }
    if (stop) return true;
    lua_pop(L, 1);
  }
  return false;
}

// Every documented kind of thing: the mls module's functions, modules and classes, and the
// methods of the objects it makes. The value is on the top of the stack during `visit`.
void walk_all(lua_State* L, const Visit& visit) {
  const int top = lua_gettop(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  std::set<const void*> seen;
  if (lua_getfield(L, -1, "mls") == LUA_TTABLE) {
    if (visit("mls", Kind::Module) || walk_table(L, -1, "mls", visit, seen)) {
      lua_settop(L, top);
      return;
    }
  }
  lua_settop(L, top);
  for (const auto& [meta, prefix] : kObjects) {
    if (luaL_getmetatable(L, meta) == LUA_TTABLE) {
      if (lua_getfield(L, -1, "__index") != LUA_TTABLE) lua_pop(L, 1);
      if (walk_methods(L, lua_gettop(L), std::string(prefix) + ":", visit, false)) break;
    }
    lua_settop(L, top);
  }
  lua_settop(L, top);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string entry_text(const HelpEntry& e) {
  return std::string(e.signature) + "\n  " + e.summary + "\n  example: " + e.example;
}
std::string entry_line(const HelpEntry& e) {
  return std::string("  ") + e.signature + "  -- " + e.summary;
}

// The entries directly under `prefix` ("mls.nn." or "Tensor:"): no further '.' or ':'.
std::string listing(const std::string& prefix) {
  std::string out;
  for (const HelpEntry& e : help_entries()) {
    const std::string n = e.name;
    if (n.compare(0, prefix.size(), prefix) != 0 || n.size() == prefix.size()) continue;
    if (n.find_first_of(".:", prefix.size()) != std::string::npos) continue;
    out += "\n" + entry_line(e);
  }
  return out;
}

std::string object_help(const std::string& type, const std::string& what) {
  return what + " (help(x:method) or help(\"" + type + ":name\") for one):" + listing(type + ":");
}

std::string module_class_help(lua_State* L, int idx) {
  std::string name;
  if (lua_getfield(L, idx, "__name") == LUA_TSTRING) name = lua_tostring(L, -1);
  lua_pop(L, 1);
  std::string out;
  if (const HelpEntry* e = find_help("mls.nn." + name))
    out = entry_text(*e);
  else
    out = name + ": a module defined in Lua (its init and forward say what it does)";
  const std::string own = listing("mls.nn." + name + ":");
  if (!own.empty()) out += "\n" + name + "'s own methods:" + own;
  return out + "\nmethods of every module:" + listing("Module:");
}

const char* kUsage =
    "help(x) documents what the mls module offers:\n"
    "  help(mls.zeros)    a function: its signature, what it does, an example\n"
    "  help(mls)          a module (also mls.nn, mls.F, mls.data, mls.optim, mls.project, "
    "mls.onnx): its functions, one line each\n"
    "  help(t)            an object (a tensor, a module, a dataset, an optimizer): its methods\n"
    "  help(\"softmax\")    every entry whose name or text holds the word";

}  // namespace

const HelpEntry* find_help(const std::string& name) {
  static const std::map<std::string, const HelpEntry*> index = [] {
    std::map<std::string, const HelpEntry*> m;
    for (const HelpEntry& e : help_entries()) m.emplace(e.name, &e);
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

std::string function_name(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TFUNCTION) return "";
  std::string found;
  walk_all(L, [&](const std::string& name, Kind kind) {
    if (kind != Kind::Function || !lua_rawequal(L, -1, idx)) return false;
    found = name;
    return true;
  });
  if (found.empty()) {
    lua_getglobal(L, "help");
    if (lua_rawequal(L, -1, idx)) found = "help";
    lua_pop(L, 1);
  }
  return found;
}

std::string help_text(lua_State* L, int idx) {
  if (idx == 0 || lua_isnoneornil(L, idx)) return kUsage;
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      const std::string word = lua_tostring(L, idx);
      if (const HelpEntry* e = find_help(word)) {
        std::string out = entry_text(*e);
        const std::string under = listing(word + ".");
        return under.empty() ? out : out + under;
      }
      for (const auto& [m, type] : kObjects)
        if (word == type)
          return object_help(type, std::string("a ") + type + " (" + m + "). Methods");
      if (word == "Module") return "methods of every module:" + listing("Module:");
      const std::string w = lower(word);
      std::string out;
      for (const HelpEntry& e : help_entries())
        if (lower(e.name).find(w) != std::string::npos ||
            lower(e.summary).find(w) != std::string::npos)
          out += "\n" + std::string("  ") + e.name + "  -- " + e.summary;
      if (out.empty()) return "no help entry names or mentions \"" + word + "\"";
      return "entries that mention \"" + word + "\":" + out;
    }
    case LUA_TFUNCTION: {
      const std::string name = function_name(L, idx);
      if (const HelpEntry* e = find_help(name)) return entry_text(*e);
      if (!name.empty()) return name + ": no help entry";
      return "a Lua function that is not part of mls (help() shows what help documents)";
    }
    case LUA_TTABLE: {
      if (is_class(L, idx)) return module_class_help(L, idx);
      std::string module;
      walk_all(L, [&](const std::string& name, Kind kind) {
        if (kind != Kind::Module || !lua_rawequal(L, -1, idx)) return false;
        module = name;
        return true;
      });
      if (!module.empty()) {
        const HelpEntry* e = find_help(module);
        std::string out = e ? std::string(e->name) + ": " + e->summary : module;
        return out + listing(module + ".");
      }
      return "a table:\n" + describe_value(L, idx) +
             "\n(help documents the mls module and its objects; help() says how)";
    }
    case LUA_TUSERDATA: {
      std::string meta;
      if (lua_getmetatable(L, idx)) {
        if (lua_getfield(L, -1, "__name") == LUA_TSTRING) meta = lua_tostring(L, -1);
        lua_pop(L, 2);
      }
      for (const auto& [m, type] : kObjects)
        if (meta == m) {
          std::string what = std::string("a ") + type + " (" + m + ")";
          if (meta == "mls.Tensor")
            what +=
                ": typed values with a shape; arithmetic + - * / ^ and unary -, indexing "
                "t[i] and t[{i, {a, b}}] (from 1), t.grad after backward. Methods";
          else
            what += ". Methods";
          return object_help(type, what);
        }
      return "a userdata" + (meta.empty() ? std::string() : " (" + meta + ")") +
             " that help does not document";
    }
    default:
      return std::string("a ") + luaL_typename(L, idx) +
             " (help documents the mls module and its objects; help() says how)";
  }
}

std::vector<std::string> undocumented(lua_State* L) {
  std::vector<std::string> missing;
  walk_all(L, [&](const std::string& name, Kind) {
    if (find_help(name) == nullptr) missing.push_back(name);
    return false;
  });
  return missing;
}

namespace {
int l_help(lua_State* L) {
  const std::string text = help_text(L, lua_gettop(L) >= 1 ? 1 : 0);
  lua_getglobal(L, "print");
  lua_pushlstring(L, text.data(), text.size());
  lua_call(L, 1, 0);
  return 0;
}
}  // namespace

void open_help(lua_State* L) {
  lua_pushcfunction(L, l_help);
  lua_setglobal(L, "help");
}

}  // namespace mls::lua
