// Reading .mls files: JSON -> Document, with every rule of the format checked and every
// message naming the file and the JSON path at fault. Saving is in document_save.cpp and
// the graph rules in document_graph.cpp.
//
// [SECTION] Helpers
// [SECTION] Parser: one method per section of the file
// [SECTION] Entry points
#include "nodes/document.h"

#include "engine/core/atomic_file.h"
#include "nodes/json_fields.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <limits>
#include <sstream>

namespace mls::nodes {

namespace {

using nlohmann::json;

// [SECTION] Helpers

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

class Parser : FieldReader {
 public:
  Parser(const std::string& source, const NodeCatalogue& catalogue)
      : FieldReader(source), catalogue_(catalogue) {}

  Result<Document> parse(const json& root, GraphCheck check) {
    salvage_ = check == GraphCheck::Salvage;
    if (!root.is_object())
      return fail("", "expected a JSON object at the top level (is this an mlstudio project?)");
    if (auto r = format_version(root); !r) return r.error();
    for (const auto& [key, value] : root.items()) {
      static const std::vector<std::string> known = {"format_version", "name",    "description",
                                                     "dataset",        "model",   "training",
                                                     "layout",         "notebook",
                                                     "lab"};
      if (std::find(known.begin(), known.end(), key) == known.end())
        doc_.warnings.push_back(source_ + ": " + ptr("", key) + ": unknown key ignored");
    }
    // Salvage: a section that fails keeps its defaults; the message becomes a warning.
    if (auto r = soft(string_field(root, "", "name", doc_.name)); !r) return r.error();
    if (auto r = soft(string_field(root, "", "description", doc_.description)); !r)
      return r.error();
    if (auto r = soft(dataset(root)); !r) return r.error();
    if (auto r = model(root); !r) return r.error();
    if (salvage_) {
      TrainingSpec t;
      if (auto r = parse_training(*this, root, t); !r)
        doc_.warnings.push_back(r.error().message + " (defaults kept)");
      else
        doc_.training = std::move(t);
    } else if (auto r = parse_training(*this, root, doc_.training); !r) {
      return r.error();
    }
    if (auto r = soft(extras(root)); !r) return r.error();

    std::vector<std::string> problems = graph_problems(doc_, source_, catalogue_);
    if (!problems.empty()) {
      if (check == GraphCheck::Strict) return make_error(problems.front());
      // Salvaged or not, a half-built graph opens; its problems are listed.
      for (std::string& p : problems) doc_.warnings.push_back(std::move(p));
    }
    return std::move(doc_);
  }

 private:
  Result<void> format_version(const json& root) {
    auto it = root.find("format_version");
    if (it == root.end()) return fail("", "missing format_version (is this an mlstudio project?)");
    if (!it->is_number_integer()) return fail("/format_version", "must be an integer");
    int64_t v = it->get<int64_t>();
    if (v > kFormatVersion) {
      auto e = fail("", "format_version " + std::to_string(v) +
                            " is newer than this mlstudio supports (" +
                            std::to_string(kFormatVersion) + ")");
      if (!salvage_) return e;
      doc_.warnings.push_back(e.message + ": opened what this version understands");
      doc_.format_version = kFormatVersion;
      return {};
    }
    if (v < 1) return fail("/format_version", "must be an integer >= 1");
    doc_.format_version = static_cast<int>(v);
    return {};
  }

  // The section's rules live with the data sources (datasets/dataset_spec.h).
  Result<void> dataset(const json& root) {
    auto sec = section(root, "", "dataset");
    if (!sec) return sec.error();
    if (!*sec) return {};
    auto spec = data::parse_dataset_spec(**sec, source_ + ": /dataset");
    if (!spec) return spec.error();
    doc_.dataset = std::move(*spec);
    return {};
  }

  Result<void> model(const json& root) {
    auto sec = section(root, "", "model");
    if (!sec) return sec.error();
    if (!*sec) return fail("", "missing 'model' (the node graph)");
    const json& m = **sec;
    if (auto r = known_keys(m, "/model", {"nodes", "links", "weights"}); !r) return r;
    if (auto r = string_field(m, "/model", "weights", doc_.weights); !r) return r;
    for (const char* key : {"nodes", "links"})
      if (m.contains(key) && !m.at(key).is_array())
        return fail(ptr("/model", key), "must be an array");
    // Salvage: a node or link that cannot be read is left out (links to a left-out node too).
    if (m.contains("nodes"))
      for (size_t i = 0; i < m.at("nodes").size(); ++i)
        if (auto r = soft(node(m.at("nodes")[i], ptr("/model/nodes", i)), " (node left out)"); !r)
          return r;
    if (m.contains("links"))
      for (size_t i = 0; i < m.at("links").size(); ++i)
        if (auto r = soft(link(m.at("links")[i], ptr("/model/links", i)), " (link left out)"); !r)
          return r;
    return {};
  }

