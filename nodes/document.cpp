// Reading .mls files: JSON -> Document, with every rule of the format checked and every
// message naming the file and the JSON path at fault. Saving is in document_save.cpp and
// the graph rules in document_graph.cpp.
//
// [SECTION] Helpers: messages, JSON paths, typed fields
// [SECTION] Parser: one method per section of the file
// [SECTION] Entry points
#include "nodes/document.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace mls::nodes {

namespace {

using nlohmann::json;

// [SECTION] Helpers: messages, JSON paths, typed fields

// JSON pointer escaping (RFC 6901), so that a key holding '/' still names one place.
std::string ptr(const std::string& base, std::string_view key) {
  std::string out = base + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}
std::string ptr(const std::string& base, size_t index) {
  return base + "/" + std::to_string(index);
}

std::string quoted_list(const std::vector<std::string>& items, const char* last_sep = " or ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? last_sep : ", ";
    out += "'" + items[i] + "'";
  }
  return out;
}

std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A numeric range for a field, with how to say it in a message ("in [0, 1)", "> 0").
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;

  bool contains(double v) const {
    if (lo && (lo_open ? v <= *lo : v < *lo)) return false;
    if (hi && (hi_open ? v >= *hi : v > *hi)) return false;
    return true;
  }
  std::string describe() const {
    if (lo && hi)
      return " in " + std::string(lo_open ? "(" : "[") + format_number(*lo) + ", " +
             format_number(*hi) + (hi_open ? ")" : "]");
    if (lo) return std::string(lo_open ? " > " : " >= ") + format_number(*lo);
    if (hi) return std::string(hi_open ? " < " : " <= ") + format_number(*hi);
    return "";
  }
};

//                      lo    hi            lo_open hi_open
const Range kPositive{0.0, std::nullopt, true, false};      // > 0
const Range kNonNegative{0.0, std::nullopt, false, false};  // >= 0
const Range kAtLeastOne{1.0, std::nullopt, false, false};   // >= 1
const Range kUnitOpen{0.0, 1.0, false, true};               // [0, 1)

