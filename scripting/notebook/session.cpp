// [SECTION] state           cells, their analysis, the graph, outputs, stale marks
// [SECTION] running a cell  print capture, returned values (text, tables, figures), errors,
//                           in-place mutation
// [SECTION] scheduling      reactive and lazy runs, on-demand cells, failures
// [SECTION] edits           set_cells, set_cell, remove_cell, restart
#include "scripting/notebook/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include <lua.hpp>

#include "scripting/notebook/rich_output.h"
#include "scripting/pretty.h"
#include "scripting/runtime.h"

namespace mls::lua {

// [SECTION] state

// A cell's source as the session analysed it. Outside the anonymous namespace: the session's
// Impl, which has linkage, holds these.
struct SessionAnalysis {
  std::string source;
  std::string chunk;  // what runs, when not the source: its last expression returned
  bool ok = true;
  std::string error;  // the syntax error, when !ok
  CellSymbols symbols;
};

namespace {

uint64_t fnv(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
constexpr uint64_t kFnvBasis = 14695981039346656037ull;

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string chunkname(const std::string& id) {
  return "=cell " + id;
}

// A table's contents, to tell an in-place change: keys and values to a bounded depth, nested
// tables deeper than that and userdata (tensors: immutable) by identity.
uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

uint64_t fingerprint(lua_State* L, int idx, int depth, int& budget) {
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return 1;
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) ? 3 : 2;
    case LUA_TNUMBER: {
      if (lua_isinteger(L, idx)) return mix(static_cast<uint64_t>(lua_tointeger(L, idx)) ^ 0x10);
      const double d = lua_tonumber(L, idx);
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      return mix(bits ^ 0x20);
    }
    case LUA_TSTRING: {
      size_t n;
      const char* s = lua_tolstring(L, idx, &n);
      return fnv(kFnvBasis, std::string_view(s, n));
    }
    case LUA_TTABLE: {
      if (depth <= 0 || budget <= 0)
        return mix(reinterpret_cast<uintptr_t>(lua_topointer(L, idx)) ^ 0x40);
      uint64_t h = 0x7ab1e, count = 0;
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        --budget;
        const uint64_t k = fingerprint(L, -2, 0, budget);
        const uint64_t v = fingerprint(L, -1, depth - 1, budget);
        h += mix(k * 31 + v);  // a sum: the traversal order does not matter
        ++count;
        lua_pop(L, 1);
      }
      return mix(h ^ (count << 40));
    }
    default:
      return mix(reinterpret_cast<uintptr_t>(lua_topointer(L, idx)) ^
                 static_cast<uint64_t>(lua_type(L, idx)));
  }
}

void print_into(lua_State* L, CellOutput& out) {
  const int n = lua_gettop(L);
  for (int i = 1; i <= n; ++i) {
    if (i > 1) out.text += '\t';
    out.text += print_text(L, i);
  }
  out.text += '\n';
}

// print() while a cell runs: into its output.
// The output these closures write is the running cell's (Runtime::cell_output), never one
// remembered: a cell may keep `print` in a global and a later cell call it, when the output
// it was made for is gone. Between cells (a finaliser, say) it writes nowhere.
// Upvalue: the Runtime.
int cell_print(lua_State* L) {
  if (CellOutput* out = static_cast<Runtime*>(lua_touserdata(L, lua_upvalueindex(1)))->cell_output)
    print_into(L, *out);
  return 0;
}

// The cell's returned values, as print shows them, and their tables and figures (tensors,
// models: rich_output.h); a tensor shown as a table is named in the text, not printed again.
// Upvalues: the Runtime and the tensor metatable (as the bindings').
int cell_return(lua_State* L) {
  CellOutput* current = static_cast<Runtime*>(lua_touserdata(L, lua_upvalueindex(1)))->cell_output;
  const int n = lua_gettop(L);
  if (n == 0 || !current) return 0;
  CellOutput& out = *current;
  std::string line, name;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) line += '\t';
    line += add_returned_value(L, i, i, out, &name) ? name : print_text(L, i);
  }
  out.text += line + '\n';
  return 0;
}