  // Strict and Draft: the error stands. Salvage: it is kept as a warning and reading goes on.
  Result<void> soft(Result<void> r, const std::string& consequence = " (defaults kept)") {
    if (r || !salvage_) return r;
    doc_.warnings.push_back(r.error().message + consequence);
    return {};
  }

  Result<void> node(const json& n, const std::string& path) {
    if (!n.is_object()) return fail(path, "must be an object");
    if (auto r = known_keys(n, path, {"id", "type", "version", "params", "device", "locked", "solution"}); !r)
      return r;
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
    json given = n.contains("params") ? n.at("params") : json();
    Result<json> params = complete_params(*def, given, &bad_param);
    // Salvage: a bad parameter takes its default (a required one fails the node).
    while (salvage_ && !params && !bad_param.empty() && given.is_object() &&
           given.contains(bad_param)) {
      doc_.warnings.push_back(source_ + ": node '" + out.id + "' (" +
                              ptr(ptr(path, "params"), bad_param) + "): " + params.error().message +
                              " (default used)");
      given.erase(bad_param);
      bad_param.clear();
      params = complete_params(*def, given, &bad_param);
    }
    if (!params) {
      std::string where = ptr(path, "params");
      if (!bad_param.empty()) where = ptr(where, bad_param);
      return make_error(source_ + ": node '" + out.id + "' (" + where +
                        "): " + params.error().message);
    }
    out.params = std::move(*params);
    if (n.contains("device")) {
      if (auto r = string_field(n, path, "device", out.device); !r) return r;
      // Only the host is a per-node choice: a second GPU in one plan is not supported.
      if (!out.device.empty() && out.device != "cpu")
        if (auto r = soft(fail(ptr(path, "device"), "a node's device is \"cpu\" (run it on the host while the "
                                                    "project trains on a GPU) or absent, got '" + out.device + "'"),
                          " (the project's device used)");
            !r)
          return r;
      if (out.device != "cpu") out.device.clear();
    }
    for (auto [key, flag] : {std::pair{"locked", &out.locked}, std::pair{"solution", &out.solution}})
      if (auto f = n.find(key); f != n.end()) {
        if (!f->is_boolean()) return fail(ptr(path, key), "must be true or false");
        *flag = f->get<bool>();
      }
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

  // The layout belongs to the editor; it is kept as it is. The notebook is read by
  // parse_notebook (a bad cell is left out with a warning when salvaging).
  Result<void> extras(const json& root) {
    auto layout = section(root, "", "layout");
    if (!layout) return layout.error();
    if (*layout) doc_.layout = **layout;
    auto notebook = section(root, "", "notebook");
    if (!notebook) return notebook.error();
    if (*notebook) {
      auto nb = salvage_ ? parse_notebook(**notebook, source_, doc_.warnings)
                         : parse_notebook(**notebook, source_);
      if (!nb && salvage_) {
        doc_.warnings.push_back(nb.error().message + " (notebook left out)");
      } else if (!nb) {
        return nb.error();
      } else {
        doc_.notebook = std::move(*nb);
      }
    }
    auto lab = section(root, "", "lab");
    if (!lab) return lab.error();
    if (*lab) {
      auto l = parse_lab(**lab, source_);
      if (!l && salvage_)
        doc_.warnings.push_back(l.error().message + " (lab section left out)");
      else if (!l)
        return l.error();
      else
        doc_.lab = std::move(*l);
    }
    return {};
  }

  const NodeCatalogue& catalogue_;
  Document doc_;
  bool salvage_ = false;
};

}  // namespace

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

// A project nests a handful of levels; a file nested thousands deep is broken or hostile,
// and reading it (building the JSON value, copying it, freeing it) would recurse that deep.
constexpr int kMaxJsonDepth = 128;

// Counts bracket depth outside strings before anything is parsed.
std::optional<Error> json_too_deep(std::string_view text, const std::string& source) {
  int depth = 0;
  bool in_string = false;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return make_error(source + ":" + std::to_string(line) + ": JSON nested deeper than " +
                          std::to_string(kMaxJsonDepth) + " levels (a project needs a few)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

// [SECTION] Entry points

bool Document::operator==(const Document& o) const {
  return format_version == o.format_version && name == o.name && description == o.description &&
         dataset == o.dataset && nodes == o.nodes && links == o.links && training == o.training &&
         layout == o.layout && notebook == o.notebook && weights == o.weights && lab == o.lab;
}

Result<Document> parse_document(std::string_view text, const std::string& source_name,
                                GraphCheck check, const NodeCatalogue& catalogue) {
  if (auto deep = json_too_deep(text, source_name)) return *deep;
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
  // A project is text of a few kilobytes; the limit only stops /dev/zero-like inputs. The
  // shared reader refuses a FIFO or device by name instead of blocking on it.
  constexpr uint64_t kMaxProjectBytes = uint64_t{256} << 20;
  auto bytes = read_whole_file(path, kMaxProjectBytes);
  if (!bytes) return bytes.error();
  return parse_document(std::string(bytes->begin(), bytes->end()), path, check, catalogue);
}

}  // namespace mls::nodes
