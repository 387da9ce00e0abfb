// Opening a 300-cell notebook in the editor's NotebookView (issue 26: "opens in under 1 s").
// A generated notebook, Lua and Markdown mixed (Lua cells as in notebook_scheduling: chains
// of globals; Markdown with headings, lists, a table, inline math and code), saved as a
// project; each repetition loads it into a fresh DocumentModel, builds a NotebookView on it,
// shows it and processes events until every cell's widget is shown and laid out. Median of 5,
// with the load, the view's construction and the first layout apart.
//
//   cmake --build build --target notebook_gui_open
//   xvfb-run -a -s "-screen 0 1600x1000x24" build/bench/notebook_gui_open   (or offscreen)
//   build/bench/notebook_gui_open 300 1    (cells, a Markdown cell every N: 1 all, 0 none)
#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "editor/cell_widget.h"
#include "editor/document_model.h"
#include "editor/notebook_view.h"
#include "runner/backends.h"

using namespace mls;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int kCells = 300;
int kMarkdownEvery = 3;  // 0: no Markdown cells

// Cell i: every third a Markdown cell, the others Lua cells in 20 chains.
nlohmann::json cell(int i) {
  const std::string id = "c" + std::to_string(i);
  if (kMarkdownEvery > 0 && i % kMarkdownEvery == kMarkdownEvery - 1) {
    const std::string md = "## Section " + std::to_string(i) +
                           "\n\nSome *text* with `code`, a [link](https://example.org) and "
                           "math $x^2 + \\alpha$.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| " +
                           std::to_string(i) + " | " + std::to_string(i * 2) + " |";
    return {{"id", id}, {"kind", "markdown"}, {"source", md}};
  }
  const int chain = i % 20, k = i / 20;
  const std::string name = "v" + std::to_string(chain) + "_" + std::to_string(k);
  const std::string prev = "v" + std::to_string(chain) + "_" + std::to_string(k - 1);
  std::string src;
  if (k == 0)
    src = name + " = " + std::to_string(chain) + "\nlocal t = {}\nfor i = 1, 3 do t[i] = i end";
  else
    src = name + " = (" + prev + " or 0) + 1\nfunction f" + std::to_string(i) +
          "(a)\n  return a * " + name + "\nend";
  return {{"id", id}, {"kind", "lua"}, {"source", src}};
}

std::string write_project(const QTemporaryDir& dir) {
  std::ifstream in(std::string(MLS_SOURCE_DIR) + "/resources/examples/two-spirals-mlp.mls");
  std::stringstream ss;
  ss << in.rdbuf();
  auto doc = nlohmann::json::parse(ss.str());
  doc["notebook"]["cells"] = nlohmann::json::array();
  for (int i = 0; i < kCells; ++i) doc["notebook"]["cells"].push_back(cell(i));
  const std::string path = dir.filePath("nb300.mls").toStdString();
  std::ofstream(path) << doc.dump(2);
  return path;
}

struct Times {
  double load = 0, construct = 0, layout = 0, total = 0;
};

Times open_once(const std::string& path) {
  Times t;
  const auto t0 = Clock::now();
  editor::DocumentModel model;
  if (auto r = model.load(path); !r) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    std::exit(1);
  }
  t.load = ms_since(t0);
  const auto t1 = Clock::now();
  editor::NotebookView view(&model, "");
  view.resize(900, 1000);
  t.construct = ms_since(t1);
  const auto t2 = Clock::now();
  view.show();
  const QStringList ids = view.cellIds();
  if (ids.size() != kCells) {
    std::fprintf(stderr, "the view shows %d cells, not %d\n", int(ids.size()), kCells);
    std::exit(1);
  }
  // Until every cell's widget is visible with its size (the layout ran).
  for (int spins = 0;; ++spins) {
    QApplication::processEvents();
    bool all = true;
    for (const QString& id : ids) {
      const editor::CellWidget* w = view.cellWidget(id);
      all = all && w && w->isVisible() && w->height() > 0;
    }
    if (all) break;
    if (spins > 100000) {
      std::fprintf(stderr, "the cells were never all shown\n");
      std::exit(1);
    }
  }
  t.layout = ms_since(t2);
  t.total = ms_since(t0);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("DISPLAY") && !std::getenv("QT_QPA_PLATFORM"))
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  if (argc > 1) kCells = std::max(1, std::atoi(argv[1]));
  if (argc > 2) kMarkdownEvery = std::max(0, std::atoi(argv[2]));
  runner::init_backends();
  QTemporaryDir dir;
  const std::string path = write_project(dir);
  open_once(path);  // warm-up: fonts, plugins, the first Lua state
  std::vector<double> load, construct, layout, total;
  for (int rep = 0; rep < 5; ++rep) {
    const Times t = open_once(path);
    load.push_back(t.load);
    construct.push_back(t.construct);
    layout.push_back(t.layout);
    total.push_back(t.total);
  }
  const int markdown = kMarkdownEvery > 0 ? kCells / kMarkdownEvery : 0;
  std::printf(
      "%d cells (%d Lua, %d Markdown) opened in a NotebookView (%s): median of 5 %.1f ms "
      "(load %.1f ms, construction %.1f ms, show + first layout %.1f ms); min %.1f, max %.1f ms\n",
      kCells, kCells - markdown, markdown, qPrintable(QApplication::platformName()), median(total),
      median(load), median(construct), median(layout),
      *std::min_element(total.begin(), total.end()), *std::max_element(total.begin(), total.end()));
  return 0;
}
