// Shape inference over a whole document, before anything is lowered or allocated, so
// that a mismatch is reported against the node the user drew rather than deep in the
// engine.
//
//   Result<NodeShapes> shapes = infer_shapes(doc, /*sample_shape=*/{1, 28, 28},
//                                            /*num_classes=*/10);
//   if (!shapes) { std::cerr << shapes.error().message << "\n"; return 1; }
//   // node 'fc1' (mls.linear): input 'in' has shape [N,1,28,28]; Linear expects
//   // [N,features] — add a Flatten node before it
//   (*shapes)["fc1"][0] == Shape{-1, 256};   // -1 is the batch dim
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/shape.h"
#include "nodes/catalogue.h"
#include "nodes/document.h"

namespace mls::nodes {

// Node id -> the shape of each output port, in the order of NodeTypeDef::outputs.
using NodeShapes = std::map<std::string, std::vector<Shape>>;

// `sample_shape` is one dataset sample without the batch dim; `num_classes` is the
// dataset's class count (0 = do not check). Errors start "node 'ID' (TYPE): ".
Result<NodeShapes> infer_shapes(const Document& doc, const Shape& sample_shape, int64_t num_classes,
                                const NodeCatalogue& catalogue = builtin_catalogue());
// The same with the whole data description (regression targets included).
Result<NodeShapes> infer_shapes(const Document& doc, const InferContext& ctx,
                                const NodeCatalogue& catalogue = builtin_catalogue());

// The shape that flows along `link` (its source port's shape); the link must be valid
// and its source node inferred.
const Shape& link_shape(const Document& doc, const NodeShapes& shapes, const LinkDoc& link,
                        const NodeCatalogue& catalogue = builtin_catalogue());

}  // namespace mls::nodes
