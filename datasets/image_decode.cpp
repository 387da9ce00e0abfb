#include "datasets/image_decode.h"

#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "engine/core/atomic_file.h"
#include "engine/core/check.h"

namespace mls::data {
namespace {

Result<Image> from_stb(unsigned char* data, int w, int h, int channels, const std::string& name) {
  if (!data) {
    const char* why = stbi_failure_reason();
    return make_error(name + ": cannot decode image: " + (why ? why : "unknown error"));
  }
  std::unique_ptr<unsigned char, void (*)(void*)> owned(data, &stbi_image_free);
  Image im;
  im.c = channels;
  im.h = h;
  im.w = w;
  im.pixels.resize(static_cast<size_t>(im.c * im.h * im.w));
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
  // stb interleaves channels (HWC); models want planes (CHW).
  for (size_t p = 0; p < plane; ++p)
    for (size_t c = 0; c < static_cast<size_t>(channels); ++c)
      im.pixels[c * plane + p] = data[p * static_cast<size_t>(channels) + c];
  return im;
}

// A dataset image is at most this many pixels: a header claiming more (a broken or hostile
// file) is refused before anything the size of the claim is allocated.
constexpr int64_t kMaxPixels = int64_t{1} << 26;  // 64 Mpx, 8192 x 8192

std::optional<Error> too_large(int ok, int w, int h, const std::string& name) {
  if (ok && static_cast<int64_t>(w) * h > kMaxPixels)
    return make_error(name + ": image is " + std::to_string(w) + " x " + std::to_string(h) +
                      " pixels, more than the " + std::to_string(kMaxPixels >> 20) +
                      " Mpx an image may have here");
  return std::nullopt;
}

}  // namespace

Result<Image> decode_image_file(const std::string& path, int channels) {
  MLS_CHECK(channels == 1 || channels == 3, "images decode to 1 or 3 channels");
  // Read here rather than by stb's fopen, which would block on a FIFO and read /dev/zero.
  auto bytes = read_whole_file(path, kMaxImageFileBytes);
  if (!bytes) return bytes.error();
  return catching_bad_alloc(
      path, [&] { return decode_image_memory(bytes->data(), bytes->size(), channels, path); });
}

Result<Image> decode_image_memory(const uint8_t* bytes, size_t size, int channels,
                                  const std::string& name) {
  MLS_CHECK(channels == 1 || channels == 3, "images decode to 1 or 3 channels");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
    return make_error(name + ": " + std::to_string(size) + " bytes is too large for an image");
  const int len = static_cast<int>(size);
  int w = 0, h = 0, n = 0;
  const int known = stbi_info_from_memory(bytes, len, &w, &h, &n);  // before w and h are read
  if (auto big = too_large(known, w, h, name)) return *big;
  unsigned char* data = stbi_load_from_memory(bytes, len, &w, &h, &n, channels);
  return from_stb(data, w, h, channels, name);
}

Image resize_bilinear(const Image& src, int64_t h, int64_t w) {
  MLS_CHECK(h > 0 && w > 0, "resize needs a positive size");
  if (src.h == h && src.w == w) return src;
  Image out;
  out.c = src.c;
  out.h = h;
  out.w = w;
  out.pixels.resize(static_cast<size_t>(out.c * h * w));
  // Source coordinate of each output column / row, and its two neighbours' weights.
  auto axis = [](int64_t out_n, int64_t in_n, std::vector<int64_t>& i0, std::vector<float>& frac) {
    const double scale = static_cast<double>(in_n) / static_cast<double>(out_n);
    for (int64_t k = 0; k < out_n; ++k) {
      const double s = std::clamp((static_cast<double>(k) + 0.5) * scale - 0.5, 0.0,
                                  static_cast<double>(in_n - 1));
      const int64_t f = std::min<int64_t>(static_cast<int64_t>(s), in_n - 1);
      i0.push_back(f);
      frac.push_back(static_cast<float>(s - static_cast<double>(f)));
    }
  };
  std::vector<int64_t> y0, x0;
  std::vector<float> fy, fx;
  axis(h, src.h, y0, fy);
  axis(w, src.w, x0, fx);
  for (int64_t c = 0; c < src.c; ++c) {
    const uint8_t* plane = src.pixels.data() + c * src.h * src.w;
    for (int64_t y = 0; y < h; ++y) {
      const int64_t ya = y0[static_cast<size_t>(y)], yb = std::min(ya + 1, src.h - 1);
      const float wy = fy[static_cast<size_t>(y)];
      for (int64_t x = 0; x < w; ++x) {
        const int64_t xa = x0[static_cast<size_t>(x)], xb = std::min(xa + 1, src.w - 1);
        const float wx = fx[static_cast<size_t>(x)];
        const float top = plane[ya * src.w + xa] * (1 - wx) + plane[ya * src.w + xb] * wx;
        const float bottom = plane[yb * src.w + xa] * (1 - wx) + plane[yb * src.w + xb] * wx;
        const float v = top * (1 - wy) + bottom * wy;
        out.pixels[static_cast<size_t>((c * h + y) * w + x)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return out;
}

bool has_image_extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

}  // namespace mls::data