constexpr const char* kCellFn = "__mls_cell";
constexpr const char* kCellReturn = "__mls_cell_return";

// The session's own globals (the cell's chunk, print) are read and set raw: a metatable on
// _G must not see them (a __newindex was handed a check cell's chunk and wrapped it in pcall).
void raw_get_global(lua_State* L, const char* name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushstring(L, name);
  lua_rawget(L, -2);
  lua_remove(L, -2);
}
void raw_set_global(lua_State* L, const char* name) {  // pops the value
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_insert(L, -2);
  lua_pushstring(L, name);
  lua_insert(L, -2);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

// __mls_cell: runs the cell's chunk (upvalue 1) once, after taking itself out of _G, so code
// the chunk calls cannot take the chunk and run it again (inside another check cell).
int cell_once(lua_State* L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  if (!lua_isfunction(L, -1)) return luaL_error(L, "a cell's chunk runs once");
  lua_pushnil(L);
  lua_replace(L, lua_upvalueindex(1));
  lua_pushnil(L);
  raw_set_global(L, kCellFn);
  const int base = lua_gettop(L) - 1;
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L) - base;
}

}  // namespace

struct NotebookSession::Impl {
  Backend& backend;
  ScriptOptions options;
  std::unique_ptr<LuaHost> host;
  nodes::LabSpec lab;                  // the goals check cells report
  std::unique_ptr<LabChecks> checks;   // over host's state
  const std::atomic<bool>* interrupt = nullptr;
  bool lazy = false;
  std::string project_hash = "-";  // of set_project_text's text
  NotebookSession* self = nullptr;

  std::vector<nodes::Cell> cells;  // notebook order, every kind
  std::unordered_map<std::string, SessionAnalysis> analysis;
  CellGraph graph;
  std::map<std::string, CellOutput> outputs;
  std::set<std::string> stale;
  // In-place mutations found: (the cell that changed it, the problem).
  std::vector<std::pair<std::string, CellProblem>> mutations;
  std::vector<CellProblem> problems;

  Impl(Backend& b, ScriptOptions o) : backend(b), options(std::move(o)) { open_host(); }

  // A fresh Lua state; the check cells' copy of its globals is taken before any cell runs.
  void open_host() {
    checks.reset();  // before the state it holds references in
    host.reset();
    host = std::make_unique<LuaHost>(backend, options);
    checks = std::make_unique<LabChecks>(host->state(), lab);
    checks->on_report = [this](const GoalState& g) {
      if (self && self->on_goal) self->on_goal(g);
    };
  }

  const nodes::Cell* cell(const std::string& id) const {
    for (const auto& c : cells)
      if (c.id == id) return &c;
    return nullptr;
  }

  const nodes::Cell* find(const std::string& id) const {
    for (const auto& c : cells)
      if (c.id == id) return &c;
    return nullptr;
  }
  bool is_lua(const std::string& id) const {
    const nodes::Cell* c = find(id);
    return c && c->kind == nodes::CellKind::Lua;
  }
  const SessionAnalysis* analysed(const std::string& id) const {
    auto it = analysis.find(id);
    return it == analysis.end() ? nullptr : &it->second;
  }

  void analyse(const nodes::Cell& c) {
    SessionAnalysis& a = analysis[c.id];
    if (a.source == c.source && (a.ok || !a.error.empty())) return;
    a = {};
    a.source = c.source;
    bool returns_last = false;
    Result<CellSymbols> r = analyse_cell(c.source, chunkname(c.id), &returns_last);
    if (returns_last) a.chunk = with_last_line_returned(c.source);  // shows its last expression
    if (r) {
      a.symbols = std::move(*r);
    } else {
      a.ok = false;
      a.error = r.error().message;
    }
  }

  void rebuild() {
    std::vector<std::pair<std::string, CellSymbols>> g;
    for (const auto& c : cells)
      if (c.kind == nodes::CellKind::Lua) {
        const SessionAnalysis* a = analysed(c.id);
        g.emplace_back(c.id, a ? a->symbols : CellSymbols{});
      }
    graph = CellGraph(g);
    combine_problems();
  }