bool is_valid_node_id(std::string_view id) {
  auto head = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  auto tail = [&](char c) {
    return head(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-';
  };
  if (id.empty() || !head(id[0])) return false;
  for (char c : id.substr(1))
    if (!tail(c)) return false;
  return true;
}

// "P.mls:3:14: invalid JSON: ..." from nlohmann's byte offset (the count of bytes read,
// so the offending byte is at byte - 1).
Error json_syntax_error(std::string_view text, const std::string& source,
                        const json::parse_error& e) {
  size_t at = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  size_t col = at - line_start + 1;
  // nlohmann's own text starts "[json.exception.parse_error.101] parse error at line 1,
  // column 2: "; keep only what follows, since the position is ours.
  std::string what = e.what();
  if (size_t c = what.find("column "); c != std::string::npos)
    if (size_t colon = what.find(": ", c); colon != std::string::npos)
      what = what.substr(colon + 2);
  return make_error(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                    ": invalid JSON: " + what);
}

// [SECTION] Parser: one method per section of the file

class Parser {
 public:
  Parser(const std::string& source, const NodeCatalogue& catalogue)
      : source_(source), catalogue_(catalogue) {}

  Result<Document> parse(const json& root, GraphCheck check) {
    if (!root.is_object())
      return fail("", "expected a JSON object at the top level (is this an mlstudio project?)");
    if (auto r = format_version(root); !r) return r.error();
    for (const auto& [key, value] : root.items()) {
      static const std::vector<std::string> known = {"format_version", "name",    "description",
                                                     "dataset",        "model",   "training",
                                                     "layout",         "notebook"};
      if (std::find(known.begin(), known.end(), key) == known.end())
        doc_.warnings.push_back(source_ + ": " + ptr("", key) + ": unknown key ignored");
    }
    if (auto r = string_field(root, "", "name", doc_.name); !r) return r.error();
    if (auto r = string_field(root, "", "description", doc_.description); !r) return r.error();
    if (auto r = dataset(root); !r) return r.error();
    if (auto r = model(root); !r) return r.error();
    if (auto r = training(root); !r) return r.error();
    if (auto r = extras(root); !r) return r.error();

    std::vector<std::string> problems = graph_problems(doc_, source_, catalogue_);
    if (!problems.empty()) {
      if (check == GraphCheck::Strict) return make_error(problems.front());
      for (std::string& p : problems) doc_.warnings.push_back(std::move(p));
    }
    return std::move(doc_);
  }

 private:
  Error fail(const std::string& path, const std::string& message) const {
    return make_error(source_ + ": " + (path.empty() ? "" : path + ": ") + message);
  }

  // The object at `key`, or null when absent; an error when present but not an object.
  Result<const json*> section(const json& parent, const std::string& parent_path,
                              std::string_view key) const {
    auto it = parent.find(key);
    if (it == parent.end()) return static_cast<const json*>(nullptr);
    if (!it->is_object()) return fail(ptr(parent_path, key), "must be an object");
    return &*it;
  }

  Result<void> known_keys(const json& obj, const std::string& path,
                          const std::vector<std::string>& allowed,
                          const std::string& context = "") const {
    for (const auto& [key, value] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        return fail(ptr(path, key), "unknown key '" + key + "'" + context + " (expected " +
                                        quoted_list(allowed) + ")");
    return {};
  }

  Result<void> string_field(const json& obj, const std::string& path, std::string_view key,
                            std::string& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_string()) return fail(ptr(path, key), "must be a string");
    out = it->get<std::string>();
    return {};
  }

  Result<void> bool_field(const json& obj, const std::string& path, std::string_view key,
                          bool& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_boolean()) return fail(ptr(path, key), "must be true or false");
    out = it->get<bool>();
    return {};
  }

  Result<void> number_field(const json& obj, const std::string& path, std::string_view key,
                            const Range& range, double& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_number() || !range.contains(it->get<double>()))
      return fail(ptr(path, key), "must be a number" + range.describe());
    out = it->get<double>();
    return {};
  }

  template <typename Int>
  Result<void> int_field(const json& obj, const std::string& path, std::string_view key,
                         const Range& range, Int& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    // Positive literals parse as unsigned; one past Int's range would wrap on get<Int>().
    bool fits = !it->is_number_unsigned() ||
                it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!it->is_number_integer() || !fits || !range.contains(it->get<double>()))
      return fail(ptr(path, key), "must be an integer" + range.describe());
    out = it->get<Int>();
    return {};
  }

  // A string field that must be one of `choices`; `what` names it in the message
  // ("unknown device 'tpu' (expected 'cpu', 'cuda' or 'vulkan')").
  Result<void> choice_field(const json& obj, const std::string& path, std::string_view key,
                            const char* what, const std::vector<std::string>& choices,
                            std::string& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    std::string value = it->is_string() ? it->get<std::string>() : it->dump();
    if (!it->is_string() || std::find(choices.begin(), choices.end(), value) == choices.end())
      return fail(ptr(path, key), std::string("unknown ") + what + " '" + value + "' (expected " +
                                      quoted_list(choices) + ")");
    out = value;
    return {};
  }

  Result<void> format_version(const json& root) {
    auto it = root.find("format_version");
    if (it == root.end()) return fail("", "missing format_version (is this an mlstudio project?)");
    if (!it->is_number_integer()) return fail("/format_version", "must be an integer");
    int64_t v = it->get<int64_t>();
    if (v > kFormatVersion)
      return fail("", "format_version " + std::to_string(v) +
                          " is newer than this mlstudio supports (" +
                          std::to_string(kFormatVersion) + ")");
    if (v < 1) return fail("/format_version", "must be an integer >= 1");
    doc_.format_version = static_cast<int>(v);
    return {};
  }

  Result<void> dataset(const json& root) {
    auto sec = section(root, "", "dataset");
    if (!sec) return sec.error();
    if (!*sec) return {};
    const json& d = **sec;
    const std::string path = "/dataset";
    DatasetSpec& out = doc_.dataset;
    if (auto r = known_keys(d, path, {"source", "path", "limit", "test_limit"}); !r) return r;
    if (auto r = choice_field(d, path, "source", "dataset source", {"fashion-mnist", "mnist"},
                              out.source);
        !r)
      return r;
    if (!d.contains("path")) {
      // Only Fashion-MNIST has a packaged home; for anything else a default would be a guess.
      if (out.source != "fashion-mnist")
        return fail(ptr(path, "path"), "required for dataset source '" + out.source + "'");
      out.path = kDefaultFashionMnistPath;
    }
    if (auto r = string_field(d, path, "path", out.path); !r) return r;
    if (auto r = int_field(d, path, "limit", kNonNegative, out.limit); !r) return r;
    return int_field(d, path, "test_limit", kNonNegative, out.test_limit);
  }

  Result<void> model(const json& root) {
    auto sec = section(root, "", "model");
    if (!sec) return sec.error();
    if (!*sec) return fail("", "missing 'model' (the node graph)");
    const json& m = **sec;
    if (auto r = known_keys(m, "/model", {"nodes", "links"}); !r) return r;
    for (const char* key : {"nodes", "links"})
      if (m.contains(key) && !m.at(key).is_array())
        return fail(ptr("/model", key), "must be an array");
    if (m.contains("nodes"))
      for (size_t i = 0; i < m.at("nodes").size(); ++i)
        if (auto r = node(m.at("nodes")[i], ptr("/model/nodes", i)); !r) return r;
    if (m.contains("links"))
      for (size_t i = 0; i < m.at("links").size(); ++i)
        if (auto r = link(m.at("links")[i], ptr("/model/links", i)); !r) return r;
    return {};
  }

  Result<void> node(const json& n, const std::string& path) {
    if (!n.is_object()) return fail(path, "must be an object");
    if (auto r = known_keys(n, path, {"id", "type", "version", "params"}); !r) return r;
    NodeDoc out;
    if (!n.contains("id")) return fail(path, "missing 'id'");
    if (auto r = string_field(n, path, "id", out.id); !r) return r;
    if (!is_valid_node_id(out.id))
      return fail(ptr(path, "id"), "node id '" + out.id +
                                       "' must start with a letter or '_' and hold only "
                                       "letters, digits, '_', '.' and '-'");
    for (size_t j = 0; j < doc_.nodes.size(); ++j)
      if (doc_.nodes[j].id == out.id)
        return fail(ptr(path, "id"),
                    "duplicate node id '" + out.id + "' (first at " + ptr("/model/nodes", j) + ")");

    if (!n.contains("type")) return fail(path, "missing 'type'");
    if (auto r = string_field(n, path, "type", out.type); !r) return r;
    const NodeTypeDef* def = catalogue_.find(out.type);
    if (!def) {
      if (std::optional<std::string> renamed = catalogue_.renamed_to(out.type)) {
        doc_.warnings.push_back(source_ + ": " + ptr(path, "type") + ": node type '" + out.type +
                                "' is now '" + *renamed + "'; saving writes the new name");
        out.type = *renamed;
        def = catalogue_.find(out.type);
      }
    }
    if (!def) return fail(ptr(path, "type"), "unknown node type '" + out.type + "'");

    out.version = def->version;
    if (auto r = int_field(n, path, "version", kAtLeastOne, out.version); !r) return r;
    if (out.version != def->version)
      // No type has had a second version yet; when one does, its migration goes here.
      return fail(ptr(path, "version"),
                  out.type + " version " + std::to_string(out.version) +
                      (out.version > def->version ? " is newer than" : " is not one") +
                      " this mlstudio supports (" + std::to_string(def->version) + ")");

    std::string bad_param;
    Result<json> params =
        complete_params(*def, n.contains("params") ? n.at("params") : json(), &bad_param);
    if (!params) {
      std::string where = ptr(path, "params");
      if (!bad_param.empty()) where = ptr(where, bad_param);
      return make_error(source_ + ": node '" + out.id + "' (" + where +
                        "): " + params.error().message);
    }
    out.params = std::move(*params);
    doc_.nodes.push_back(std::move(out));
    return {};
  }

  // One end of a link: "node:port", checked against the nodes read so far.
  Result<std::pair<std::string, std::string>> endpoint(const json& l, const std::string& path,
                                                       const char* key, bool is_output) const {
    const std::string where = ptr(path, key);
    auto it = l.find(key);
    if (it == l.end()) return fail(path, std::string("missing '") + key + "'");
    if (!it->is_string()) return fail(where, "must be a string \"node:port\"");
    const std::string ref = it->get<std::string>();
    size_t colon = ref.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == ref.size())
      return fail(where, "expected \"node:port\", got \"" + ref + "\"");
    std::string node_id = ref.substr(0, colon), port = ref.substr(colon + 1);

    std::optional<size_t> idx = find_node(doc_, node_id);
    if (!idx) return fail(where, "no node '" + node_id + "'");
    const NodeDoc& node = doc_.nodes[*idx];
    const NodeTypeDef* def = catalogue_.find(node.type);
    const std::vector<PortDef>& ports = is_output ? def->outputs : def->inputs;
    if ((is_output ? def->find_output(port) : def->find_input(port)) == nullptr) {
      std::vector<std::string> names;
      for (const PortDef& p : ports) names.push_back(p.name);
      std::string has = names.empty() ? std::string(is_output ? "no outputs" : "no inputs")
                                      : quoted_list(names, " and ");
      return fail(where, "node '" + node_id + "' (" + node.type + ") has no " +
                             (is_output ? "output" : "input") + " '" + port + "' (it has " + has +
                             ")");
    }
    return std::pair{node_id, port};
  }

  Result<void> link(const json& l, const std::string& path) {
    if (!l.is_object()) return fail(path, "must be an object");
    if (auto r = known_keys(l, path, {"from", "to"}); !r) return r;
    auto from = endpoint(l, path, "from", true);
    if (!from) return from.error();
    auto to = endpoint(l, path, "to", false);
    if (!to) return to.error();
    LinkDoc out{from->first, from->second, to->first, to->second};

    auto kind = [&](const std::string& node_id, const std::string& port, bool is_output) {
      const NodeTypeDef* def = catalogue_.find(doc_.nodes[*find_node(doc_, node_id)].type);
      return (is_output ? def->find_output(port) : def->find_input(port))->kind;
    };
    PortKind from_kind = kind(out.from_node, out.from_port, true);
    PortKind to_kind = kind(out.to_node, out.to_port, false);
    auto kind_name = [](PortKind k) { return k == PortKind::Labels ? "labels" : "a tensor"; };
    if (from_kind != to_kind)
      return fail(path, "'" + out.from_node + ":" + out.from_port + "' gives " +
                            kind_name(from_kind) + " but '" + out.to_node + ":" + out.to_port +
                            "' takes " + kind_name(to_kind));

    for (size_t j = 0; j < doc_.links.size(); ++j)
      if (doc_.links[j].to_node == out.to_node && doc_.links[j].to_port == out.to_port)
        return fail(path, "input '" + out.to_node + ":" + out.to_port + "' is already linked (by " +
                              ptr("/model/links", j) + ")");
    doc_.links.push_back(std::move(out));
    return {};
  }

  Result<void> training(const json& root) {
    auto sec = section(root, "", "training");
    if (!sec) return sec.error();
    if (!*sec) return {};
    const json& t = **sec;
    const std::string path = "/training";
    TrainingSpec& out = doc_.training;
    if (auto r =
            known_keys(t, path, {"epochs", "batch_size", "seed", "device", "mode", "optimizer"});
        !r)
      return r;
    if (auto r = int_field(t, path, "epochs", kAtLeastOne, out.epochs); !r) return r;
    if (auto r = int_field(t, path, "batch_size", kAtLeastOne, out.batch_size); !r) return r;
    if (auto r = int_field(t, path, "seed", kNonNegative, out.seed); !r) return r;
    if (auto r = choice_field(t, path, "device", "device", {"cpu", "cuda", "vulkan"}, out.device);
        !r)
      return r;
    std::string mode = std::string(to_string(out.mode));
    if (auto r = choice_field(t, path, "mode", "mode", {"static", "eager"}, mode); !r) return r;
    out.mode = mode == "eager" ? ExecMode::Eager : ExecMode::Static;
    return optimizer(t, path);
  }

  Result<void> optimizer(const json& training, const std::string& training_path) {
    auto sec = section(training, training_path, "optimizer");
    if (!sec) return sec.error();
    if (!*sec) return {};
    const json& o = **sec;
    const std::string path = ptr(training_path, "optimizer");
    OptimizerSpec& out = doc_.training.optimizer;

    std::string type = "sgd";
    if (auto r = choice_field(o, path, "type", "optimizer", {"sgd", "adam"}, type); !r) return r;
    out = OptimizerSpec{};
    out.type = type == "adam" ? OptimizerType::Adam : OptimizerType::Sgd;
    if (out.type == OptimizerType::Adam) out.lr = 0.001;

    const std::string context = " for optimizer '" + type + "'";
    if (out.type == OptimizerType::Sgd) {
      if (auto r =
              known_keys(o, path, {"type", "lr", "momentum", "nesterov", "weight_decay"}, context);
          !r)
        return r;
      if (auto r = number_field(o, path, "momentum", kUnitOpen, out.momentum); !r) return r;
      if (auto r = bool_field(o, path, "nesterov", out.nesterov); !r) return r;
      if (out.nesterov && out.momentum <= 0)
        return fail(ptr(path, "nesterov"), "Nesterov momentum needs momentum > 0");
    } else {
      if (auto r =
              known_keys(o, path, {"type", "lr", "beta1", "beta2", "eps", "weight_decay"}, context);
          !r)
        return r;
      if (auto r = number_field(o, path, "beta1", kUnitOpen, out.beta1); !r) return r;
      if (auto r = number_field(o, path, "beta2", kUnitOpen, out.beta2); !r) return r;
      if (auto r = number_field(o, path, "eps", kPositive, out.eps); !r) return r;
    }
    if (auto r = number_field(o, path, "lr", kPositive, out.lr); !r) return r;
    return number_field(o, path, "weight_decay", kNonNegative, out.weight_decay);
  }

  // layout and notebook belong to the editor; they are kept as they are.
  Result<void> extras(const json& root) {
    auto layout = section(root, "", "layout");
    if (!layout) return layout.error();
    if (*layout) doc_.layout = **layout;
    auto notebook = section(root, "", "notebook");
    if (!notebook) return notebook.error();
    if (*notebook) doc_.notebook = **notebook;
    return {};
  }

  const std::string& source_;
  const NodeCatalogue& catalogue_;
  Document doc_;
};

}  // namespace

