// Edit commands and the undo stack (nodes/edit.h). Each command checks itself in check(),
// which its factory runs against the document it was made for and apply() runs again
// before changing anything, so a refused edit leaves the document untouched. What apply()
// overwrites or removes it keeps, with its index, so that revert() is exact.
//
// [SECTION] Helpers
// [SECTION] Nodes: add, remove, rename, move, set params
// [SECTION] Links: connect, disconnect
// [SECTION] Sections: training, dataset
// [SECTION] Factories
// [SECTION] UndoStack
#include "nodes/edit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <queue>
#include <utility>

#include "engine/core/check.h"
#include "nodes/json_fields.h"

namespace mls::nodes {

namespace {

using nlohmann::json;

// [SECTION] Helpers

std::string q(const std::string& s) {
  return "'" + s + "'";
}

// Whole numbers stay JSON integers, so a moved node saves as "x": 40 like a loaded one.
json coordinate(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

// A node's layout entry, or nullopt when it has none (or the layout is not an object).
std::optional<json> layout_entry(const Document& doc, const std::string& id) {
  if (!doc.layout.is_object() || !doc.layout.contains(id)) return std::nullopt;
  return doc.layout.at(id);
}

// Puts back what layout_entry() returned before an edit.
void restore_layout_entry(Document& doc, const std::string& id, const std::optional<json>& entry) {
  if (entry)
    doc.layout[id] = *entry;
  else if (doc.layout.is_object())
    doc.layout.erase(id);
}

struct PortRef {
  std::string node, port;
  std::string text() const { return node + ":" + port; }
};

Result<PortRef> parse_ref(const std::string& ref) {
  size_t colon = ref.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == ref.size())
    return make_error("expected \"node:port\", got \"" + ref + "\"");
  return PortRef{ref.substr(0, colon), ref.substr(colon + 1)};
}

std::string port_names(const std::vector<PortDef>& ports, const char* none) {
  std::vector<std::string> names;
  for (const PortDef& p : ports) names.push_back(p.name);
  return names.empty() ? std::string(none) : quoted_list(names, " and ");
}

// The node's catalogue type, or an error naming the node.
Result<const NodeTypeDef*> node_type(const Document& doc, const std::string& id,
                                     const NodeCatalogue& catalogue) {
  std::optional<size_t> i = find_node(doc, id);
  if (!i) return make_error("there is no node " + q(id));
  const NodeTypeDef* def = catalogue.find(doc.nodes[*i].type);
  if (!def) return make_error("node " + q(id) + " has unknown type " + q(doc.nodes[*i].type));
  return def;
}

// Checks and completes params as the loader does; messages name the node and parameter.
Result<json> checked_params(const NodeTypeDef& def, const json& params, const std::string& what) {
  std::string bad_param;
  Result<json> out = complete_params(def, params, &bad_param);
  if (!out)
    return make_error(what + ": " + (bad_param.empty() ? "" : ptr("/params", bad_param) + ": ") +
                      out.error().message);
  return out;
}

// The first path of links from `start` to `goal` ("fc1 -> relu1"), or "" when there is none.
std::string find_path(const Document& doc, const std::string& start, const std::string& goal) {
  std::map<std::string, std::string> came_from{{start, ""}};
  std::queue<std::string> todo;
  todo.push(start);
  while (!todo.empty()) {
    std::string n = todo.front();
    todo.pop();
    if (n == goal) {
      std::string path = n;
      for (std::string at = came_from[n]; !at.empty(); at = came_from[at])
        path = at + " -> " + path;
      return path;
    }
    for (const LinkDoc& l : doc.links)
      if (l.from_node == n && came_from.emplace(l.to_node, n).second) todo.push(l.to_node);
  }
  return "";
}

// [SECTION] Nodes: add, remove, rename, move, set params

class AddNode final : public EditCommand {
 public:
  AddNode(NodeDoc node, std::optional<LayoutPos> pos) : node_(std::move(node)), pos_(pos) {}

