#include "nodes/analysis.h"

#include "nodes/lower.h"

namespace mls::nodes {

bool DocumentAnalysis::complete() const {
  if (!problems.empty()) return false;
  for (const auto& [id, n] : nodes)
    if (!n.inferred) return false;
  return true;
}

namespace {

// The node's parameter elements, from lowering it alone onto placeholder inputs of its
// inferred input shapes. A node whose lowering fails counts none; its error shows at
// training time through the full lowering.
int64_t count_params(const NodeTypeDef& def, const std::string& node_id, const nlohmann::json& params,
                     const std::vector<Shape>& inputs, const InferContext& data) {
  auto r = lower_alone(def, node_id, params, inputs, data);
  return r ? r->params : 0;
}

}  // namespace

DocumentAnalysis analyze_document(const Document& doc, const InferContext& data, const std::string& source_name,
                                  const NodeCatalogue& catalogue) {
  DocumentAnalysis a;
  a.problems = graph_problems(doc, source_name, catalogue);
  for (const NodeDoc& n : doc.nodes) a.nodes[n.id].waiting = "is on a cycle";
  for (size_t index : topological_order(doc)) {
    const NodeDoc& node = doc.nodes[index];
    NodeAnalysis& na = a.nodes[node.id];
    na.waiting.clear();
    const NodeTypeDef* def = catalogue.find(node.type);
    if (!def) {
      na.error = "unknown node type '" + node.type + "'";
      continue;
    }
    std::vector<Shape> inputs;
    for (const PortDef& port : def->inputs) {
      const LinkDoc* link = find_input_link(doc, node.id, port.name);
      if (!link) {
        na.waiting = "input '" + port.name + "' is not linked";
        break;
      }
      auto from = a.nodes.find(link->from_node);
      auto from_index = find_node(doc, link->from_node);
      const NodeTypeDef* from_def = from_index ? catalogue.find(doc.nodes[*from_index].type) : nullptr;
      const int out = from_def ? from_def->output_index(link->from_port) : -1;
      if (from == a.nodes.end() || !from->second.inferred || out < 0) {
        na.waiting = "waits for '" + link->from_node + "'";
        break;
      }
      inputs.push_back(from->second.outputs[static_cast<size_t>(out)]);
    }
    if (!na.waiting.empty()) continue;
    std::string bad_param;
    auto params = complete_params(*def, node.params, &bad_param);
    if (!params) {
      na.error = (bad_param.empty() ? "" : "parameter '" + bad_param + "' ") + params.error().message;
      continue;
    }
    auto out = def->infer(inputs, *params, data);
    if (!out) {
      na.error = out.error().message;
      continue;
    }
    na.inferred = true;
    na.outputs = std::move(*out);
    na.params = count_params(*def, node.id, *params, inputs, data);
    a.total_params += na.params;
  }
  return a;
}

}  // namespace mls::nodes
