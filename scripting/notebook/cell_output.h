// What one run of a notebook cell leaves: printed text and returned values, figures (plots,
// tensor heatmaps, image grids, all as SVG), tables (returned tensors, model summaries),
// widgets, and the error with its line. The GUI draws it, `mlstudio notebook run` saves it
// beside the project, the HTML export embeds it.
//
//   CellOutput& out = *rt.cell_output;          // set by the session while a cell runs
//   out.text += "hello\n";
//   out.figures.push_back({.svg = render_svg(plot), .title = "loss"});
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mls::lua {

// A figure as SVG: the one form every front end shows (the GUI through QSvgRenderer, the
// HTML export inline, `notebook run --png` rasterised by the app).
struct Figure {
  std::string svg;
  std::string title;
  int width = 640, height = 400;  // the SVG's size in pixels
  bool operator==(const Figure&) const = default;
};

// mls.ui.slider / select / checkbox / button: a control bound to a global name. The cell
// that made it assigns the widget's value to that global (`lr = mls.ui.slider("lr", {...})`),
// so moving it re-runs that cell and then, reactively, the cells that read the name.
struct Widget {
  std::string kind;  // "slider", "select", "checkbox", "button"
  std::string name;  // the global it binds
  std::string label;
  double min = 0, max = 1, step = 0;  // slider
  std::vector<std::string> options;   // select
  nlohmann::json value;               // the current value (number, string, bool; button: clicks)
  bool operator==(const Widget&) const = default;
};

// A table: a returned tensor's values (as the tensor printer formats them) or a model's
// summary. Large tensors keep their first rows and columns; total_rows and total_cols say
// how many there are, so a front end can say "showing 100 of 60000 rows".
struct Table {
  std::string title;                           // "tensor [60000, 784] f32", "model summary: Net"
  std::vector<int64_t> shape;                  // the tensor's shape (empty for a summary)
  std::vector<std::string> columns;            // the header
  std::vector<std::string> row_labels;         // one per row ("0", "[1,2]"); empty: none
  std::vector<std::vector<std::string>> rows;  // each as many cells as columns
  bool truncated = false;                      // rows or columns were left out
  size_t total_rows = 0, total_cols = 0;
  std::string note;  // e.g. why the summary has no output shapes
  bool operator==(const Table&) const = default;
};

struct CellOutput {
  std::string cell_id;
  std::string text;             // print output, then the returned values (as print shows them)
  std::vector<Figure> figures;  // in the order the cell made them
  std::vector<Widget> widgets;
  std::vector<Table> tables;  // returned tensors and models, in the order returned
  bool ok = true;
  std::string error;   // the message with its traceback, when !ok
  int error_line = 0;  // the line in the cell (1-based) where it failed; 0: not in the cell
  double seconds = 0;
  int64_t run_id = 0;  // a cell that trained: its run in the store (the last one)
  // Of the cell's code and its inputs (the hashes of the outputs of the cells it reads):
  // a saved output whose hash differs from the cell's current one is stale.
  std::string hash;
  bool operator==(const CellOutput&) const = default;
};

}  // namespace mls::lua