// [SECTION] Entry points

bool OptimizerSpec::operator==(const OptimizerSpec& o) const {
  if (type != o.type || lr != o.lr || weight_decay != o.weight_decay) return false;
  if (type == OptimizerType::Sgd) return momentum == o.momentum && nesterov == o.nesterov;
  return beta1 == o.beta1 && beta2 == o.beta2 && eps == o.eps;
}

bool Document::operator==(const Document& o) const {
  return format_version == o.format_version && name == o.name && description == o.description &&
         dataset == o.dataset && nodes == o.nodes && links == o.links && training == o.training &&
         layout == o.layout && notebook == o.notebook;
}

Result<Document> parse_document(std::string_view text, const std::string& source_name,
                                GraphCheck check, const NodeCatalogue& catalogue) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return json_syntax_error(text, source_name, e);
  }
  return Parser(source_name, catalogue).parse(root, check);
}

Result<Document> load_document(const std::string& path, GraphCheck check,
                               const NodeCatalogue& catalogue) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(path + ": cannot read: " + std::strerror(errno));
  return parse_document(text.str(), path, check, catalogue);
}

std::string_view to_string(OptimizerType t) {
  return t == OptimizerType::Adam ? "adam" : "sgd";
}
std::string_view to_string(ExecMode m) {
  return m == ExecMode::Eager ? "eager" : "static";
}

}  // namespace mls::nodes
