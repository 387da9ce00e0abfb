// A backtracking matcher for Lua patterns (the language of the Lua 5.4 manual, section
// 6.4.1) that calls the host's limit check as it works. See patterns.h.
#include "scripting/patterns.h"

#include <cctype>
#include <cstring>

namespace mls::lua {
namespace {

constexpr char kEsc = '%';
constexpr int kMaxCaptures = 32;  // LUA_MAXCAPTURES
constexpr int kMaxDepth = 200;    // nested matcher calls, as Lua's MAXCCALLS
constexpr ptrdiff_t kUnfinished = -1;
constexpr ptrdiff_t kPosition = -2;
constexpr unsigned kCheckEvery = 4096;

using CheckFn = void (*)(lua_State*);

struct Matcher {
  lua_State* L;
  CheckFn check;
  const char* src_begin;
  const char* src_end;
  const char* pat_end;
  int depth = kMaxDepth;
  int level = 0;
  unsigned steps = 0;
  struct {
    const char* start;
    ptrdiff_t len;
  } cap[kMaxCaptures];

  void restart() {
    level = 0;
    depth = kMaxDepth;
  }
  // Every kCheckEvery steps: the host's limits (raises when one is reached).
  void tick() {
    if (++steps % kCheckEvery == 0) check(L);
  }
};

const char* do_match(Matcher& m, const char* s, const char* p);

// The end of the single-character class at `p` (a char, %x, or a [set]).
const char* class_end(Matcher& m, const char* p) {
  const char c = *p++;
  if (c == kEsc) {
    if (p == m.pat_end) luaL_error(m.L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (p < m.pat_end && *p == '^') ++p;
    // The first character of a set is itself even when it is ']'.
    do {
      if (p == m.pat_end) luaL_error(m.L, "malformed pattern (missing ']')");
      const char d = *p++;
      if (d == kEsc && p < m.pat_end) ++p;
    } while (p == m.pat_end || *p != ']');
    return p + 1;
  }
  return p;
}

bool in_class(int c, int cls) {
  bool r = false;
  switch (std::tolower(cls)) {
    case 'a':
      r = std::isalpha(c);
      break;
    case 'c':
      r = std::iscntrl(c);
      break;
    case 'd':
      r = std::isdigit(c);
      break;
    case 'g':
      r = std::isgraph(c);
      break;
    case 'l':
      r = std::islower(c);
      break;
    case 'p':
      r = std::ispunct(c);
      break;
    case 's':
      r = std::isspace(c);
      break;
    case 'u':
      r = std::isupper(c);
      break;
    case 'w':
      r = std::isalnum(c);
      break;
    case 'x':
      r = std::isxdigit(c);
      break;
    default:
      return cls == c;
  }
  return std::isupper(cls) ? !r : r;
}

// `p` at the '[' of a set whose ']' is at `close`.
bool in_set(int c, const char* p, const char* close) {
  bool want = true;
  ++p;
  if (*p == '^') {
    want = false;
    ++p;
  }
  for (; p < close; ++p) {
    if (*p == kEsc) {
      ++p;
      if (in_class(c, static_cast<unsigned char>(*p))) return want;
    } else if (p + 2 < close && p[1] == '-') {
      if (static_cast<unsigned char>(p[0]) <= c && c <= static_cast<unsigned char>(p[2]))
        return want;
      p += 2;
    } else if (static_cast<unsigned char>(*p) == c) {
      return want;
    }
  }
  return !want;
}

bool single(Matcher& m, const char* s, const char* p, const char* ep) {
  if (s >= m.src_end) return false;
  const int c = static_cast<unsigned char>(*s);
  switch (*p) {
    case '.':
      return true;
    case kEsc:
      return in_class(c, static_cast<unsigned char>(p[1]));
    case '[':
      return in_set(c, p, ep - 1);
    default:
      return static_cast<unsigned char>(*p) == c;
  }
}

const char* greedy(Matcher& m, const char* s, const char* p, const char* ep) {
  ptrdiff_t n = 0;
  while (single(m, s + n, p, ep)) {
    ++n;
    m.tick();
  }
  for (; n >= 0; --n) {
    if (const char* r = do_match(m, s + n, ep + 1)) return r;
    m.tick();
  }
  return nullptr;
}

const char* lazy(Matcher& m, const char* s, const char* p, const char* ep) {
  for (;;) {
    if (const char* r = do_match(m, s, ep + 1)) return r;
    if (!single(m, s, p, ep)) return nullptr;
    ++s;
    m.tick();
  }
}

const char* open_capture(Matcher& m, const char* s, const char* p, ptrdiff_t what) {
  if (m.level >= kMaxCaptures) luaL_error(m.L, "too many captures");
  m.cap[m.level].start = s;
  m.cap[m.level].len = what;
  ++m.level;
  const char* r = do_match(m, s, p);
  if (r == nullptr) --m.level;
  return r;
}

const char* close_capture(Matcher& m, const char* s, const char* p) {
  int l = m.level - 1;
  while (l >= 0 && m.cap[l].len != kUnfinished) --l;
  if (l < 0) luaL_error(m.L, "invalid pattern capture");
  m.cap[l].len = s - m.cap[l].start;
  const char* r = do_match(m, s, p);
  if (r == nullptr) m.cap[l].len = kUnfinished;
  return r;
}

const char* balanced(Matcher& m, const char* s, const char* p) {
  if (p + 1 >= m.pat_end) luaL_error(m.L, "malformed pattern (missing arguments to '%%b')");
  if (s >= m.src_end || *s != p[0]) return nullptr;
  const char open = p[0], close = p[1];
  int depth = 1;
  while (++s < m.src_end) {
    m.tick();
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      ++depth;
    }
  }
  return nullptr;
}

int capture_index(Matcher& m, int d) {
  const int l = d - '1';
  if (l < 0 || l >= m.level || m.cap[l].len == kUnfinished)
    return luaL_error(m.L, "invalid capture index %%%d", l + 1);
  return l;
}

const char* back_reference(Matcher& m, const char* s, int d) {
  const int l = capture_index(m, d);
  const ptrdiff_t len = m.cap[l].len;
  if (len < 0) return nullptr;  // a position capture matches no text
  if (m.src_end - s >= len && std::memcmp(m.cap[l].start, s, static_cast<size_t>(len)) == 0)
    return s + len;
  return nullptr;
}

const char* do_match(Matcher& m, const char* s, const char* p) {
  if (m.depth-- == 0) luaL_error(m.L, "pattern too complex");
  for (;;) {
    m.tick();
    if (p == m.pat_end) break;
    if (*p == '(') {
      s = p + 1 < m.pat_end && p[1] == ')' ? open_capture(m, s, p + 2, kPosition)
                                           : open_capture(m, s, p + 1, kUnfinished);
      break;
    }
    if (*p == ')') {
      s = close_capture(m, s, p + 1);
      break;
    }
    if (*p == '$' && p + 1 == m.pat_end) {
      if (s != m.src_end) s = nullptr;
      break;
    }
    if (*p == kEsc && p + 1 < m.pat_end) {
      const char k = p[1];
      if (k == 'b') {
        s = balanced(m, s, p + 2);
        if (s != nullptr) {
          p += 4;
          continue;
        }
        break;
      }
      if (k == 'f') {
        p += 2;
        if (p >= m.pat_end || *p != '[') luaL_error(m.L, "missing '[' after '%%f' in pattern");
        const char* ep = class_end(m, p);
        const int before = s == m.src_begin ? 0 : static_cast<unsigned char>(s[-1]);
        const int here = s < m.src_end ? static_cast<unsigned char>(*s) : 0;
        if (!in_set(before, p, ep - 1) && in_set(here, p, ep - 1)) {
          p = ep;
          continue;
        }
        s = nullptr;
        break;
      }
      if (std::isdigit(static_cast<unsigned char>(k))) {
        s = back_reference(m, s, static_cast<unsigned char>(k));
        if (s != nullptr) {
          p += 2;
          continue;
        }
        break;
      }
    }
    // A single-character class, maybe with a quantifier after it.
    const char* ep = class_end(m, p);
    const char q = ep < m.pat_end ? *ep : '\0';
    if (!single(m, s, p, ep)) {
      if (q == '*' || q == '?' || q == '-') {  // zero repetitions are fine
        p = ep + 1;
        continue;
      }
      s = nullptr;
      break;
    }
    if (q == '?') {
      if (const char* r = do_match(m, s + 1, ep + 1)) {
        s = r;
        break;
      }
      p = ep + 1;
      continue;
    }
    if (q == '+') {
      s = greedy(m, s + 1, p, ep);
      break;
    }
    if (q == '*') {
      s = greedy(m, s, p, ep);
      break;
    }
    if (q == '-') {
      s = lazy(m, s, p, ep);
      break;
    }
    ++s;
    p = ep;
  }
  ++m.depth;
  return s;
}

// Capture i (0-based) of the match s..e; the whole match when there are no captures.
void push_capture(Matcher& m, int i, const char* s, const char* e) {
  if (i >= m.level) {
    if (i != 0) luaL_error(m.L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(m.L, s, static_cast<size_t>(e - s));
    return;
  }
  const ptrdiff_t len = m.cap[i].len;
  if (len == kUnfinished) luaL_error(m.L, "unfinished capture");
  if (len == kPosition)
    lua_pushinteger(m.L, static_cast<lua_Integer>(m.cap[i].start - m.src_begin) + 1);
  else
    lua_pushlstring(m.L, m.cap[i].start, static_cast<size_t>(len));
}

int push_captures(Matcher& m, const char* s, const char* e) {
  const int n = m.level == 0 && s != nullptr ? 1 : m.level;
  luaL_checkstack(m.L, n, "too many captures");
  for (int i = 0; i < n; ++i) push_capture(m, i, s, e);
  return n;
}

// A 1-based start position as Lua's string functions read it.
size_t start_position(lua_Integer pos, size_t len) {
  if (pos > 0) return static_cast<size_t>(pos);
  if (pos == 0) return 1;
  if (pos < -static_cast<lua_Integer>(len)) return 1;
  return len + static_cast<size_t>(pos) + 1;
}

bool has_specials(const char* p, size_t lp) {
  for (size_t i = 0; i < lp; ++i)
    if (std::strchr("^$*+?.([%-", p[i]) != nullptr && p[i] != '\0') return true;
  return false;
}

Matcher make_matcher(lua_State* L, const char* s, size_t ls, const char* p, size_t lp) {
  Matcher m{};
  m.L = L;
  m.check = reinterpret_cast<CheckFn>(lua_touserdata(L, lua_upvalueindex(1)));
  m.src_begin = s;
  m.src_end = s + ls;
  m.pat_end = p + lp;
  m.depth = kMaxDepth;
  return m;
}

int find_or_match(lua_State* L, bool find) {
  size_t ls = 0, lp = 0;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  const size_t init = start_position(luaL_optinteger(L, 3, 1), ls);
  if (init > ls + 1) {
    lua_pushnil(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    // A plain search.
    const char* hay = s + init - 1;
    const size_t left = ls - init + 1;
    if (lp == 0) {
      lua_pushinteger(L, static_cast<lua_Integer>(init));
      lua_pushinteger(L, static_cast<lua_Integer>(init) - 1);
      return 2;
    }
    // memmem is linear in the haystack (glibc's two-way search); a naive loop is O(n * m)
    // and runs long with no limit check.
    if (const void* at = memmem(hay, left, p, lp)) {
      const size_t i = static_cast<size_t>(static_cast<const char*>(at) - hay);
      lua_pushinteger(L, static_cast<lua_Integer>(init + i));
      lua_pushinteger(L, static_cast<lua_Integer>(init + i + lp - 1));
      return 2;
    }
    lua_pushnil(L);
    return 1;
  }
  const bool anchor = lp > 0 && *p == '^';
  if (anchor) {
    ++p;
    --lp;
  }
  Matcher m = make_matcher(L, s, ls, p, lp);
  const char* from = s + init - 1;
  do {
    m.restart();
    if (const char* e = do_match(m, from, p)) {
      if (!find) return push_captures(m, from, e);
      lua_pushinteger(L, static_cast<lua_Integer>(from - s) + 1);
      lua_pushinteger(L, static_cast<lua_Integer>(e - s));
      return push_captures(m, nullptr, nullptr) + 2;
    }
  } while (from++ < m.src_end && !anchor);
  lua_pushnil(L);
  return 1;
}

int l_find(lua_State* L) {
  return find_or_match(L, true);
}
int l_match(lua_State* L) {
  return find_or_match(L, false);
}

// gmatch's iterator state: positions into the subject and pattern, which the closure keeps
// alive as upvalues 2 and 3.
struct GmatchState {
  size_t next;     // where the next search starts (offset)
  ptrdiff_t last;  // end of the last match (offset), -1 before the first
};

int gmatch_next(lua_State* L) {
  size_t ls = 0, lp = 0;
  const char* s = lua_tolstring(L, lua_upvalueindex(2), &ls);
  const char* p = lua_tolstring(L, lua_upvalueindex(3), &lp);
  auto* g = static_cast<GmatchState*>(lua_touserdata(L, lua_upvalueindex(4)));
  Matcher m = make_matcher(L, s, ls, p, lp);
  for (const char* from = s + g->next; from <= m.src_end; ++from) {
    m.restart();
    const char* e = do_match(m, from, p);
    if (e != nullptr && e - s != g->last) {
      g->next = static_cast<size_t>(e - s);
      g->last = e - s;
      return push_captures(m, from, e);
    }
  }
  g->next = ls + 1;
  return 0;
}

int l_gmatch(lua_State* L) {
  size_t ls = 0;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  size_t next = start_position(luaL_optinteger(L, 3, 1), ls) - 1;
  if (next > ls) next = ls + 1;  // past the end: no matches
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));  // the check
  lua_insert(L, 1);
  auto* g = static_cast<GmatchState*>(lua_newuserdatauv(L, sizeof(GmatchState), 0));
  g->next = next;
  g->last = -1;
  lua_pushcclosure(L, gmatch_next, 4);
  return 1;
}

// Appends the replacement of match s..e to `b` (gsub's third argument at index 3).
void add_replacement(Matcher& m, luaL_Buffer& b, const char* s, const char* e, int type) {
  lua_State* L = m.L;
  if (type == LUA_TSTRING || type == LUA_TNUMBER) {
    size_t lr = 0;
    const char* r = lua_tolstring(L, 3, &lr);
    for (size_t i = 0; i < lr; ++i) {
      if (r[i] != kEsc) {
        luaL_addchar(&b, r[i]);
        continue;
      }
      ++i;
      const char d = i < lr ? r[i] : '\0';
      if (d == kEsc) {
        luaL_addchar(&b, kEsc);
      } else if (d == '0') {
        luaL_addlstring(&b, s, static_cast<size_t>(e - s));
      } else if (std::isdigit(static_cast<unsigned char>(d))) {
        push_capture(m, d - '1', s, e);
        luaL_tolstring(L, -1, nullptr);
        lua_remove(L, -2);
        luaL_addvalue(&b);
      } else {
        luaL_error(L, "invalid use of '%c' in replacement string", kEsc);
      }
    }
    return;
  }
  if (type == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    const int n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else {  // a table
    push_capture(m, 0, s, e);
    lua_gettable(L, 3);
  }
  if (!lua_toboolean(L, -1)) {  // nil or false: keep the original text
    lua_pop(L, 1);
    luaL_addlstring(&b, s, static_cast<size_t>(e - s));
    return;
  }
  if (!lua_isstring(L, -1)) luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(&b);
}

int l_gsub(lua_State* L) {
  size_t ls = 0, lp = 0;
  const char* src = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  const int type = lua_type(L, 3);
  const lua_Integer max_n = luaL_optinteger(L, 4, static_cast<lua_Integer>(ls) + 1);
  luaL_argexpected(
      L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION || type == LUA_TTABLE,
      3, "string/function/table");
  const bool anchor = lp > 0 && *p == '^';
  if (anchor) {
    ++p;
    --lp;
  }
  Matcher m = make_matcher(L, src, ls, p, lp);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char* last = nullptr;
  lua_Integer n = 0;
  while (n < max_n) {
    m.restart();
    const char* e = do_match(m, src, p);
    if (e != nullptr && e != last) {
      ++n;
      add_replacement(m, b, src, e, type);
      src = last = e;
    } else if (src < m.src_end) {
      luaL_addchar(&b, *src++);
    } else {
      break;
    }
    if (anchor) break;
  }
  luaL_addlstring(&b, src, static_cast<size_t>(m.src_end - src));
  luaL_pushresult(&b);
  lua_pushinteger(L, n);
  return 2;
}

// string.rep(s, n[, sep]): Lua's, except an empty result is made at once. Lua's loop runs n
// times even when each copy is empty, so string.rep('', 2^62) ran for ages out of reach of
// the limit hook; a result that is not empty is bounded by the memory limit.
int l_rep(lua_State* L) {
  size_t l = 0, lsep = 0;
  luaL_checklstring(L, 1, &l);
  const lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || (l == 0 && (lsep == 0 || n == 1))) {
    lua_pushliteral(L, "");
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(1));  // Lua's string.rep
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

// table.move(a1, f, e, t[, a2]): Lua 5.4's, with the limits checked every 4096 elements (a
// huge range of nils allocates nothing, so neither the hook nor the memory limit saw it).
int l_move(lua_State* L) {
  const auto check = reinterpret_cast<CheckFn>(lua_touserdata(L, lua_upvalueindex(1)));
  const lua_Integer f = luaL_checkinteger(L, 2);
  const lua_Integer e = luaL_checkinteger(L, 3);
  const lua_Integer t = luaL_checkinteger(L, 4);
  const int tt = !lua_isnoneornil(L, 5) ? 5 : 1;  // the destination table
  if (lua_type(L, 1) != LUA_TTABLE) luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_type(L, tt) != LUA_TTABLE) luaL_checktype(L, tt, LUA_TTABLE);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    const lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    constexpr lua_Integer kCheckEvery = 4096;
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < n; ++i) {
        if (i % kCheckEvery == kCheckEvery - 1 && check) check(L);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    } else {
      for (lua_Integer i = n - 1; i >= 0; --i) {
        if (i % kCheckEvery == 0 && check) check(L);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    }
  }
  lua_pushvalue(L, tt);
  return 1;
}

}  // namespace

void open_checked_patterns(lua_State* L, void (*check)(lua_State* L)) {
  lua_getglobal(L, LUA_STRLIBNAME);
  const luaL_Reg funcs[] = {
      {"find", l_find}, {"match", l_match}, {"gmatch", l_gmatch}, {"gsub", l_gsub}};
  for (const luaL_Reg& f : funcs) {
    lua_pushlightuserdata(L, reinterpret_cast<void*>(check));
    lua_pushcclosure(L, f.func, 1);
    lua_setfield(L, -2, f.name);
  }
  lua_getfield(L, -1, "rep");
  lua_pushcclosure(L, l_rep, 1);
  lua_setfield(L, -2, "rep");
  lua_pop(L, 1);
  lua_getglobal(L, LUA_TABLIBNAME);
  lua_pushlightuserdata(L, reinterpret_cast<void*>(check));
  lua_pushcclosure(L, l_move, 1);
  lua_setfield(L, -2, "move");
  lua_pop(L, 1);
}

}  // namespace mls::lua
