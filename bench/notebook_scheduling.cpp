// The notebook's scheduling overhead (issue 26): a generated 300-cell notebook in 30 chains of
// 10 cells. Times the analysis and the graph of the whole notebook (opening it), the same
// after one edit in the middle, and a session's run of the edited cell and its dependents,
// less the time the cells' own Lua took: the overhead per cell re-run.
//
//   cmake --build build --target notebook_scheduling && build/bench/notebook_scheduling
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "scripting/notebook/cell_analysis.h"
#include "scripting/notebook/cell_graph.h"
#include "scripting/notebook/session.h"

using namespace mls;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr int kChains = 30, kLength = 10;

std::string source(int chain, int k, int version) {
  const std::string name = "v" + std::to_string(chain) + "_" + std::to_string(k);
  if (k == 0)
    return name + " = " + std::to_string(version) + "\nlocal t = {}\nfor i = 1, 3 do t[i] = i end";
  return name + " = v" + std::to_string(chain) + "_" + std::to_string(k - 1) + " + 1\nfunction f" +
         std::to_string(chain) + "_" + std::to_string(k) + "(a) return a * " + name + " end";
}

std::vector<nodes::Cell> notebook() {
  std::vector<nodes::Cell> cells;
  // Interleaved: chain c's cells are spread over the notebook (notebook order is not the chains').
  for (int k = 0; k < kLength; ++k)
    for (int c = 0; c < kChains; ++c) {
      nodes::Cell cell;
      cell.id = "c" + std::to_string(c) + "_" + std::to_string(k);
      cell.source = source(c, k, 1);
      cells.push_back(cell);
    }
  return cells;
}

double analyse_and_graph(const std::vector<nodes::Cell>& cells) {
  const auto t0 = Clock::now();
  std::vector<std::pair<std::string, lua::CellSymbols>> symbols;
  for (const auto& c : cells) {
    auto r = lua::analyse_cell(c.source, "=cell " + c.id);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      return -1;
    }
    symbols.emplace_back(c.id, *r);
  }
  lua::CellGraph g(symbols);
  if (g.order().size() != cells.size() || !g.problems().empty()) return -1;
  return ms_since(t0);
}

}  // namespace

int main() {
  std::vector<nodes::Cell> cells = notebook();
  const int n = static_cast<int>(cells.size());
  // The middle chain's 5th cell: 5 dependents.
  const int mid_chain = kChains / 2, mid_k = kLength / 2;
  const std::string mid_id = "c" + std::to_string(mid_chain) + "_" + std::to_string(mid_k);

  double best_open = 1e9;
  for (int rep = 0; rep < 5; ++rep) best_open = std::min(best_open, analyse_and_graph(cells));
  std::printf("%d cells: analysis + graph of the whole notebook %.3f ms (%.4f ms a cell)\n", n,
              best_open, best_open / n);

  // One edit: only the edited cell is analysed again, the graph rebuilt.
  lua::CellSymbols edited;
  double best_edit = 1e9;
  std::vector<std::pair<std::string, lua::CellSymbols>> symbols;
  for (const auto& c : cells)
    symbols.emplace_back(c.id, *lua::analyse_cell(c.source, "=cell " + c.id));
  for (int rep = 0; rep < 20; ++rep) {
    const auto t0 = Clock::now();
    auto r = lua::analyse_cell(source(mid_chain, mid_k, 2) + " -- " + std::to_string(rep),
                               "=cell " + mid_id);
    for (auto& [id, s] : symbols)
      if (id == mid_id) s = *r;
    lua::CellGraph g(symbols);
    auto deps = g.dependents(mid_id);
    best_edit = std::min(best_edit, ms_since(t0));
    if (deps.size() != kLength - mid_k - 1) {
      std::fprintf(stderr, "dependents: %zu\n", deps.size());
      return 1;
    }
  }
  std::printf("an edit in the middle: analysis of the cell + graph + dependents %.3f ms\n",
              best_edit);

  // A session: open (set_cells), run all, then edit and re-run.
  lua::ScriptOptions o;
  o.sandbox = true;
  o.root = ".";
  lua::NotebookSession s(cpu::backend(), o);
  auto t0 = Clock::now();
  s.set_cells(cells);
  std::printf("session: set_cells (open) %.3f ms\n", ms_since(t0));
  double lua_seconds = 0;
  s.on_cell_finished = [&](const lua::CellOutput& out) { lua_seconds += out.seconds; };
  t0 = Clock::now();
  auto ran = s.run_all();
  double total = ms_since(t0);
  std::printf(
      "session: run_all %zu cells %.3f ms (the cells' Lua %.3f ms; overhead %.4f ms a cell)\n",
      ran.size(), total, lua_seconds * 1e3,
      (total - lua_seconds * 1e3) / static_cast<double>(ran.size()));
  double best_overhead = 1e9, best_total = 0;
  size_t reran = 0;
  for (int rep = 0; rep < 20; ++rep) {
    nodes::Cell c = cells[static_cast<size_t>(mid_k * kChains + mid_chain)];
    c.source = source(mid_chain, mid_k, 2) + " -- " + std::to_string(rep);
    lua_seconds = 0;
    t0 = Clock::now();
    s.set_cell(c, static_cast<size_t>(mid_k * kChains + mid_chain));
    ran = s.run(mid_id);
    total = ms_since(t0);
    const double overhead = (total - lua_seconds * 1e3) / static_cast<double>(ran.size());
    if (overhead < best_overhead) {
      best_overhead = overhead;
      best_total = total;
    }
    reran = ran.size();
  }
  std::printf(
      "session: an edit in the middle re-runs %zu cells in %.3f ms: overhead %.4f ms a cell\n",
      reran, best_total, best_overhead);
  return reran == static_cast<size_t>(kLength - mid_k) ? 0 : 1;
}
