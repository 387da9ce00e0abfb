// Writing .mls files: Document -> JSON in the order of the spec in document.h (so files
// diff well), and an atomic save (temp file + fsync + rename) so that a failed or
// interrupted save never costs the user the file they had.
#include "engine/core/atomic_file.h"
#include "nodes/document.h"

namespace mls::nodes {

namespace {

using ordered = nlohmann::ordered_json;

// Params in the catalogue's order (out_features before bias), then any others.
ordered params_json(const NodeDoc& node, const NodeCatalogue& catalogue) {
  ordered out = ordered::object();
  const NodeTypeDef* def = catalogue.find(node.type);
  if (def)
    for (const ParamDef& p : def->params)
      if (node.params.contains(p.name) &&
          (p.saved_when_default || node.params.at(p.name) != p.default_value))
        out[p.name] = ordered(node.params.at(p.name));
  if (node.params.is_object())
    for (const auto& [key, value] : node.params.items())
      if (!out.contains(key) && !(def && def->find_param(key))) out[key] = ordered(value);
  return out;
}

// Layout entries in node order, then entries for ids that no longer exist (kept: the
// layout is the editor's business, not ours to prune).
ordered layout_json(const Document& doc) {
  if (!doc.layout.is_object()) return ordered(doc.layout);
  ordered out = ordered::object();
  for (const NodeDoc& n : doc.nodes)
    if (doc.layout.contains(n.id)) out[n.id] = ordered(doc.layout.at(n.id));
  for (const auto& [key, value] : doc.layout.items())
    if (!out.contains(key)) out[key] = ordered(value);
  return out;
}

}  // namespace

std::string model_text(const Document& doc, const NodeCatalogue& catalogue) {
  Document model;
  model.format_version = doc.format_version;
  model.dataset = doc.dataset;
  model.nodes = doc.nodes;
  for (NodeDoc& n : model.nodes) n.locked = n.solution = false;  // lab marks: not the model
  model.links = doc.links;
  model.weights = doc.weights;
  model.training = doc.training;
  return serialize_document(model, catalogue);
}

std::string serialize_document(const Document& doc, const NodeCatalogue& catalogue) {
  ordered root = ordered::object();
  root["format_version"] = doc.format_version;
  root["name"] = doc.name;
  root["description"] = doc.description;

  root["dataset"] = data::dataset_spec_to_json(doc.dataset);

  ordered nodes = ordered::array();
  for (const NodeDoc& n : doc.nodes) {
    nodes.push_back({{"id", n.id},
                     {"type", n.type},
                     {"version", n.version},
                     {"params", params_json(n, catalogue)}});
    if (!n.device.empty()) nodes.back()["device"] = n.device;
    if (n.locked) nodes.back()["locked"] = true;
    if (n.solution) nodes.back()["solution"] = true;
  }
  ordered links = ordered::array();
  for (const LinkDoc& l : doc.links)
    links.push_back(
        {{"from", l.from_node + ":" + l.from_port}, {"to", l.to_node + ":" + l.to_port}});
  root["model"] = {{"nodes", std::move(nodes)}, {"links", std::move(links)}};
  if (!doc.weights.empty()) root["model"]["weights"] = doc.weights;

  root["training"] = training_json(doc.training);
  root["layout"] = layout_json(doc);
  if (doc.lab.present) root["lab"] = lab_to_ordered_json(doc.lab);
  if (doc.notebook.present || doc.notebook.lazy || !doc.notebook.cells.empty())
    root["notebook"] = notebook_to_ordered_json(doc.notebook);
  // `replace` rather than throwing on a string that is not UTF-8: saving must not abort.
  return root.dump(2, ' ', false, ordered::error_handler_t::replace) + "\n";
}

Result<void> save_document(const Document& doc, const std::string& path,
                           const NodeCatalogue& catalogue) {
  const std::string text = serialize_document(doc, catalogue);
  auto r = write_text_atomically(path, text);
  if (!r) return make_error("cannot save " + path + ": " + r.error().message);
  return {};
}

}  // namespace mls::nodes
