#include "datasets/mnist.h"

#include <filesystem>

#include "datasets/idx.h"

namespace mls::data {
namespace {

namespace fs = std::filesystem;

constexpr int kNumClasses = 10;

// Prefers the .gz file but accepts one unpacked in place (`gunzip *.gz`). When neither
// exists the .gz name is returned, so the "file not found" error names the usual file.
std::string pick_file(const std::string& dir, std::string_view split, std::string_view kind) {
  const std::string base = dir + "/" + std::string(split) + "-" + std::string(kind);
  const std::string gz = base + ".gz";
  std::error_code ec;
  if (!fs::exists(gz, ec) && fs::exists(base, ec)) return base;
  return gz;
}

std::string rank_str(size_t rank) {
  return std::to_string(rank) + "-D";
}

}  // namespace

Result<LabeledImages> load_mnist_split(const std::string& dir, std::string_view split) {
  if (split != "train" && split != "t10k")
    return make_error(dir + ": unknown split '" + std::string(split) +
                      "' (expected \"train\" or \"t10k\")");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(dir +
                      ": dataset directory not found; for Fashion-MNIST run "
                      "`apt-get install dataset-fashion-mnist` (it installs to " +
                      kFashionMnistDir + ")");

  const std::string images_path = pick_file(dir, split, "images-idx3-ubyte");
  const std::string labels_path = pick_file(dir, split, "labels-idx1-ubyte");
  Result<IdxArray> images = read_idx(images_path);
  if (!images) return images.error();
  Result<IdxArray> labels = read_idx(labels_path);
  if (!labels) return labels.error();

  if (images->dims.size() != 3)
    return make_error(images_path + ": expected 3-D images (count, rows, cols), got " +
                      rank_str(images->dims.size()));
  if (labels->dims.size() != 1)
    return make_error(labels_path + ": expected 1-D labels, got " + rank_str(labels->dims.size()));
  if (labels->dims[0] != images->dims[0])
    return make_error(labels_path + ": " + std::to_string(labels->dims[0]) + " labels, but " +
                      images_path + " has " + std::to_string(images->dims[0]) + " images");
  for (size_t i = 0; i < labels->data.size(); ++i)
    if (labels->data[i] >= kNumClasses)
      return make_error(labels_path + ": label " + std::to_string(labels->data[i]) + " at index " +
                        std::to_string(i) + " is out of range 0..9");

  LabeledImages out;
  out.count = images->dims[0];
  out.rows = images->dims[1];
  out.cols = images->dims[2];
  out.pixels = std::move(images->data);
  out.labels = std::move(labels->data);
  return out;
}

}  // namespace mls::data
