// A folder of images with one sub-folder per class (the sorted folder names are the class
// names), as torchvision's ImageFolder reads it. A folder holding `train/` and `test/` gives
// both splits, each laid out that way.
//
//   root/cat/001.png  root/cat/002.jpg  root/dog/a.png        -> classes {"cat", "dog"}
//   root/train/cat/...  root/test/cat/...                      -> its own test split
//
//   ImageFolderOptions o;  o.height = 32;  o.width = 32;  o.channels = 3;
//   Result<ImageFolderData> r = load_image_folder("pets", o);
//   if (!r) { std::cerr << r.error().message << "\n"; return 1; }  // names the bad file
//   r->train.sample_shape == Shape{3, 32, 32};  r->has_test
#pragma once

#include <cstdint>
#include <string>

#include "datasets/dataset.h"
#include "engine/core/result.h"

namespace mls::data {

struct ImageFolderOptions {
  int64_t height = 0, width = 0;  // 0: the size of the first training image
  int channels = 3;               // 1 (grey) or 3 (RGB)
};

struct ImageFolderData {
  Dataset train;
  Dataset test;  // empty unless has_test
  bool has_test = false;
};

// Files other than .png / .jpg / .jpeg and names starting with '.' are skipped; an image
// that does not decode is an error naming it, never skipped silently.
Result<ImageFolderData> load_image_folder(const std::string& dir,
                                          const ImageFolderOptions& options);

}  // namespace mls::data
