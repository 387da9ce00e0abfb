#include "datasets/image_folder.h"

#include <stb_image_write.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "datasets/image_decode.h"
#include "tests/datasets/fixtures.h"
#include "tests/datasets/formats.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::Shape;
using namespace mls::data;
using namespace mls::data::test;

namespace {

namespace fs = std::filesystem;

// An RGB image, interleaved as stb writes it: pixel (y, x) = (r, g, b) given by `fn`.
template <typename Fn>
std::vector<uint8_t> rgb(int h, int w, Fn fn) {
  std::vector<uint8_t> px;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const auto [r, g, b] = fn(y, x);
      for (int v : {r, g, b}) px.push_back(static_cast<uint8_t>(v));
    }
  return px;
}

void png(const std::string& path, int h, int w, const std::vector<uint8_t>& px) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, px.data(), w * 3) != 0);
}

void jpeg(const std::string& path, int h, int w, const std::vector<uint8_t>& px) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(stbi_write_jpg(path.c_str(), w, h, 3, px.data(), 100) != 0);
}

auto solid(int r, int g, int b) {
  return [=](int, int) { return std::tuple{r, g, b}; };
}

}  // namespace

TEST_CASE("PNG decodes exactly into channel planes", "[image]") {
  TempDir dir;
  const std::string path = dir.file("a.png");
  png(path, 2, 3, rgb(2, 3, [](int y, int x) { return std::tuple{10 * x, 100 + y, 200}; }));
  auto im = decode_image_file(path, 3);
  REQUIRE(im.ok());
  CHECK(im->c == 3);
  CHECK(im->h == 2);
  CHECK(im->w == 3);
  CHECK(im->pixels == Bytes{0, 10, 20, 0, 10, 20,            // R
                            100, 100, 100, 101, 101, 101,    // G
                            200, 200, 200, 200, 200, 200});  // B
  auto grey = decode_image_file(path, 1);
  REQUIRE(grey.ok());
  CHECK(grey->c == 1);
  // stb's luma: (77 r + 150 g + 29 b) >> 8.
  CHECK(grey->pixels[0] == (77 * 0 + 150 * 100 + 29 * 200) >> 8);
}

TEST_CASE("bilinear resize matches hand-computed values", "[image]") {
  Image im;
  im.c = 1;
  im.h = 1;
  im.w = 2;
  im.pixels = {0, 100};
  // Up to 4 columns: centres at source x = -0.25, 0.25, 0.75, 1.25 -> clamped 0, 25, 75, 100.
  CHECK(resize_bilinear(im, 1, 4).pixels == Bytes{0, 25, 75, 100});
  im.h = 2;
  im.w = 2;
  im.pixels = {0, 100, 200, 100};
  CHECK(resize_bilinear(im, 1, 1).pixels == Bytes{100});  // the mean of the four
}

TEST_CASE("an image folder gives sorted classes, resized samples and labels", "[image]") {
  TempDir dir;
  const std::string root = dir.file("pets");
  png(root + "/dog/b.png", 4, 4, rgb(4, 4, solid(0, 0, 255)));
  png(root + "/dog/a.png", 4, 4, rgb(4, 4, solid(0, 255, 0)));
  jpeg(root + "/cat/x.JPG", 8, 8, rgb(8, 8, solid(255, 0, 0)));
  write_plain(root + "/cat/notes.txt", {'h', 'i'});  // not an image: skipped
  write_plain(root + "/.hidden.png", {1});           // hidden: skipped

  ImageFolderOptions o;
  o.height = 2;
  o.width = 2;
  auto r = load_image_folder(root, o);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK_FALSE(r->has_test);
  const Dataset& d = r->train;
  CHECK(d.class_names == std::vector<std::string>{"cat", "dog"});
  CHECK(d.labels == std::vector<int64_t>{0, 1, 1});
  CHECK(d.sample_shape == Shape{3, 2, 2});
  REQUIRE(d.bytes.size() == 36);
  // cat/x.JPG: red; JPEG is lossy, so within a few levels.
  CHECK(int{d.bytes[0]} == Approx(255).margin(3));
  CHECK(int{d.bytes[4]} == Approx(0).margin(3));
  // dog/a.png (sorted before b.png): exactly green.
  CHECK(Bytes(d.bytes.begin() + 12, d.bytes.begin() + 24) ==
        Bytes{0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0});

  o.channels = 1;
  o.height = o.width = 0;  // the first image's size: 8x8
  auto grey = load_image_folder(root, o);
  REQUIRE(grey.ok());
  CHECK(grey->train.sample_shape == Shape{1, 8, 8});
}