  void combine_problems() {
    problems = graph.problems();
    for (const auto& [by, p] : mutations) problems.push_back(p);
  }

  std::string hash_of(const std::string& id) const {
    const SessionAnalysis* a = analysed(id);
    if (!a) return {};
    uint64_t h = fnv(kFnvBasis, a->source);
    if (a->symbols.reads_project) h = fnv(fnv(h, "mls.project"), project_hash);
    for (const std::string& name : a->symbols.reads) {
      const std::string d = graph.definer(name);
      if (d.empty()) continue;
      auto it = outputs.find(d);
      h = fnv(fnv(h, name), it == outputs.end() ? "-" : it->second.hash);
    }
    const auto& widgets = host->runtime().widget_values;
    for (const std::string& name : a->symbols.writes)
      if (auto it = widgets.find(name); it != widgets.end())
        h = fnv(fnv(h, name), it->second.dump());
    return hex(h);
  }

  // Sets a global to nil (a name no cell defines any more).
  void clear_global(const std::string& name) {
    lua_State* L = host->state();
    lua_pushnil(L);
    raw_set_global(L, name.c_str());
  }
  void clear_names(const std::set<std::string>& names) {
    for (const std::string& n : names)
      if (graph.definer(n).empty()) clear_global(n);
  }

  void drop_mutations(const std::string& id) {
    std::erase_if(mutations, [&](const auto& m) {
      return m.first == id ||
             std::find(m.second.cells.begin(), m.second.cells.end(), id) != m.second.cells.end();
    });
  }

  // [SECTION] running a cell

  void execute(const std::string& id, const SessionAnalysis& a, CellOutput& out) {
    lua_State* L = host->state();
    Runtime& rt = host->runtime();
    // The tables this cell reads that other cells define, before.
    struct Watched {
      std::string name, definer;
      uint64_t before;
    };
    std::vector<Watched> watched;
    auto global_fingerprint = [&](const std::string& name, bool* is_table) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
      lua_getfield(L, -1, name.c_str());
      *is_table = lua_istable(L, -1);
      int budget = 100000;
      const uint64_t f = *is_table ? fingerprint(L, -1, 4, budget) : 0;
      lua_pop(L, 2);
      return f;
    };
    for (const std::string& name : a.symbols.reads) {
      const std::string d = graph.definer(name);
      if (d.empty() || d == id) continue;
      bool table = false;
      const uint64_t f = global_fingerprint(name, &table);
      if (table) watched.push_back({name, d, f});
    }

    raw_get_global(L, "print");
    const int saved_print = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushlightuserdata(L, &rt);
    lua_pushcclosure(L, cell_print, 1);
    raw_set_global(L, "print");
    lua_pushlightuserdata(L, &rt);
    luaL_getmetatable(L, "mls.Tensor");
    lua_pushcclosure(L, cell_return, 2);
    raw_set_global(L, kCellReturn);
    rt.cell_output = &out;

    const auto t0 = std::chrono::steady_clock::now();
    Result<void> r;
    const std::string& code = a.chunk.empty() ? a.source : a.chunk;
    const nodes::Cell* c = cell(id);
    const bool check = c && nodes::is_check(c->role);
    const bool locked = c && c->role == nodes::CellRole::Locked;
    if (luaL_loadbufferx(L, code.data(), code.size(), chunkname(id).c_str(), "t") != LUA_OK) {
      r = Error{lua_tostring(L, -1) ? lua_tostring(L, -1) : "syntax error"};
      lua_pop(L, 1);
    } else {
      // lab_checks.h: the snapshot's libraries (and `lab` for a check), the locked cells'
      // values, then the globals.
      if (check || locked) {
        checks->push_env(locked);
        lua_setupvalue(L, -2, 1);
        checks->begin_cell(id, check);
      }
      lua_pushcclosure(L, cell_once, 1);
      raw_set_global(L, kCellFn);
      r = host->run_string(std::string(kCellReturn) + "(" + kCellFn + "())", "=notebook");
      if (check || locked)
        checks->end_cell(static_cast<bool>(r), r ? std::string() : r.error().message);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    rt.cell_output = nullptr;
    clear_global(kCellFn);
    clear_global(kCellReturn);
    lua_rawgeti(L, LUA_REGISTRYINDEX, saved_print);
    raw_set_global(L, "print");
    luaL_unref(L, LUA_REGISTRYINDEX, saved_print);

    if (!r) {
      out.ok = false;
      out.error = r.error().message;
      out.error_line = error_line(out.error, "cell " + id);
    }
    for (const Watched& w : watched) {
      bool table = false;
      const uint64_t after = global_fingerprint(w.name, &table);
      if (table && after == w.before) continue;
      if (!table) continue;  // reassigned: the analysis would have made it a write
      CellProblem p;
      p.cells = {w.definer, id};
      if (graph.index(id) < graph.index(w.definer)) std::swap(p.cells[0], p.cells[1]);
      p.reason = "cell " + id + " changed the table '" + w.name + "' that cell " + w.definer +
                 " defines, in place: the cells that read '" + w.name +
                 "' are not re-run for it (make a copy in cell " + id + ", or change it in cell " +
                 w.definer + ")";
      mutations.emplace_back(id, std::move(p));
    }
  }