  Result<void> check(const Document& doc) const {
    if (find_node(doc, node_.id)) return fail("a node " + q(node_.id) + " already exists");
    if (pos_ && !doc.layout.is_object()) return fail("the document's layout is not an object");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    doc.nodes.push_back(node_);
    if (pos_) {
      old_entry_ = layout_entry(doc, node_.id);  // one left behind by a removed node
      doc.layout[node_.id] = {{"x", coordinate(pos_->x)}, {"y", coordinate(pos_->y)}};
    }
    return {};
  }
  void revert(Document& doc) override {
    MLS_CHECK(!doc.nodes.empty() && doc.nodes.back().id == node_.id, "AddNode: not the last edit");
    doc.nodes.pop_back();
    if (pos_) restore_layout_entry(doc, node_.id, old_entry_);
  }
  std::string text() const override { return "Add node " + node_.id + " (" + node_.type + ")"; }

 private:
  Error fail(const std::string& why) const {
    return make_error("cannot add node " + q(node_.id) + ": " + why);
  }
  NodeDoc node_;
  std::optional<LayoutPos> pos_;
  std::optional<json> old_entry_;
};

class RemoveNode final : public EditCommand {
 public:
  explicit RemoveNode(std::string id) : id_(std::move(id)) {}

  Result<void> check(const Document& doc) const {
    if (!find_node(doc, id_)) return make_error("cannot remove node " + q(id_) + ": no such node");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    index_ = *find_node(doc, id_);
    node_ = doc.nodes[index_];
    links_.clear();
    for (size_t i = 0; i < doc.links.size(); ++i)
      if (doc.links[i].from_node == id_ || doc.links[i].to_node == id_)
        links_.emplace_back(i, doc.links[i]);
    std::erase_if(doc.links,
                  [&](const LinkDoc& l) { return l.from_node == id_ || l.to_node == id_; });
    doc.nodes.erase(doc.nodes.begin() + static_cast<std::ptrdiff_t>(index_));
    layout_ = layout_entry(doc, id_);
    restore_layout_entry(doc, id_, std::nullopt);
    return {};
  }
  void revert(Document& doc) override {
    MLS_CHECK(index_ <= doc.nodes.size() && !find_node(doc, id_), "RemoveNode: not the last edit");
    doc.nodes.insert(doc.nodes.begin() + static_cast<std::ptrdiff_t>(index_), node_);
    // Ascending original indices: each link lands where it was, the ones before it being back.
    for (const auto& [i, link] : links_)
      doc.links.insert(doc.links.begin() + static_cast<std::ptrdiff_t>(i), link);
    restore_layout_entry(doc, id_, layout_);
  }
  std::string text() const override { return "Remove node " + id_; }

 private:
  std::string id_;
  size_t index_ = 0;
  NodeDoc node_;
  std::vector<std::pair<size_t, LinkDoc>> links_;
  std::optional<json> layout_;
};

class RenameNode final : public EditCommand {
 public:
  RenameNode(std::string id, std::string new_id) : id_(std::move(id)), new_id_(std::move(new_id)) {}

  Result<void> check(const Document& doc) const {
    auto fail = [&](const std::string& why) {
      return make_error("cannot rename node " + q(id_) + " to " + q(new_id_) + ": " + why);
    };
    if (!find_node(doc, id_)) return fail("there is no node " + q(id_));
    if (find_node(doc, new_id_)) return fail("a node " + q(new_id_) + " already exists");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    doc.nodes[*find_node(doc, id_)].id = new_id_;
    from_ends_.clear();
    to_ends_.clear();
    for (size_t i = 0; i < doc.links.size(); ++i) {
      LinkDoc& l = doc.links[i];
      if (l.from_node == id_) l.from_node = new_id_, from_ends_.push_back(i);
      if (l.to_node == id_) l.to_node = new_id_, to_ends_.push_back(i);
    }
    entry_ = layout_entry(doc, id_);
    if (entry_) {
      stale_entry_ = layout_entry(doc, new_id_);  // one left behind by a removed node
      doc.layout[new_id_] = *entry_;
      doc.layout.erase(id_);
    }
    return {};
  }
  void revert(Document& doc) override {
    std::optional<size_t> i = find_node(doc, new_id_);
    MLS_CHECK(i && !find_node(doc, id_), "RenameNode: not the last edit");
    doc.nodes[*i].id = id_;
    for (size_t k : from_ends_) doc.links[k].from_node = id_;
    for (size_t k : to_ends_) doc.links[k].to_node = id_;
    if (entry_) {
      restore_layout_entry(doc, new_id_, stale_entry_);
      doc.layout[id_] = *entry_;
    }
  }
  std::string text() const override { return "Rename node " + id_ + " to " + new_id_; }

