// What a notebook cell's returned values become besides their text: a tensor as a table of
// its values (as the tensor printer formats them; large ones keep their first rows and
// columns) with a heatmap for a 2-D one or an image grid for an image batch, and an mls.nn
// module or a project as a summary table (layers, types, shapes, parameter counts, a total);
// a project also as its graph drawn (graph_figure.h).
//
//   Table t = tensor_table(x, "tensor [3, 4] f32");     // t.rows[1][2] == "0.5000"
//   std::vector<Figure> f = tensor_figures(x, "...");    // heatmap, image grid, or none
//   DocumentAnalysis a = nodes::analyze_document(doc, data, "mlp.mls");
//   Table s = project_summary(doc, a, "model summary: mlp");  // a row a node, then "total"
//   add_returned_value(L, idx, 1, out, &text);           // what `return x` in a cell adds
//
// The project summary uses the editor's analysis (nodes/analysis.h: the node types' own
// shape rules and lowering), the module summary the modules' own parameters: no second
// shape inference.
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "nodes/analysis.h"
#include "scripting/notebook/cell_output.h"

namespace mls::lua {

struct TableLimits {
  size_t rows = 100, cols = 64;  // kept from the start of each axis
};

// A tensor of rank >= 1 as a table: 1-D as one column "value", 2-D as rows x columns, more
// dims as the leading dims flattened into rows labelled "[i,j]" and the last as columns.
Table tensor_table(const Tensor& t, const std::string& title, TableLimits limits = {});
// The figures of a tensor: a heatmap for 2-D (blocks averaged down to at most 64 x 64 cells),
// an image grid of the first 16 images for (N,H,W), (N,1,H,W) or (N,3,H,W); none otherwise.
std::vector<Figure> tensor_figures(const Tensor& t, const std::string& title);

struct SummaryRow {
  std::string name, type, shape;  // shape: output shape (project) or parameter shapes (module)
  int64_t params = 0;
  bool known = true;  // false: the count is unknown (the node has no shapes yet)
};
// Columns {"layer", "type", shape_column, "parameters"}, the rows, then a "total" row.
Table summary_table(const std::string& title, const std::string& shape_column,
                    const std::vector<SummaryRow>& rows, int64_t total);
// A project's nodes in topological order with their output shapes ("[N, 256]") and parameter
// counts from `a`; the note names the first node without shapes and why.
Table project_summary(const nodes::Document& doc, const nodes::DocumentAnalysis& a,
                      const std::string& title);

// Adds the rich form of the value at `idx` (the `position`th returned value) to `out`: tables
// and figures for a tensor, a summary for an mls.nn module or an mls.project handle; nothing
// for other values. A tensor shown as a table is not printed again: true, with `text` its
// short form for the cell's text ("tensor [6, 8] f32"). Must run inside a C function whose
// upvalues 1 and 2 are the Runtime and the tensor metatable (bindings.h). Never raises;
// leaves the stack as it found it.
bool add_returned_value(lua_State* L, int idx, int position, CellOutput& out, std::string* text);

}  // namespace mls::lua