  // Runs one cell; false when it failed (or was refused).
  bool run_one(const std::string& id) {
    if (self->on_cell_started) self->on_cell_started(id);
    CellOutput out;
    out.cell_id = id;
    out.hash = hash_of(id);
    std::erase_if(mutations, [&](const auto& m) { return m.first == id; });
    const SessionAnalysis* a = analysed(id);
    if (!a || !a->ok) {
      out.ok = false;
      out.error = a ? a->error : "cell " + id + " is not a Lua cell";
      out.error_line = error_line(out.error, "cell " + id);
    } else if (graph.blocked(id)) {
      out.ok = false;
      for (const CellProblem& p : graph.problems())
        if (std::find(p.cells.begin(), p.cells.end(), id) != p.cells.end())
          out.error += (out.error.empty() ? "" : "\n") + p.reason;
      if (out.error.empty())
        out.error = "cell " + id + " is not run: it reads what cells on a cycle define";
    } else {
      execute(id, *a, out);
    }
    combine_problems();
    stale.erase(id);
    auto& slot = outputs[id];
    slot = std::move(out);
    if (self->on_cell_finished) self->on_cell_finished(slot);
    return slot.ok;
  }

  // [SECTION] scheduling

  bool interrupted() const { return interrupt && interrupt->load(std::memory_order_relaxed); }

  // Runs `seq` (topological order). A cell is skipped, and marked stale, when it is on demand
  // and not `asked`, or when a cell it reads from was skipped or failed in this sequence.
  std::vector<std::string> run_sequence(const std::vector<std::string>& seq,
                                        const std::set<std::string>& asked, bool ask_all = false) {
    std::vector<std::string> ran;
    std::set<int> held;  // failed or skipped in this sequence
    bool stop = false;
    for (const std::string& id : seq) {
      const int i = graph.index(id);
      if (i < 0) continue;
      bool skip = stop;
      for (int d : graph.direct_inputs(i)) skip = skip || held.count(d);
      const nodes::Cell* c = find(id);
      if (!skip && c && c->on_demand && !ask_all && !asked.count(id)) skip = true;
      if (skip) {
        stale.insert(id);
        held.insert(i);
        continue;
      }
      ran.push_back(id);
      if (!run_one(id)) held.insert(i);
      if (interrupted()) stop = true;
    }
    return ran;
  }

  void mark_stale(const std::vector<std::string>& ids) {
    for (const auto& id : ids) stale.insert(id);
  }
};

NotebookSession::NotebookSession(Backend& backend, ScriptOptions options)
    : impl_(std::make_unique<Impl>(backend, std::move(options))) {
  impl_->self = this;
}

NotebookSession::~NotebookSession() = default;

// [SECTION] edits