 private:
  std::string id_, new_id_;
  std::vector<size_t> from_ends_, to_ends_;
  std::optional<json> entry_, stale_entry_;
};

class MoveNode final : public EditCommand {
 public:
  MoveNode(std::string id, LayoutPos pos) : id_(std::move(id)), pos_(pos) {}

  Result<void> check(const Document& doc) const {
    if (!find_node(doc, id_)) return make_error("cannot move node " + q(id_) + ": no such node");
    if (!doc.layout.is_object())
      return make_error("cannot move node " + q(id_) + ": the document's layout is not an object");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    old_entry_ = layout_entry(doc, id_);
    json entry = old_entry_ && old_entry_->is_object() ? *old_entry_ : json::object();
    entry["x"] = coordinate(pos_.x);
    entry["y"] = coordinate(pos_.y);
    doc.layout[id_] = std::move(entry);
    return {};
  }
  void revert(Document& doc) override { restore_layout_entry(doc, id_, old_entry_); }
  std::string text() const override { return "Move node " + id_; }

 private:
  std::string id_;
  LayoutPos pos_;
  std::optional<json> old_entry_;
};

class SetNodeDevice final : public EditCommand {
 public:
  SetNodeDevice(std::string id, std::string device)
      : id_(std::move(id)), device_(std::move(device)) {}
  Result<void> check(const Document& doc) const {
    if (!find_node(doc, id_)) return make_error("cannot place node " + q(id_) + ": no such node");
    if (!device_.empty() && device_ != "cpu")
      return make_error("cannot place node " + q(id_) + " on " + q(device_) +
                        ": a node runs on the project's device or on \"cpu\"");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    NodeDoc& n = doc.nodes[*find_node(doc, id_)];
    old_ = n.device;
    n.device = device_;
    return {};
  }
  void revert(Document& doc) override { doc.nodes[*find_node(doc, id_)].device = old_; }
  std::string text() const override {
    return device_.empty() ? "Run " + id_ + " on the project's device"
                           : "Run " + id_ + " on the " + device_;
  }

 private:
  std::string id_, device_, old_;
};

class SetFrames final : public EditCommand {
 public:
  SetFrames(json frames, std::string text) : frames_(std::move(frames)), text_(std::move(text)) {}
  Result<void> check(const Document& doc) const {
    if (!doc.layout.is_object())
      return make_error("cannot " + text_ + ": the document's layout is not an object");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    old_ = layout_entry(doc, kFramesKey);
    if (frames_.empty())
      doc.layout.erase(kFramesKey);
    else
      doc.layout[kFramesKey] = frames_;
    return {};
  }
  void revert(Document& doc) override { restore_layout_entry(doc, kFramesKey, old_); }
  std::string text() const override { return text_; }

 private:
  json frames_;
  std::string text_;
  std::optional<json> old_;
};

class SetParams final : public EditCommand {
 public:
  SetParams(std::string id, json params) : id_(std::move(id)), params_(std::move(params)) {}

  Result<void> check(const Document& doc) const {
    if (!find_node(doc, id_))
      return make_error("cannot set params of node " + q(id_) + ": no such node");
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    old_ = std::exchange(doc.nodes[*find_node(doc, id_)].params, params_);
    return {};
  }
  void revert(Document& doc) override {
    std::optional<size_t> i = find_node(doc, id_);
    MLS_CHECK(i.has_value(), "SetParams: not the last edit");
    doc.nodes[*i].params = old_;
  }
  std::string text() const override { return "Set params of " + id_; }

 private:
  std::string id_;
  json params_, old_;
};

// [SECTION] Links: connect, disconnect

class Connect final : public EditCommand {
 public:
  Connect(LinkDoc link, const NodeCatalogue& catalogue) : link_(std::move(link)), cat_(catalogue) {}

