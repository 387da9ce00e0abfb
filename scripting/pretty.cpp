// Lua values as readable trees (pretty.h).
#include "scripting/pretty.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "scripting/help.h"

namespace mls::lua {

namespace {

// luaL_tolstring in a protected call: a __tostring that raises gives its message instead.
int tolstring_k(lua_State* L) {
  luaL_tolstring(L, 1, nullptr);
  return 1;
}
std::string safe_tostring(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, tolstring_k);
  lua_pushvalue(L, idx);
  std::string s;
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    size_t n = 0;
    const char* p = lua_tolstring(L, -1, &n);
    if (p != nullptr) s.assign(p, n);
  } else {
    const char* m = lua_tostring(L, -1);
    s = std::string("<__tostring failed: ") + (m ? m : "?") + ">";
  }
  lua_pop(L, 1);
  return s;
}

bool has_tostring(lua_State* L, int idx) {
  if (!lua_getmetatable(L, idx)) return false;
  const bool has = lua_getfield(L, -1, "__tostring") != LUA_TNIL;
  lua_pop(L, 2);
  return has;
}

std::string quote(const char* s, size_t n, size_t max) {
  std::string out = "\"";
  const size_t shown = std::min(n, max);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 32 || c == 127) {
      char b[8];
      std::snprintf(b, sizeof b, "\\%d", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown < n) out += "... (" + std::to_string(n) + " bytes)";
  return out;
}

bool is_identifier(const char* s, size_t n) {
  static const char* const kKeywords[] = {"and",   "break", "do",       "else", "elseif", "end",
                                          "false", "for",   "function", "goto", "if",     "in",
                                          "local", "nil",   "not",      "or",   "repeat", "return",
                                          "then",  "true",  "until",    "while"};
  if (n == 0 || (!std::isalpha(static_cast<unsigned char>(s[0])) && s[0] != '_')) return false;
  for (size_t i = 0; i < n; ++i)
    if (!std::isalnum(static_cast<unsigned char>(s[i])) && s[i] != '_') return false;
  const std::string k(s, n);
  return std::none_of(std::begin(kKeywords), std::end(kKeywords),
                      [&](const char* w) { return k == w; });
}

// Indents every line after the first by `pad` (a tensor's rows inside a tree).
std::string indent_lines(const std::string& s, const std::string& pad) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

struct Printer {
  lua_State* L;
  const PrettyOptions& o;
  std::vector<const void*> path;  // the tables being printed, outermost first
  bool tree = false;              // set when a value printed was a table of its own entries