TEST_CASE("an image folder with train/ and test/ keeps its split", "[image]") {
  TempDir dir;
  const std::string root = dir.file("set");
  png(root + "/train/a/1.png", 3, 3, rgb(3, 3, solid(1, 1, 1)));
  png(root + "/train/b/1.png", 3, 3, rgb(3, 3, solid(2, 2, 2)));
  png(root + "/test/b/1.png", 6, 6, rgb(6, 6, solid(3, 3, 3)));
  auto r = load_image_folder(root, {});
  REQUIRE(r.ok());
  CHECK(r->has_test);
  CHECK(r->train.count == 2);
  CHECK(r->test.count == 1);
  CHECK(r->test.labels == std::vector<int64_t>{1});
  CHECK(r->test.class_names == std::vector<std::string>{"a", "b"});
  CHECK(r->test.sample_shape == Shape{3, 3, 3});  // resized to the training size

  png(root + "/test/zebra/1.png", 3, 3, rgb(3, 3, solid(3, 3, 3)));
  CHECK(error_of(load_image_folder(root, {})) ==
        root + "/test/zebra: class 'zebra' is not among the training classes");
}

TEST_CASE("a corrupt image names the file and stb's reason", "[image][errors]") {
  TempDir dir;
  const std::string root = dir.file("broken");
  png(root + "/a/good.png", 2, 2, rgb(2, 2, solid(9, 9, 9)));
  const std::string bad = root + "/a/zz_bad.png";
  write_text(bad, std::string("\x89PNG\r\n\x1a\n\0\0\0", 11));  // a PNG signature, then nothing
  const std::string msg = error_of(load_image_folder(root, {}));
  CHECK_THAT(msg, StartsWith(bad + ": cannot decode image: "));
  CHECK(msg.size() > (bad + ": cannot decode image: ").size());  // stb said why
}

TEST_CASE("image folder errors: missing directory, no classes, empty class", "[image][errors]") {
  TempDir dir;
  CHECK(error_of(load_image_folder(dir.file("nope"), {})) ==
        dir.file("nope") + ": dataset directory not found");
  CHECK_THAT(error_of(load_image_folder(dir.str(), {})), Contains("no class sub-folders"));
  fs::create_directories(dir.file("c/empty"));
  CHECK(error_of(load_image_folder(dir.file("c"), {})) ==
        dir.file("c/empty") + ": no PNG or JPEG images in this class folder");
  ImageFolderOptions o;
  o.channels = 2;
  CHECK_THAT(error_of(load_image_folder(dir.str(), o)), Contains("channels must be 1 or 3"));
}

TEST_CASE("an image whose header claims more than 64 Mpx is refused before decoding", "[image][errors]") {
  // A 54-byte BMP header claiming 12000 x 9000 pixels of 24 bits, and no pixels after it.
  std::vector<uint8_t> bmp(54, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) bmp[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  bmp[0] = 'B';
  bmp[1] = 'M';
  put32(2, 54);
  put32(10, 54);  // pixels start after the headers
  put32(14, 40);  // BITMAPINFOHEADER
  put32(18, 12000);
  put32(22, 9000);
  bmp[26] = 1;   // planes
  bmp[28] = 24;  // bits per pixel
  const std::string msg = error_of(decode_image_memory(bmp.data(), bmp.size(), 3, "huge.bmp"));
  CHECK(msg == "huge.bmp: image is 12000 x 9000 pixels, more than the 64 Mpx an image may have here");
}