void NotebookSession::set_cells(const std::vector<nodes::Cell>& cells) {
  Impl& s = *impl_;
  std::set<std::string> old_names;
  std::set<std::string> keep;
  for (const auto& c : cells)
    if (c.kind == nodes::CellKind::Lua) keep.insert(c.id);
  // Cells gone, or no longer Lua cells: their names, outputs and analysis go.
  std::vector<std::string> changed;
  for (const auto& c : s.cells)
    if (c.kind == nodes::CellKind::Lua && !keep.count(c.id)) {
      if (const SessionAnalysis* a = s.analysed(c.id))
        old_names.insert(a->symbols.writes.begin(), a->symbols.writes.end());
      changed.push_back(c.id);
    }
  std::vector<std::string> edited;
  for (const auto& c : cells) {
    if (c.kind != nodes::CellKind::Lua) continue;
    const SessionAnalysis* a = s.analysed(c.id);
    if (a && a->source == c.source) continue;
    if (a) {
      old_names.insert(a->symbols.writes.begin(), a->symbols.writes.end());
      for (auto& d : s.graph.dependents(c.id)) edited.push_back(d);
    }
    edited.push_back(c.id);
  }
  for (const auto& id : changed) {
    s.analysis.erase(id);
    s.outputs.erase(id);
    s.stale.erase(id);
    s.drop_mutations(id);
  }
  s.cells = cells;
  for (const auto& c : s.cells)
    if (c.kind == nodes::CellKind::Lua) s.analyse(c);
  for (const auto& id : edited) s.drop_mutations(id);
  s.rebuild();
  s.clear_names(old_names);
  for (const auto& id : edited)
    if (s.graph.contains(id)) s.mark_stale(s.graph.with_dependents({id}));
}

void NotebookSession::set_cell(const nodes::Cell& cell, size_t index) {
  Impl& s = *impl_;
  std::vector<nodes::Cell> cells = s.cells;
  auto it = std::find_if(cells.begin(), cells.end(),
                         [&](const nodes::Cell& c) { return c.id == cell.id; });
  if (it != cells.end()) {
    *it = cell;
  } else {
    cells.insert(cells.begin() + static_cast<std::ptrdiff_t>(std::min(index, cells.size())), cell);
  }
  set_cells(cells);
}

void NotebookSession::remove_cell(const std::string& id) {
  Impl& s = *impl_;
  std::vector<nodes::Cell> cells;
  for (const auto& c : s.cells)
    if (c.id != id) cells.push_back(c);
  const std::vector<std::string> deps = s.graph.dependents(id);
  set_cells(cells);
  s.mark_stale(deps);
}

void NotebookSession::set_lazy(bool lazy) {
  impl_->lazy = lazy;
}

void NotebookSession::restart() {
  Impl& s = *impl_;
  auto widgets = s.host->runtime().widget_values;
  s.open_host();
  s.host->runtime().widget_values = std::move(widgets);
  if (s.interrupt) s.host->set_interrupt(s.interrupt);
  s.mutations.clear();
  s.combine_problems();
  for (const auto& c : s.cells)
    if (c.kind == nodes::CellKind::Lua) s.stale.insert(c.id);
}

// [SECTION] scheduling

std::vector<std::string> NotebookSession::run(const std::string& id) {
  Impl& s = *impl_;
  if (!s.graph.contains(id)) return {};
  // Lazy, or a cell that is refused (a name defined twice, a cycle): it alone, its dependents
  // stale.
  if (s.lazy || s.graph.blocked(id)) {
    auto ran = s.run_sequence({id}, {id});
    s.mark_stale(s.graph.dependents(id));
    return ran;
  }
  return s.run_sequence(s.graph.with_dependents({id}), {id});
}

std::vector<std::string> NotebookSession::run_all() {
  Impl& s = *impl_;
  return s.run_sequence(s.graph.order(), {}, true);
}

std::vector<std::string> NotebookSession::run_to(const std::string& id) {
  Impl& s = *impl_;
  if (!s.graph.contains(id)) return {};
  std::vector<std::string> seq;
  for (const auto& d : s.graph.dependencies(id))
    if (stale(d) || !s.outputs.count(d) || !s.outputs.at(d).ok) seq.push_back(d);
  seq.push_back(id);
  return s.run_sequence(seq, {}, true);
}