  // A value inside a table (strings quoted), or at the top (`top`: strings as they are).
  std::string value(int idx, int depth, bool top) {
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(L, idx, &n);
        return top ? std::string(s, n) : quote(s, n, o.max_string);
      }
      case LUA_TTABLE:
        if (has_tostring(L, idx)) return safe_tostring(L, idx);
        return table(idx, depth);  // sets `tree` unless it names a cycle
      case LUA_TFUNCTION: {
        const std::string name = function_name(L, idx);
        return name.empty() ? "function" : "function: " + name;
      }
      case LUA_TUSERDATA:
        if (has_tostring(L, idx)) return safe_tostring(L, idx);
        if (lua_getmetatable(L, idx)) {
          std::string name = "userdata";
          if (lua_getfield(L, -1, "__name") == LUA_TSTRING) name = lua_tostring(L, -1);
          lua_pop(L, 2);
          return "<" + name + ">";
        }
        return "<userdata>";
      case LUA_TLIGHTUSERDATA:
        return "<light userdata>";
      case LUA_TTHREAD:
        return "<coroutine>";
      default:
        return safe_tostring(L, idx);  // nil, booleans, numbers: as tostring
    }
  }

  std::string key(int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      if (is_identifier(s, n)) return std::string(s, n);
    }
    return "[" + value(idx, 1 << 20, false) + "]";
  }

  std::string table(int idx, int depth) {
    const void* self = lua_topointer(L, idx);
    if (std::find(path.begin(), path.end(), self) != path.end()) return "<cycle: the table above>";
    std::string out = entries(idx, depth, self);
    tree = true;
    return out;
  }

  std::string entries(int idx, int depth, const void* self) {
    luaL_checkstack(L, 16, "describe_value");  // per level: the scratch table, a key, a value
    // The array part 1..n, then the other keys.
    lua_Integer n = 0;
    while (lua_rawgeti(L, idx, n + 1) != LUA_TNIL) {
      lua_pop(L, 1);
      ++n;
    }
    lua_pop(L, 1);
    int others = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      lua_pop(L, 1);
      if (!(lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n))
        ++others;
    }
    const lua_Integer total = n + others;
    if (total == 0) return "{}";
    if (depth >= o.max_depth)
      return "{... " + std::to_string(total) + (total == 1 ? " item}" : " items}");
    path.push_back(self);
    // Keys sorted: numbers by value, then strings, then the rest by their text.
    struct Key {
      int rank;
      double num;
      std::string text;
      int ref;  // the key, kept in a scratch table while printing
    };
    std::vector<Key> keys;
    lua_newtable(L);  // scratch: index -> key
    const int scratch = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      lua_pop(L, 1);
      if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) continue;
      Key k{2, 0, {}, static_cast<int>(keys.size()) + 1};
      if (lua_type(L, -1) == LUA_TNUMBER) {
        k.rank = 0;
        k.num = lua_tonumber(L, -1);
      } else if (lua_type(L, -1) == LUA_TSTRING) {
        k.rank = 1;
        size_t len = 0;
        const char* s = lua_tolstring(L, -1, &len);
        k.text.assign(s, len);
      } else {
        k.text = std::string(lua_typename(L, lua_type(L, -1)));
      }
      lua_pushvalue(L, -1);
      lua_rawseti(L, scratch, k.ref);
      keys.push_back(std::move(k));
    }
    std::stable_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.rank != b.rank) return a.rank < b.rank;
      if (a.rank == 0) return a.num < b.num;
      return a.text < b.text;
    });
    std::vector<std::string> items;
    bool nested = false;
    const lua_Integer limit = o.max_items;
    lua_Integer shown = 0;
    for (lua_Integer i = 1; i <= n && shown < limit; ++i, ++shown) {
      lua_rawgeti(L, idx, i);
      tree = false;
      items.push_back(value(-1, depth + 1, false));
      nested = nested || tree;
      lua_pop(L, 1);
    }
    for (size_t i = 0; i < keys.size() && shown < limit; ++i, ++shown) {
      lua_rawgeti(L, scratch, keys[i].ref);
      lua_pushvalue(L, -1);
      lua_rawget(L, idx);
      tree = false;
      const std::string v = value(-1, depth + 1, false);
      nested = nested || tree;
      // A value of several lines (a tensor) keeps its columns under its first line.
      const std::string k = key(-2) + " = ";
      items.push_back(k + (tree ? v : indent_lines(v, std::string(k.size(), ' '))));
      lua_pop(L, 2);
    }
    lua_pop(L, 1);  // scratch
    path.pop_back();
    const lua_Integer more = total - shown;
    if (more > 0) items.push_back("... (" + std::to_string(more) + " more)");
    // Plain values that fit stay on one line; otherwise one entry per line, indented.
    if (!nested) {
      std::string line = "{";
      bool multiline = false;
      for (size_t i = 0; i < items.size(); ++i) {
        line += (i ? ", " : "") + items[i];
        multiline = multiline || items[i].find('\n') != std::string::npos;
      }
      line += "}";
      if (!multiline && line.size() <= o.inline_width) return line;
    }
    std::string out = "{\n";
    for (const std::string& it : items) out += "  " + indent_lines(it, "  ") + ",\n";
    return out + "}";
  }
};

}  // namespace

std::string describe_value(lua_State* L, int idx, const PrettyOptions& o) {
  const int top = lua_gettop(L);
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 16, "describe_value");
  Printer p{L, o, {}};
  std::string s = p.value(idx, 0, true);
  lua_settop(L, top);
  return s;
}

std::string print_text(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TTABLE) return describe_value(L, idx);
  size_t n = 0;
  const char* s = luaL_tolstring(L, idx, &n);
  std::string out(s, n);
  lua_pop(L, 1);
  return out;
}

int pretty_print(lua_State* L) {
  const int n = lua_gettop(L);
  std::string line;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) line += '\t';
    line += print_text(L, i);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace mls::lua
