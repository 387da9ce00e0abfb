// A project's model graph drawn as an SVG figure, for a cell that returns a project (beside
// its summary table) and for the HTML export: one box per node (its id, type and output
// shape, coloured by role as on the canvas), top to bottom in layers of the longest path
// from the inputs, a curve per link. No Qt: the same figure in the GUI and headless.
//
//   Figure f = graph_figure(doc, nodes::analyze_document(doc, data, path), "fashion-mnist-mlp");
#pragma once

#include <string>

#include "nodes/analysis.h"
#include "nodes/document.h"
#include "scripting/notebook/cell_output.h"

namespace mls::lua {

Figure graph_figure(const nodes::Document& doc, const nodes::DocumentAnalysis& analysis,
                    const std::string& title);

}  // namespace mls::lua
