// Lowering: a checked project document -> the engine's model graph for one batch size.
// The GUI, the batch mode and the tests all train through this one function.
//
//   Result<Document> doc = load_document(path);
//   Result<ModelGraph> m = lower(*doc, /*sample_shape=*/{1, 28, 28}, /*classes=*/10,
//                                /*batch=*/128, path);
//   std::cout << m->graph.to_text();     // nodes are labelled with the document's node ids
#pragma once

#include <string>

#include "engine/train/trainer.h"
#include "nodes/document.h"

namespace mls::nodes {

// Shape problems are reported against the document node ("P.mls: node 'fc1' ...").
Result<ModelGraph> lower(const Document& doc, const Shape& sample_shape, int64_t num_classes,
                         int64_t batch, const std::string& source_name);

}  // namespace mls::nodes
