// What differs between two project documents, node by node: the graph (nodes added,
// removed, retyped, with other parameters or device, relinked), the dataset and the training
// settings. `mlstudio runs diff A B` prints it for two runs' snapshots; the editor's run
// browser colours the two graphs by it.
//
//   Result<Document> a = parse_document(text_a, "run 3"), b = parse_document(text_b, "run 4");
//   DocumentDiff d = diff_documents(*a, *b);
//   for (const DiffEntry& e : d.entries) std::cout << diff_line(e) << "\n";
//   //  ~ fc1.out_features: 128 -> 256
//   //  + node drop1 (mls.dropout)
//   //  ~ training.optimizer.lr: 0.05 -> 0.01
#pragma once

#include <string>
#include <vector>

#include "nodes/document.h"

namespace mls::nodes {

enum class DiffKind { Added, Removed, Changed };

struct DiffEntry {
  DiffKind kind = DiffKind::Changed;
  // "node" (a whole node added or removed: `node` names it, `after`/`before` its type),
  // "param" (`node`.`field`), "type", "device", "link" (an input port's source:
  // `field` is the input port), "dataset" (`field` is a JSON path like "limit"),
  // "training" (`field` like "optimizer.lr"), "name".
  std::string section;
  std::string node;   // the node id, for node, param, type, device and link entries
  std::string field;  // the parameter, port or setting path
  std::string before, after;  // compact JSON text of each side ("" on the side that lacks it)
};

struct DocumentDiff {
  std::vector<DiffEntry> entries;  // nodes in b's order (removed ones after), then dataset, training
  bool empty() const { return entries.empty(); }
  // The ids of nodes that were added, removed or changed in any way (params, type, device,
  // an input link): what the editor paints.
  std::vector<std::string> added_nodes() const, removed_nodes() const, changed_nodes() const;
};

DocumentDiff diff_documents(const Document& a, const Document& b);

// "+ node drop1 (mls.dropout)", "- node fc3 (mls.linear)", "~ fc1.out_features: 128 -> 256",
// "~ fc2.in <- relu1:out (was fc1:out)", "~ training.optimizer.lr: 0.05 -> 0.01".
std::string diff_line(const DiffEntry& e);

}  // namespace mls::nodes