  Result<void> check(const Document& doc) const {
    const PortRef from{link_.from_node, link_.from_port}, to{link_.to_node, link_.to_port};
    auto fail = [&](const std::string& why) {
      return make_error("cannot link " + q(from.text()) + " to " + q(to.text()) + ": " + why);
    };
    auto from_def = node_type(doc, from.node, cat_);
    if (!from_def) return fail(from_def.error().message);
    auto to_def = node_type(doc, to.node, cat_);
    if (!to_def) return fail(to_def.error().message);

    const PortDef* out = (*from_def)->find_output(from.port);
    if (!out && (*from_def)->find_input(from.port))
      return fail(q(from.text()) + " is an input; a link starts at an output (" + from.node +
                  " has " + port_names((*from_def)->outputs, "no outputs") + ")");
    if (!out)
      return fail("node " + q(from.node) + " (" + (*from_def)->id + ") has no output " +
                  q(from.port) + " (it has " + port_names((*from_def)->outputs, "no outputs") +
                  ")");
    const PortDef* in = (*to_def)->find_input(to.port);
    if (!in && (*to_def)->find_output(to.port))
      return fail(q(to.text()) + " is an output; a link ends at an input (" + to.node + " has " +
                  port_names((*to_def)->inputs, "no inputs") + ")");
    if (!in)
      return fail("node " + q(to.node) + " (" + (*to_def)->id + ") has no input " + q(to.port) +
                  " (it has " + port_names((*to_def)->inputs, "no inputs") + ")");

    auto kind = [](PortKind k) { return k == PortKind::Labels ? "labels" : "a tensor"; };
    if (out->kind != in->kind)
      return fail(q(from.text()) + " gives " + kind(out->kind) + " but " + q(to.text()) +
                  " takes " + kind(in->kind));
    if (const LinkDoc* l = find_input_link(doc, to.node, to.port))
      return fail("input " + q(to.text()) + " is already linked (from " +
                  q(l->from_node + ":" + l->from_port) + "); disconnect it first");
    if (std::string path = find_path(doc, to.node, from.node); !path.empty())
      return fail("it would make a cycle " + path + " -> " + to.node);
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    doc.links.push_back(link_);
    return {};
  }
  void revert(Document& doc) override {
    MLS_CHECK(!doc.links.empty() && doc.links.back() == link_, "Connect: not the last edit");
    doc.links.pop_back();
  }
  std::string text() const override {
    return "Connect " + link_.from_node + ":" + link_.from_port + " to " + link_.to_node + ":" +
           link_.to_port;
  }

 private:
  LinkDoc link_;
  const NodeCatalogue& cat_;
};

class Disconnect final : public EditCommand {
 public:
  explicit Disconnect(LinkDoc link) : link_(std::move(link)) {}

  Result<void> check(const Document& doc) const {
    if (std::find(doc.links.begin(), doc.links.end(), link_) == doc.links.end())
      return make_error("cannot unlink " + q(from()) + " from " + q(to()) + ": there is no link " +
                        "from " + q(from()) + " to " + q(to()));
    return {};
  }
  Result<void> apply(Document& doc) override {
    if (auto ok = check(doc); !ok) return ok;
    auto it = std::find(doc.links.begin(), doc.links.end(), link_);
    index_ = static_cast<size_t>(it - doc.links.begin());
    doc.links.erase(it);
    return {};
  }
  void revert(Document& doc) override {
    MLS_CHECK(index_ <= doc.links.size(), "Disconnect: not the last edit");
    doc.links.insert(doc.links.begin() + static_cast<std::ptrdiff_t>(index_), link_);
  }
  std::string text() const override { return "Disconnect " + from() + " from " + to(); }

 private:
  std::string from() const { return link_.from_node + ":" + link_.from_port; }
  std::string to() const { return link_.to_node + ":" + link_.to_port; }
  LinkDoc link_;
  size_t index_ = 0;
};

// [SECTION] Sections: training, dataset

// Replaces one whole section; the factory has parsed and checked the new value.
template <typename T>
class SetSection final : public EditCommand {
 public:
  SetSection(T Document::*member, T value, std::string text)
      : member_(member), value_(std::move(value)), text_(std::move(text)) {}

