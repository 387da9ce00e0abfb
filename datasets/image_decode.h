// Decoding PNG and JPEG files (stb_image, from Debian's libstb-dev) into channel-major bytes,
// and bilinear resizing.
//
//   Result<Image> im = decode_image_file("cat.png", /*channels=*/3);
//   if (!im) { std::cerr << im.error().message << "\n"; return 1; }  // "cat.png: ..."
//   Image small = resize_bilinear(*im, 32, 32);  // im->pixels: c * h * w bytes, CHW
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::data {

struct Image {
  int64_t c = 0, h = 0, w = 0;
  std::vector<uint8_t> pixels;  // c planes of h rows of w bytes
};

// `channels` is 1 (grey: stb's luma of a colour image) or 3 (RGB: grey is replicated, alpha
// dropped). Errors name the file and give stb's reason ("cat.png: cannot decode image:
// bad png sig").
// A file larger than kMaxImageFileBytes, or not a regular file, is refused unread.
inline constexpr uint64_t kMaxImageFileBytes = uint64_t{256} << 20;
Result<Image> decode_image_file(const std::string& path, int channels);
Result<Image> decode_image_memory(const uint8_t* data, size_t size, int channels,
                                  const std::string& name);

// Half-pixel-centred bilinear interpolation (OpenCV's INTER_LINEAR, without antialiasing),
// rounded to the nearest byte. Same size: a copy.
Image resize_bilinear(const Image& src, int64_t h, int64_t w);

// A file name that the image sources take: .png, .jpg or .jpeg, any case.
bool has_image_extension(const std::string& path);

}  // namespace mls::data
