// Writing .mls files: Document -> JSON in the order of the spec in document.h (so files
// diff well), and an atomic save (temp file + fsync + rename) so that a failed or
// interrupted save never costs the user the file they had.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

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
      if (node.params.contains(p.name) && (p.saved_when_default || node.params.at(p.name) != p.default_value))
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

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

std::string serialize_document(const Document& doc, const NodeCatalogue& catalogue) {
  ordered root = ordered::object();
  root["format_version"] = doc.format_version;
  root["name"] = doc.name;
  root["description"] = doc.description;

  root["dataset"] = data::dataset_spec_to_json(doc.dataset);

  ordered nodes = ordered::array();
  for (const NodeDoc& n : doc.nodes)
    nodes.push_back({{"id", n.id},
                     {"type", n.type},
                     {"version", n.version},
                     {"params", params_json(n, catalogue)}});
  ordered links = ordered::array();
  for (const LinkDoc& l : doc.links)
    links.push_back(
        {{"from", l.from_node + ":" + l.from_port}, {"to", l.to_node + ":" + l.to_port}});
  root["model"] = {{"nodes", std::move(nodes)}, {"links", std::move(links)}};

  root["training"] = training_json(doc.training);
  root["layout"] = layout_json(doc);
  if (!doc.notebook.is_null()) root["notebook"] = ordered(doc.notebook);
  // `replace` rather than throwing on a string that is not UTF-8: saving must not abort.
  return root.dump(2, ' ', false, ordered::error_handler_t::replace) + "\n";
}

Result<void> save_document(const Document& doc, const std::string& path,
                           const NodeCatalogue& catalogue) {
  namespace fs = std::filesystem;
  const std::string text = serialize_document(doc, catalogue);
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  auto fail = [&](const std::string& why) {
    return make_error("cannot save " + path + ": " + why);
  };

  // A unique hidden name next to the target: rename() is only atomic within a filesystem.
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
    tmp = (dir / ("." + target.filename().string() + ".tmp-" + suffix)).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    return fail("cannot create a temporary file in " + dir.string() + ": " + errno_text());

  auto abandon = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(why);
  };
  // Keep the permissions of the file being replaced (the temp file starts from umask).
  struct stat old {};
  if (::stat(path.c_str(), &old) == 0 && ::fchmod(fd, old.st_mode & 07777) != 0)
    return abandon("cannot set permissions on " + tmp + ": " + errno_text());
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return abandon("cannot write " + tmp + ": " + errno_text());
    done += static_cast<size_t>(n);
  }
  // Without fsync a crash right after rename() can leave an empty file under the old name.
  if (::fsync(fd) != 0) return abandon("cannot flush " + tmp + ": " + errno_text());
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return fail("cannot close " + tmp + ": " + errno_text());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return fail("cannot replace it: " + why);
  }
  // Best effort: make the rename itself durable.
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace mls::nodes