  Result<void> check(const Document&) const { return {}; }
  Result<void> apply(Document& doc) override {
    old_ = std::exchange(doc.*member_, value_);
    return {};
  }
  void revert(Document& doc) override { doc.*member_ = old_; }
  std::string text() const override { return text_; }

 private:
  T Document::*member_;
  T value_, old_;
  std::string text_;
};

// The section as saved, with `patch` merged in (RFC 7386).
Result<json> patched(const nlohmann::ordered_json& saved, const json& patch,
                     const std::string& what) {
  if (!patch.is_object()) return make_error(what + ": the change must be a JSON object");
  json section(saved);
  section.merge_patch(patch);
  return section;
}

// [SECTION] Factories

// Makes the command and checks it against the document it is for.
template <typename Cmd, typename... Args>
EditResult checked(const Document& doc, Args&&... args) {
  auto cmd = std::make_unique<Cmd>(std::forward<Args>(args)...);
  if (Result<void> ok = cmd->check(doc); !ok) return ok.error();
  return std::unique_ptr<EditCommand>(std::move(cmd));
}

Result<LinkDoc> parse_link(const std::string& from, const std::string& to, const char* verb,
                           const char* prep) {
  Result<PortRef> f = parse_ref(from), t = parse_ref(to);
  if (!f || !t)
    return make_error(std::string("cannot ") + verb + " " + q(from) + " " + prep + " " + q(to) +
                      ": " + (!f ? f : t).error().message);
  return LinkDoc{f->node, f->port, t->node, t->port};
}

// In a student's copy of a lab a locked node keeps its type, parameters, device and inputs.
Result<void> node_unlocked(const Document& doc, const std::string& id, const std::string& what) {
  if (!doc.lab.student) return {};
  auto i = find_node(doc, id);
  if (!i || !doc.nodes[*i].locked) return {};
  return make_error(what + ": node " + q(id) + " is locked by the lab");
}

// ... and the links into it: a node that feeds a locked node keeps its id and stays.
Result<void> feeds_unlocked(const Document& doc, const std::string& id, const std::string& what) {
  if (!doc.lab.student) return {};
  for (const LinkDoc& l : doc.links)
    if (l.from_node == id)
      if (auto r = node_unlocked(doc, l.to_node, what + " (it feeds a locked node)"); !r) return r;
  return {};
}

}  // namespace

EditResult make_add_node(const Document& doc, const std::string& id, const std::string& type,
                         const json& params, std::optional<LayoutPos> pos,
                         const NodeCatalogue& catalogue) {
  const std::string what = "cannot add node " + q(id);
  if (!is_valid_node_id(id))
    return make_error(what + ": a node id must start with a letter or '_' and hold only " +
                      "letters, digits, '_', '.' and '-'");
  const NodeTypeDef* def = catalogue.find(type);
  if (!def)
    if (std::optional<std::string> renamed = catalogue.renamed_to(type))
      def = catalogue.find(*renamed);
  if (!def) return make_error(what + ": unknown node type " + q(type));
  Result<json> full = checked_params(*def, params, what + " (" + def->id + ")");
  if (!full) return full.error();
  return checked<AddNode>(doc, NodeDoc{id, def->id, def->version, std::move(*full)}, pos);
}

EditResult make_remove_node(const Document& doc, const std::string& id) {
  if (auto r = node_unlocked(doc, id, "cannot remove node " + q(id)); !r) return r.error();
  if (auto r = feeds_unlocked(doc, id, "cannot remove node " + q(id)); !r) return r.error();
  return checked<RemoveNode>(doc, id);
}

EditResult make_connect(const Document& doc, const std::string& from, const std::string& to,
                        const NodeCatalogue& catalogue) {
  Result<LinkDoc> link = parse_link(from, to, "link", "to");
  if (!link) return link.error();
  if (auto r = node_unlocked(doc, link->to_node, "cannot link " + q(from) + " to " + q(to)); !r)
    return r.error();
  return checked<Connect>(doc, std::move(*link), catalogue);
}

EditResult make_disconnect(const Document& doc, const std::string& from, const std::string& to) {
  Result<LinkDoc> link = parse_link(from, to, "unlink", "from");
  if (!link) return link.error();
  if (auto r = node_unlocked(doc, link->to_node, "cannot unlink " + q(from) + " from " + q(to)); !r)
    return r.error();
  return checked<Disconnect>(doc, std::move(*link));
}

EditResult make_set_params(const Document& doc, const std::string& id, const json& patch,
                           const NodeCatalogue& catalogue) {
  if (auto r = node_unlocked(doc, id, "cannot set params of node " + q(id)); !r) return r.error();
  auto def = node_type(doc, id, catalogue);
  if (!def) return make_error("cannot set params of node " + q(id) + ": " + def.error().message);
  const std::string what = "cannot set params of node " + q(id) + " (" + (*def)->id + ")";
  if (!patch.is_object()) return make_error(what + ": the change must be a JSON object");
  json merged = doc.nodes[*find_node(doc, id)].params;
  merged.merge_patch(patch);
  Result<json> full = checked_params(**def, merged, what);
  if (!full) return full.error();
  return checked<SetParams>(doc, id, std::move(*full));
}

EditResult make_rename_node(const Document& doc, const std::string& id, const std::string& new_id) {
  if (auto r = node_unlocked(doc, id, "cannot rename node " + q(id)); !r) return r.error();
  if (auto r = feeds_unlocked(doc, id, "cannot rename node " + q(id)); !r) return r.error();
  if (!is_valid_node_id(new_id))
    return make_error("cannot rename node " + q(id) + " to " + q(new_id) +
                      ": a node id must start with a letter or '_' and hold only letters, " +
                      "digits, '_', '.' and '-'");
  return checked<RenameNode>(doc, id, new_id);
}

EditResult make_move_node(const Document& doc, const std::string& id, LayoutPos pos) {
  return checked<MoveNode>(doc, id, pos);
}

EditResult make_set_node_device(const Document& doc, const std::string& id,
                                const std::string& device) {
  if (auto r = node_unlocked(doc, id, "cannot set the device of node " + q(id)); !r)
    return r.error();
  return checked<SetNodeDevice>(doc, id, device);
}

std::vector<CommentFrame> comment_frames(const Document& doc) {
  std::vector<CommentFrame> out;
  if (!doc.layout.is_object() || !doc.layout.contains(kFramesKey) ||
      !doc.layout.at(kFramesKey).is_array())
    return out;
  for (const json& f : doc.layout.at(kFramesKey)) {
    if (!f.is_object()) continue;
    auto num = [&](const char* k) {
      return f.contains(k) && f.at(k).is_number() ? f.at(k).get<double>() : -1.0;
    };
    CommentFrame c{f.value("title", std::string()), num("x"), num("y"), num("w"), num("h")};
    if (!f.contains("x") || !f.contains("y") || c.w <= 0 || c.h <= 0) continue;
    out.push_back(std::move(c));
  }
  return out;
}

EditResult make_set_frames(const Document& doc, const std::vector<CommentFrame>& frames,
                           std::string text) {
  json list = json::array();
  for (const CommentFrame& f : frames) {
    if (!(f.w > 0 && f.h > 0) || !std::isfinite(f.x) || !std::isfinite(f.y) ||
        !std::isfinite(f.w) || !std::isfinite(f.h))
      return make_error("cannot " + text +
                        ": a frame needs a finite position and a size above zero");
    if (f.title.size() > 500)
      return make_error("cannot " + text + ": a frame's title is over 500 characters");
    list.push_back({{"title", f.title},
                    {"x", coordinate(f.x)},
                    {"y", coordinate(f.y)},
                    {"w", coordinate(f.w)},
                    {"h", coordinate(f.h)}});
  }
  return checked<SetFrames>(doc, std::move(list), std::move(text));
}

EditResult make_set_training(const Document& doc, const json& patch) {
  const std::string what = "cannot set training";
  Result<json> section = patched(training_json(doc.training), patch, what);
  if (!section) return section.error();
  TrainingSpec spec;
  if (Result<void> ok = parse_training(FieldReader(what), json{{"training", *section}}, spec); !ok)
    return ok.error();
  return checked<SetSection<TrainingSpec>>(doc, &Document::training, std::move(spec),
                                           "Set training");
}

EditResult make_set_dataset(const Document& doc, const json& patch) {
  const std::string what = "cannot set dataset";
  Result<json> section = patched(data::dataset_spec_to_json(doc.dataset), patch, what);
  if (!section) return section.error();
  Result<DatasetSpec> spec = data::parse_dataset_spec(*section, what + ": /dataset");
  if (!spec) return spec.error();
  return checked<SetSection<DatasetSpec>>(doc, &Document::dataset, std::move(*spec), "Set dataset");
}

// [SECTION] UndoStack

Result<void> UndoStack::push(std::unique_ptr<EditCommand> command, Document& doc) {
  MLS_CHECK(command != nullptr, "UndoStack::push: null command");
  if (Result<void> ok = command->apply(doc); !ok) return ok;
  commands_.resize(index_);
  if (clean_ && *clean_ > index_) clean_.reset();  // the saved state is gone with the tail
  const auto now = clock_ ? clock_() : std::chrono::steady_clock::now();
  const std::string key = command->merge_key();
  // kMergeIdle: the same edit going on, onto the last applied step that is not the saved one.
  const bool merge = merge_open_ && !key.empty() && index_ > 0 && clean_ != index_ &&
                     now - last_push_ < kMergeIdle && commands_[index_ - 1]->merge_key() == key &&
                     commands_[index_ - 1]->merge_with(*command);
  merge_open_ = true;
  last_push_ = now;
  if (!merge) {
    commands_.push_back(std::move(command));
    ++index_;
  } else if (commands_[index_ - 1]->changes_nothing(doc)) {
    commands_.pop_back();  // typed and erased again: the step is gone
    --index_;
    merge_open_ = false;
  }
  changed();
  return {};
}

Result<void> UndoStack::push(EditResult command, Document& doc) {
  if (!command) return command.error();
  return push(std::move(*command), doc);
}

bool UndoStack::undo(Document& doc) {
  if (!can_undo()) return false;
  commands_[--index_]->revert(doc);
  merge_open_ = false;
  changed();
  return true;
}

bool UndoStack::redo(Document& doc) {
  if (!can_redo() || !commands_[index_]->apply(doc)) return false;
  ++index_;
  merge_open_ = false;
  changed();
  return true;
}

std::string UndoStack::undo_text() const {
  return can_undo() ? commands_[index_ - 1]->text() : std::string();
}

std::string UndoStack::redo_text() const {
  return can_redo() ? commands_[index_]->text() : std::string();
}

const EditCommand& UndoStack::command(size_t i) const {
  MLS_CHECK(i < commands_.size(), "UndoStack::command: index out of range");
  return *commands_[i];
}

void UndoStack::clear() {
  commands_.clear();
  index_ = 0;
  clean_ = 0;
  merge_open_ = false;
}

void UndoStack::set_clean() {
  clean_ = index_;
  merge_open_ = false;
}

void UndoStack::changed() {
  ++revision_;
  if (on_change_) on_change_();
}

std::vector<std::string> OwnedHistory::history() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < stack_.size(); ++i) out.push_back(stack_.command(i).text());
  return out;
}

std::map<std::string, LayoutPos> layered_layout(const Document& doc) {
  std::map<std::string, int> depth;
  for (size_t i : topological_order(doc)) {
    int d = 0;
    for (const LinkDoc& l : doc.links)
      if (l.to_node == doc.nodes[i].id && depth.count(l.from_node))
        d = std::max(d, depth[l.from_node] + 1);
    depth[doc.nodes[i].id] = d;
  }
  std::map<int, int> rows;
  std::map<std::string, LayoutPos> out;
  for (const NodeDoc& n : doc.nodes) {
    const int col = depth.count(n.id) ? depth[n.id] : 0;
    const int row = rows[col]++;
    out[n.id] = LayoutPos{40.0 + 220.0 * col, 60.0 + 160.0 * row};
  }
  return out;
}

}  // namespace mls::nodes
