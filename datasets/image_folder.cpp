#include "datasets/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "datasets/image_decode.h"

namespace mls::data {
namespace {

namespace fs = std::filesystem;

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Sorted entries of `dir` that pass `keep` (hidden names never do). An entry that is a
// symbolic link must stay inside the dataset folder `top` (canonical): a class folder or an
// image linked to elsewhere would make the reader read any file.
template <typename Keep>
Result<std::vector<fs::path>> sorted_entries(const fs::path& dir, const fs::path& top, Keep keep) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (it->is_symlink(ec)) {
      std::error_code rc;
      const fs::path real = fs::canonical(it->path(), rc);
      const auto [a, b] = std::mismatch(top.begin(), top.end(), real.begin(), real.end());
      (void)b;
      if (rc || a != top.end())
        return make_error(it->path().string() +
                          ": a symbolic link that leaves the dataset folder " + top.string() +
                          (rc ? "" : " (to " + real.string() + ")") + ": refused");
    }
    if (keep(it->path())) out.push_back(it->path());
  }
  if (ec) return make_error(dir.string() + ": cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// Loads one split's class folders into `d`; `classes` is fixed by the training split.
Result<void> load_split(const fs::path& root, const fs::path& top, const ImageFolderOptions& o,
                        bool training, std::vector<std::string>& classes, Dataset& d) {
  auto folders = sorted_entries(root, top, is_dir);
  if (!folders) return folders.error();
  if (folders->empty())
    return make_error(root.string() +
                      ": no class sub-folders (expected one folder of images per class)");
  if (training)
    for (const fs::path& f : *folders) classes.push_back(f.filename().string());
  d.num_classes = static_cast<int64_t>(classes.size());
  d.class_names = classes;
  for (const fs::path& folder : *folders) {
    const std::string name = folder.filename().string();
    const auto at = std::find(classes.begin(), classes.end(), name);
    if (at == classes.end())
      return make_error(folder.string() + ": class '" + name +
                        "' is not among the training classes");
    const int64_t label = at - classes.begin();
    auto files = sorted_entries(folder, top, [](const fs::path& p) {
      return !is_dir(p) && has_image_extension(p.string());
    });
    if (!files) return files.error();
    if (files->empty() && training)
      return make_error(folder.string() + ": no PNG or JPEG images in this class folder");
    for (const fs::path& file : *files) {
      Result<Image> im = decode_image_file(file.string(), o.channels);
      if (!im) return im.error();
      if (d.sample_shape.empty())
        d.sample_shape = {o.channels, o.height ? o.height : im->h, o.width ? o.width : im->w};
      const Image sized = resize_bilinear(*im, d.sample_shape[1], d.sample_shape[2]);
      d.bytes.insert(d.bytes.end(), sized.pixels.begin(), sized.pixels.end());
      d.labels.push_back(label);
      ++d.count;
    }
  }
  return {};
}

}  // namespace

Result<ImageFolderData> load_image_folder(const std::string& dir, const ImageFolderOptions& o) {
  if (o.channels != 1 && o.channels != 3)
    return make_error(dir + ": channels must be 1 or 3, got " + std::to_string(o.channels));
  if (!is_dir(dir)) return make_error(dir + ": dataset directory not found");
  ImageFolderData out;
  const fs::path root(dir);
  std::error_code ec;
  const fs::path top = fs::canonical(root, ec);
  if (ec) return make_error(dir + ": cannot resolve: " + ec.message());
  out.has_test = is_dir(root / "train") && is_dir(root / "test");
  if (out.has_test)
    for (const char* split : {"train", "test"}) {
      const fs::path real = fs::canonical(root / split, ec);
      const auto [a, b] = std::mismatch(top.begin(), top.end(), real.begin(), real.end());
      (void)b;
      if (ec || a != top.end())
        return make_error((root / split).string() +
                          ": a symbolic link that leaves the dataset folder " + top.string() +
                          ": refused");
    }
  std::vector<std::string> classes;
  if (auto r = load_split(out.has_test ? root / "train" : root, top, o, true, classes, out.train);
      !r)
    return r.error();
  if (out.has_test) {
    // The test images take the training size, so one model fits both.
    ImageFolderOptions sized = o;
    sized.height = out.train.sample_shape[1];
    sized.width = out.train.sample_shape[2];
    out.test.sample_shape = out.train.sample_shape;
    if (auto r = load_split(root / "test", top, sized, false, classes, out.test); !r)
      return r.error();
  }
  check_dataset(out.train);
  if (out.has_test) check_dataset(out.test);
  return out;
}

}  // namespace mls::data
