#include "nodes/shape_check.h"

#include "engine/core/check.h"

namespace mls::nodes {

Result<NodeShapes> infer_shapes(const Document& doc, const Shape& sample_shape, int64_t num_classes,
                                const NodeCatalogue& catalogue) {
  return infer_shapes(doc, InferContext{sample_shape, num_classes, {}}, catalogue);
}

Result<NodeShapes> infer_shapes(const Document& doc, const InferContext& ctx, const NodeCatalogue& catalogue) {
  const std::vector<size_t> order = topological_order(doc);
  if (order.size() != doc.nodes.size())
    return make_error("the graph has a cycle; shapes cannot be inferred");
  NodeShapes shapes;
  for (size_t index : order) {
    const NodeDoc& node = doc.nodes[index];
    const std::string who = "node '" + node.id + "' (" + node.type + "): ";
    const NodeTypeDef* def = catalogue.find(node.type);
    if (!def) return make_error(who + "unknown node type");

    std::vector<Shape> inputs;
    for (const PortDef& port : def->inputs) {
      const LinkDoc* link = find_input_link(doc, node.id, port.name);
      if (!link) return make_error(who + "input '" + port.name + "' is not linked");
      auto from = shapes.find(link->from_node);
      const NodeTypeDef* from_def =
          from == shapes.end() ? nullptr
                               : catalogue.find(doc.nodes[*find_node(doc, link->from_node)].type);
      int out_index = from_def ? from_def->output_index(link->from_port) : -1;
      if (out_index < 0)
        return make_error(who + "input '" + port.name + "' is linked to '" + link->from_node + ":" +
                          link->from_port + "', which does not exist");
      inputs.push_back(from->second[static_cast<size_t>(out_index)]);
    }

    // Documents built in code may not have gone through the loader's parameter checks;
    // the shape rules rely on them.
    std::string bad_param;
    Result<nlohmann::json> params = complete_params(*def, node.params, &bad_param);
    if (!params)
      return make_error(who + (bad_param.empty() ? "" : "parameter '" + bad_param + "' ") +
                        params.error().message);

    Result<std::vector<Shape>> out = def->infer(inputs, *params, ctx);
    if (!out) return make_error(who + out.error().message);
    MLS_CHECK(out->size() == def->outputs.size(), "shape rule returned the wrong output count");
    shapes[node.id] = std::move(*out);
  }
  return shapes;
}

const Shape& link_shape(const Document& doc, const NodeShapes& shapes, const LinkDoc& link,
                        const NodeCatalogue& catalogue) {
  std::optional<size_t> from = find_node(doc, link.from_node);
  MLS_CHECK(from.has_value(), "link from a node that does not exist");
  const NodeTypeDef* def = catalogue.find(doc.nodes[*from].type);
  MLS_CHECK(def != nullptr, "link from a node of unknown type");
  int index = def->output_index(link.from_port);
  auto it = shapes.find(link.from_node);
  MLS_CHECK(index >= 0 && it != shapes.end(), "link from a port with no inferred shape");
  return it->second[static_cast<size_t>(index)];
}

}  // namespace mls::nodes
