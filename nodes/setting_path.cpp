#include "nodes/setting_path.h"

#include <algorithm>
#include <array>

#include "nodes/edit.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;

enum class Section { Training, Dataset, Node };

struct Target {
  Section section = Section::Training;
  std::string node;                // Section::Node
  std::vector<std::string> path;  // inside the section (the node's params for Node)
};

constexpr std::array kOptimizerFields = {"lr",   "momentum", "weight_decay", "nesterov", "beta1",
                                         "beta2", "eps",     "alpha",        "lr_decay"};
constexpr std::array kTrainingFields = {"epochs",          "batch_size",      "seed",
                                        "device",          "mode",            "precision",
                                        "clip_grad_norm",  "clip_grad_value", "activation_checkpointing"};
constexpr std::array kTrainingBlocks = {"optimizer", "schedule", "early_stopping"};

template <typename Names>
bool among(const Names& names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t dot = s.find('.', start);
    out.emplace_back(s.substr(start, dot == std::string_view::npos ? s.npos : dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

Result<Target> resolve(const Document& doc, const std::string& key) {
  const std::string where = "--set " + key + ": ";
  if (key.empty()) return make_error("--set: empty setting name");
  std::vector<std::string> parts = split_dots(key);
  for (const std::string& p : parts)
    if (p.empty()) return make_error(where + "empty part in the name");
  if (parts.size() == 1) {
    if (among(kOptimizerFields, key)) return Target{Section::Training, "", {"optimizer", key}};
    if (key == "optimizer") return Target{Section::Training, "", {"optimizer", "type"}};
    if (among(kTrainingFields, key)) return Target{Section::Training, "", {key}};
    return make_error(where + "not a training setting (lr, batch_size, epochs, momentum, ...); "
                              "name a node's parameter as NODE.PARAM, or a path as training.X or "
                              "dataset.X");
  }
  // A node id may hold dots itself: the longest prefix that names a node wins.
  for (size_t n = parts.size() - 1; n >= 1; --n) {
    std::string id = parts[0];
    for (size_t i = 1; i < n; ++i) id += "." + parts[i];
    if (std::any_of(doc.nodes.begin(), doc.nodes.end(),
                    [&](const NodeDoc& d) { return d.id == id; }))
      return Target{Section::Node, id, {parts.begin() + static_cast<std::ptrdiff_t>(n), parts.end()}};
  }
  if (parts[0] == "training") return Target{Section::Training, "", {parts.begin() + 1, parts.end()}};
  if (parts[0] == "dataset") return Target{Section::Dataset, "", {parts.begin() + 1, parts.end()}};
  if (among(kTrainingBlocks, parts[0])) return Target{Section::Training, "", parts};
  std::string ids;
  for (const NodeDoc& d : doc.nodes) ids += (ids.empty() ? "" : ", ") + d.id;
  return make_error(where + "no node '" + parts[0] + "' in the project (its nodes: " + ids +
                    "), and not training.X, dataset.X, optimizer.X, schedule.X or early_stopping.X");
}

// {"a": {"b": value}} for the path a.b.
json nest(const std::vector<std::string>& path, const json& value) {
  json out = value;
  for (auto it = path.rbegin(); it != path.rend(); ++it) out = json{{*it, out}};
  return out;
}

Result<json> section_json(const Document& doc, const Target& t) {
  switch (t.section) {
    case Section::Training: return json(training_json(doc.training));
    case Section::Dataset: return json(data::dataset_spec_to_json(doc.dataset));
    case Section::Node:
      for (const NodeDoc& d : doc.nodes)
        if (d.id == t.node) return d.params;
  }
  return make_error("no node '" + t.node + "'");
}

}  // namespace

Result<std::pair<std::string, json>> parse_assignment(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return make_error("--set '" + std::string(text) + "': expected KEY=VALUE (lr=0.01, fc1.out_features=64)");
  std::string key(text.substr(0, eq)), value(text.substr(eq + 1));
  json v = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) v = value;  // a word: adam, cosine, cpu
  return std::pair{std::move(key), std::move(v)};
}

Result<void> apply_setting(Document& doc, const std::string& key, const json& value) {
  Result<Target> t = resolve(doc, key);
  if (!t) return t.error();
  json patch = nest(t->path, value);
  // Another optimizer type takes other fields: the old type's own ones go (lr and weight
  // decay stay), or the new type would refuse them.
  if (t->section == Section::Training && t->path == std::vector<std::string>{"optimizer", "type"}) {
    json cur = training_json(doc.training)["optimizer"];
    json opt = json::object();
    for (auto& [k, v] : cur.items())
      if (k != "lr" && k != "weight_decay") opt[k] = nullptr;
    opt["type"] = value;
    patch = json{{"optimizer", opt}};
  }
  EditResult cmd = t->section == Section::Training  ? make_set_training(doc, patch)
                   : t->section == Section::Dataset ? make_set_dataset(doc, patch)
                                                    : make_set_params(doc, t->node, patch);
  if (!cmd) return make_error("--set " + key + "=" + setting_text(value) + ": " + cmd.error().message);
  if (auto r = (*cmd)->apply(doc); !r)
    return make_error("--set " + key + "=" + setting_text(value) + ": " + r.error().message);
  return {};
}

Result<void> apply_setting(Document& doc, std::string_view assignment) {
  auto kv = parse_assignment(assignment);
  if (!kv) return kv.error();
  return apply_setting(doc, kv->first, kv->second);
}

Result<json> read_setting(const Document& doc, const std::string& key) {
  Result<Target> t = resolve(doc, key);
  if (!t) return t.error();
  Result<json> cur = section_json(doc, *t);
  if (!cur) return cur.error();
  const json* at = &*cur;
  for (const std::string& p : t->path) {
    if (!at->is_object() || !at->contains(p)) return json();
    at = &(*at)[p];
  }
  return *at;
}

std::string setting_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace mls::nodes
