#include "nodes/document_diff.h"

#include <algorithm>
#include <map>
#include <set>

namespace mls::nodes {

namespace {

using json = nlohmann::json;

std::string compact(const json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

// Leaf-by-leaf differences of two JSON objects, as dotted paths ("optimizer.lr").
void diff_json(const json& a, const json& b, const std::string& prefix, const std::string& section,
               std::vector<DiffEntry>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto& [k, v] : a.items()) keys.insert(k);
    for (auto& [k, v] : b.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const std::string path = prefix.empty() ? k : prefix + "." + k;
      const bool in_a = a.contains(k), in_b = b.contains(k);
      if (in_a && in_b) {
        diff_json(a[k], b[k], path, section, out);
      } else {
        out.push_back({in_b ? DiffKind::Added : DiffKind::Removed, section, "", path,
                       in_a ? compact(a[k]) : "", in_b ? compact(b[k]) : ""});
      }
    }
    return;
  }
  if (a != b) out.push_back({DiffKind::Changed, section, "", prefix, compact(a), compact(b)});
}

// Each input port's source, "node:port".
std::map<std::string, std::string> inputs_of(const Document& d, const std::string& node) {
  std::map<std::string, std::string> in;
  for (const LinkDoc& l : d.links)
    if (l.to_node == node) in[l.to_port] = l.from_node + ":" + l.from_port;
  return in;
}

void diff_node(const Document& da, const NodeDoc& a, const Document& db, const NodeDoc& b,
               std::vector<DiffEntry>& out) {
  if (a.type != b.type) out.push_back({DiffKind::Changed, "type", b.id, "type", a.type, b.type});
  if (a.device != b.device)
    out.push_back({DiffKind::Changed, "device", b.id, "device", a.device, b.device});
  std::vector<DiffEntry> params;
  diff_json(a.params, b.params, "", "param", params);
  for (DiffEntry& e : params) {
    e.node = b.id;
    out.push_back(std::move(e));
  }
  auto ia = inputs_of(da, a.id), ib = inputs_of(db, b.id);
  std::set<std::string> ports;
  for (auto& [p, s] : ia) ports.insert(p);
  for (auto& [p, s] : ib) ports.insert(p);
  for (const std::string& p : ports) {
    const std::string sa = ia.count(p) ? ia[p] : "", sb = ib.count(p) ? ib[p] : "";
    if (sa != sb)
      out.push_back({sa.empty() ? DiffKind::Added : sb.empty() ? DiffKind::Removed : DiffKind::Changed,
                     "link", b.id, p, sa, sb});
  }
}

std::vector<std::string> nodes_where(const std::vector<DiffEntry>& es, auto pred) {
  std::vector<std::string> ids;
  for (const DiffEntry& e : es)
    if (pred(e) && std::find(ids.begin(), ids.end(), e.node) == ids.end()) ids.push_back(e.node);
  return ids;
}

}  // namespace

DocumentDiff diff_documents(const Document& a, const Document& b) {
  DocumentDiff d;
  if (a.name != b.name) d.entries.push_back({DiffKind::Changed, "name", "", "name", a.name, b.name});
  auto find = [](const Document& doc, const std::string& id) -> const NodeDoc* {
    for (const NodeDoc& n : doc.nodes)
      if (n.id == id) return &n;
    return nullptr;
  };
  for (const NodeDoc& nb : b.nodes) {
    if (const NodeDoc* na = find(a, nb.id))
      diff_node(a, *na, b, nb, d.entries);
    else
      d.entries.push_back({DiffKind::Added, "node", nb.id, "", "", nb.type});
  }
  for (const NodeDoc& na : a.nodes)
    if (!find(b, na.id)) d.entries.push_back({DiffKind::Removed, "node", na.id, "", na.type, ""});
  diff_json(json(data::dataset_spec_to_json(a.dataset)), json(data::dataset_spec_to_json(b.dataset)),
            "", "dataset", d.entries);
  diff_json(json(training_json(a.training)), json(training_json(b.training)), "", "training",
            d.entries);
  return d;
}

std::vector<std::string> DocumentDiff::added_nodes() const {
  return nodes_where(entries, [](const DiffEntry& e) { return e.section == "node" && e.kind == DiffKind::Added; });
}

std::vector<std::string> DocumentDiff::removed_nodes() const {
  return nodes_where(entries,
                     [](const DiffEntry& e) { return e.section == "node" && e.kind == DiffKind::Removed; });
}

std::vector<std::string> DocumentDiff::changed_nodes() const {
  return nodes_where(entries, [](const DiffEntry& e) {
    return e.section == "param" || e.section == "type" || e.section == "device" || e.section == "link";
  });
}

std::string diff_line(const DiffEntry& e) {
  const char sign = e.kind == DiffKind::Added ? '+' : e.kind == DiffKind::Removed ? '-' : '~';
  const std::string s(1, sign);
  if (e.section == "node")
    return s + " node " + e.node + " (" + (e.kind == DiffKind::Added ? e.after : e.before) + ")";
  if (e.section == "link") {
    if (e.kind == DiffKind::Added) return s + " " + e.node + "." + e.field + " <- " + e.after;
    if (e.kind == DiffKind::Removed) return s + " " + e.node + "." + e.field + " <- " + e.before;
    return s + " " + e.node + "." + e.field + " <- " + e.after + " (was " + e.before + ")";
  }
  std::string where = e.section == "param" || e.section == "type" || e.section == "device"
                          ? e.node + "." + e.field
                      : e.section == "name" ? std::string("name")
                                            : e.section + "." + e.field;
  if (e.kind == DiffKind::Added) return s + " " + where + ": " + e.after;
  if (e.kind == DiffKind::Removed) return s + " " + where + " (was " + e.before + ")";
  return s + " " + where + ": " + e.before + " -> " + e.after;
}

}  // namespace mls::nodes