std::vector<std::string> NotebookSession::run_stale() {
  Impl& s = *impl_;
  std::vector<std::string> seq;
  for (const auto& id : s.graph.order())
    if (stale(id)) seq.push_back(id);
  return s.run_sequence(seq, {}, true);
}

std::vector<std::string> NotebookSession::set_widget(const std::string& name,
                                                     const nlohmann::json& value) {
  Impl& s = *impl_;
  s.host->runtime().widget_values[name] = value;
  const std::string d = s.graph.definer(name);
  if (d.empty()) return {};
  return s.run_sequence(s.graph.with_dependents({d}), {d});
}

std::vector<std::string> NotebookSession::mark_project_changed() {
  Impl& s = *impl_;
  std::vector<std::string> readers;
  for (const auto& id : s.graph.order())
    if (reads_project(id)) readers.push_back(id);
  const std::vector<std::string> seq = s.graph.with_dependents(readers);
  if (s.lazy) {
    s.mark_stale(seq);
    return {};
  }
  return s.run_sequence(seq, {});
}

void NotebookSession::set_project_text(const std::string& text) {
  impl_->project_hash = hex(fnv(kFnvBasis, text));
}

void NotebookSession::set_lab(const nodes::LabSpec& lab) {
  impl_->lab = lab;
  impl_->checks->set_lab(lab);
}

std::vector<GoalState> NotebookSession::lab_goals() const {
  std::vector<GoalState> goals = impl_->checks->goals();
  // A check that did not run because a cell it reads failed: name that cell.
  std::string failed;
  for (const auto& c : impl_->cells) {
    auto it = impl_->outputs.find(c.id);
    if (!nodes::is_check(c.role) && it != impl_->outputs.end() && !it->second.ok) {
      const std::string& e = it->second.error;
      failed = "cell '" + c.id + "' failed: " + e.substr(0, e.find('\n'));
      break;
    }
  }
  if (!failed.empty())
    for (GoalState& g : goals)
      if (!g.reported && g.message == "not checked") g.message += " (" + failed + ")";
  return goals;
}

std::vector<std::string> NotebookSession::run_checks(bool hidden_too) {
  Impl& s = *impl_;
  s.checks->reset();
  std::vector<std::string> ran;
  for (const auto& c : s.cells) {
    if (c.role != nodes::CellRole::Check && !(hidden_too && c.role == nodes::CellRole::HiddenCheck))
      continue;
    for (auto& id : run_to(c.id)) ran.push_back(std::move(id));
  }
  return ran;
}

void NotebookSession::set_interrupt(const std::atomic<bool>* flag) {
  impl_->interrupt = flag;
  impl_->host->set_interrupt(flag);
}

const CellOutput* NotebookSession::output(const std::string& id) const {
  auto it = impl_->outputs.find(id);
  return it == impl_->outputs.end() ? nullptr : &it->second;
}

bool NotebookSession::stale(const std::string& id) const {
  const Impl& s = *impl_;
  if (!s.is_lua(id)) return false;
  return s.stale.count(id) > 0 || !s.outputs.count(id);
}

const std::vector<CellProblem>& NotebookSession::problems() const {
  return impl_->problems;
}

std::set<std::string> NotebookSession::reads(const std::string& id) const {
  const SessionAnalysis* a = impl_->analysed(id);
  return a ? a->symbols.reads : std::set<std::string>{};
}

std::set<std::string> NotebookSession::writes(const std::string& id) const {
  const SessionAnalysis* a = impl_->analysed(id);
  return a ? a->symbols.writes : std::set<std::string>{};
}

bool NotebookSession::reads_project(const std::string& id) const {
  const SessionAnalysis* a = impl_->analysed(id);
  return a && a->symbols.reads_project;
}

void NotebookSession::restore_outputs(const std::map<std::string, CellOutput>& saved) {
  for (const auto& [id, out] : saved)
    if (impl_->analysed(id)) impl_->outputs[id] = out;
}

std::string NotebookSession::current_hash(const std::string& id) const {
  return impl_->hash_of(id);
}

LuaHost& NotebookSession::host() {
  return *impl_->host;
}

}  // namespace mls::lua
