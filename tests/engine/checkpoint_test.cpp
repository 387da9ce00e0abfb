// Checkpoint files: bit-exact round trips, every truncation and every flipped byte
// rejected with a message naming the file, foreign and newer files refused, and writes
// that fail (missing or read-only directory, a file-size limit hit mid-write) leaving the
// previous checkpoint intact and no temporary file behind.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "../common/temp_dir.h"
#include "engine/train/checkpoint.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
  REQUIRE(f.good());
}
void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  write_bytes(path, b.data(), b.size());
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

template <typename T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

float f32_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}
double f64_bits(uint64_t u) {
  return std::bit_cast<double>(u);
}

// Recomputes the header CRC and the final CRC after a test has edited the bytes.
void reseal(std::vector<uint8_t>& b) {
  uint32_t h = crc32(b.data(), 20);
  for (int i = 0; i < 4; ++i) b[20 + i] = static_cast<uint8_t>(h >> (8 * i));
  uint32_t c = crc32(b.data(), b.size() - 4);
  for (int i = 0; i < 4; ++i) b[b.size() - 4 + i] = static_cast<uint8_t>(c >> (8 * i));
}

uint64_t load_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

// A small checkpoint with every kind of field: 2x3 f32 parameters (with a NaN payload,
// -0.0, infinities and a subnormal), 4 i64 values at the extremes, an empty tensor, and
// maps holding NaN payloads, -0.0 and strings with a NUL inside.
Checkpoint sample() {
  Checkpoint c;
  c.step = 123456789012;
  c.epoch = -7;
  c.ints = {{"seed", static_cast<int64_t>(0xFEDCBA9876543210ull)},
            {"optimizer.steps", 42},
            {"min", std::numeric_limits<int64_t>::min()},
            {"", 0}};
  c.numbers = {{"nan.payload", f64_bits(0x7FF8DEADBEEF0001ull)},
               {"nan.negative", f64_bits(0xFFF0000000000123ull)},  // a signalling payload
               {"minus_zero", -0.0},
               {"inf", -std::numeric_limits<double>::infinity()},
               {"denorm", std::numeric_limits<double>::denorm_min()},
               {"schedule.best", 0.1}};
  c.strings = {{"optimizer.type", "adamw"},
               {"with.nul", std::string("a\0b", 3)},
               {"utf8", "caf\xC3\xA9"},
               {"empty", ""}};
  std::vector<float> w{1.5f,
                       -0.0f,
                       f32_bits(0x7FC12345u),
                       std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::denorm_min(),
                       -3.25f};
  std::vector<int64_t> k{std::numeric_limits<int64_t>::min(), -1, 0,
                         std::numeric_limits<int64_t>::max()};
  c.tensors.push_back({"param/fc1.weight", DType::F32, {2, 3}, raw(w)});
  c.tensors.push_back({"opt/fc1.weight/0", DType::I64, {4}, raw(k)});
  c.tensors.push_back({"empty", DType::F32, {0, 5}, {}});
  return c;
}

void require_same(const Checkpoint& a, const Checkpoint& b) {
  CHECK(a.step == b.step);
  CHECK(a.epoch == b.epoch);
  CHECK(a.ints == b.ints);
  CHECK(a.strings == b.strings);
  REQUIRE(a.numbers.size() == b.numbers.size());
  for (auto ia = a.numbers.begin(), ib = b.numbers.begin(); ia != a.numbers.end(); ++ia, ++ib) {
    INFO(ia->first);
    CHECK(ia->first == ib->first);
    CHECK(std::bit_cast<uint64_t>(ia->second) == std::bit_cast<uint64_t>(ib->second));
  }
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    INFO(a.tensors[i].name);
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].dtype == b.tensors[i].dtype);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
    CHECK(a.tensors[i].bytes == b.tensors[i].bytes);
  }
}

}  // namespace

TEST_CASE("checkpoint: CRC-32 gives the standard check value", "[checkpoint]") {
  const char* s = "123456789";
  CHECK(crc32(s, 9) == 0xCBF43926u);  // the CRC-32/ISO-HDLC check value (zlib's crc32)
  CHECK(crc32(s + 4, 5, crc32(s, 4)) == 0xCBF43926u);
  CHECK(crc32(s, 0) == 0u);
}

TEST_CASE("checkpoint: a round trip is bit-exact", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  const std::string path = dir.file("last.ckpt");
  const Checkpoint c = sample();
  REQUIRE(write_checkpoint(c, path).ok());
  auto back = read_checkpoint(path);
  INFO((back ? "" : back.error().message));
  REQUIRE(back.ok());
  require_same(c, *back);
  CHECK(entries(dir.str()) == std::vector<std::string>{"last.ckpt"});

  // The layout of checkpoint.h: magic, version, size, data at multiples of 64.
  const std::vector<uint8_t> b = read_bytes(path);
  CHECK(std::memcmp(b.data(), "MLSCKPT\0", 8) == 0);
  CHECK(b[8] == 1);
  CHECK(b[9] == 0);
  CHECK(load_u64(b, 12) == b.size());
  // The f32 tensor is the first in the table: its 24 bytes sit at a 64-aligned offset.
  const std::vector<uint8_t>& w = c.tensors[0].bytes;
  auto it = std::search(b.begin(), b.end(), w.begin(), w.end());
  REQUIRE(it != b.end());
  CHECK((it - b.begin()) % 64 == 0);

  // The same checkpoint always gives the same bytes; writing replaces the old file.
  REQUIRE(write_checkpoint(c, path).ok());
  CHECK(read_bytes(path) == b);
  Checkpoint later = c;
  later.step += 1;
  REQUIRE(write_checkpoint(later, path).ok());
  CHECK(read_checkpoint(path)->step == c.step + 1);
  CHECK(entries(dir.str()) == std::vector<std::string>{"last.ckpt"});

  // An empty checkpoint is valid too.
  REQUIRE(write_checkpoint(Checkpoint{}, dir.file("empty.ckpt")).ok());
  auto empty = read_checkpoint(dir.file("empty.ckpt"));
  REQUIRE(empty.ok());
  require_same(Checkpoint{}, *empty);
}

TEST_CASE("checkpoint: snapshot and restore of device tensors", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  Tensor w = Tensor::from_f32(host(), {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor labels = Tensor::from_i64(host(), {3}, {-5, 0, 1LL << 40});
  Checkpoint c;
  c.tensors.push_back(snapshot("param/w", w));
  c.tensors.push_back(snapshot("param/w.t", w.transpose(0, 1)));  // a view: packed in logical order
  c.tensors.push_back(snapshot("labels", labels));
  CHECK(c.tensors[1].shape == Shape{3, 2});
  CHECK(c.tensors[1].bytes == raw(std::vector<float>{1, 4, 2, 5, 3, 6}));
  REQUIRE(write_checkpoint(c, dir.file("a.ckpt")).ok());
  auto back = read_checkpoint(dir.file("a.ckpt"));
  REQUIRE(back.ok());

  Tensor w2 = Tensor::zeros(host(), DType::F32, {2, 3}, AllocTag::Other);
  Tensor wt2 = Tensor::zeros(host(), DType::F32, {3, 2}, AllocTag::Other);
  Tensor labels2 = Tensor::zeros(host(), DType::I64, {3}, AllocTag::Other);
  REQUIRE(back->find("param/w") != nullptr);
  REQUIRE(back->find("nope") == nullptr);
  REQUIRE(restore(*back->find("param/w"), w2).ok());
  REQUIRE(restore(*back->find("param/w.t"), wt2).ok());
  REQUIRE(restore(*back->find("labels"), labels2).ok());
  CHECK(w2.to_f64() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(wt2.to_f64() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(labels2.to_f64() == std::vector<double>{-5, 0, static_cast<double>(1LL << 40)});
}

TEST_CASE("checkpoint: restore into another shape or dtype names the tensor", "[checkpoint]") {
  CheckpointTensor c =
      snapshot("param/fc1.weight", Tensor::from_f32(host(), {2, 3}, {1, 2, 3, 4, 5, 6}));
  Tensor other = Tensor::zeros(host(), DType::F32, {3, 2}, AllocTag::Other);
  auto r = restore(c, other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "checkpoint tensor 'param/fc1.weight' is f32 [2,3] but the tensor it should restore is "
        "f32 [3,2]");
  CHECK(other.to_f64() == std::vector<double>(6, 0.0));  // untouched

  Tensor ints = Tensor::zeros(host(), DType::I64, {2, 3}, AllocTag::Other);
  auto r2 = restore(c, ints);
  REQUIRE_FALSE(r2.ok());
  CHECK_THAT(r2.error().message, Catch::Contains("'param/fc1.weight'") &&
                                     Catch::Contains("f32 [2,3]") && Catch::Contains("i64 [2,3]"));

  Tensor big = Tensor::zeros(host(), DType::F32, {4, 3}, AllocTag::Other);
  Tensor strided = big.slice(0, 0, 4, 2);  // [2,3] rows 0 and 2: not contiguous
  auto r4 = restore(c, strided);
  REQUIRE_FALSE(r4.ok());
  CHECK_THAT(r4.error().message,
             Catch::Contains("'param/fc1.weight'") && Catch::Contains("strided"));
  CHECK(big.to_f64() == std::vector<double>(12, 0.0));
}

TEST_CASE("checkpoint: every truncation fails cleanly", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  const std::string good = dir.file("good.ckpt"), cut = dir.file("cut.ckpt");
  REQUIRE(write_checkpoint(sample(), good).ok());
  const std::vector<uint8_t> b = read_bytes(good);
  // Where the tensor data lies: the f32 tensor (24 bytes), then the i64 one (32 bytes).
  const Checkpoint s = sample();
  const std::vector<uint8_t>& w = s.tensors[0].bytes;
  const size_t w_at =
      static_cast<size_t>(std::search(b.begin(), b.end(), w.begin(), w.end()) - b.begin());
  const size_t k_at = w_at + 64;
  REQUIRE(k_at + 32 == b.size() - 4);

  for (size_t len = 0; len < b.size(); ++len) {
    write_bytes(cut, b.data(), len);
    auto r = read_checkpoint(cut);
    INFO("truncated to " << len << " of " << b.size() << " bytes");
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.error().message;
    INFO(m);
    CHECK(m.rfind(cut + ": truncated", 0) == 0);
    if (len >= w_at && len < b.size() - 4) CHECK_THAT(m, Catch::Contains("bytes of tensor data"));
  }
  // Cut inside the second tensor: all 24 bytes of the first and 10 of the second are there.
  write_bytes(cut, b.data(), k_at + 10);
  auto r = read_checkpoint(cut);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == cut + ": truncated (expected 56 bytes of tensor data, found 34)");
  write_bytes(cut, b.data(), 0);
  CHECK(read_checkpoint(cut).error().message ==
        cut + ": truncated: the 24-byte header is incomplete (the file is 0 bytes)");
}

TEST_CASE("checkpoint: any flipped byte is detected", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  const std::string good = dir.file("good.ckpt"), bad = dir.file("bad.ckpt");
  REQUIRE(write_checkpoint(sample(), good).ok());
  const std::vector<uint8_t> b = read_bytes(good);
  for (size_t i = 0; i < b.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> f = b;
      f[i] ^= mask;
      write_bytes(bad, f);
      auto r = read_checkpoint(bad);
      INFO("byte " << i << " of " << b.size() << " xor " << int(mask));
      REQUIRE_FALSE(r.ok());
      const std::string& m = r.error().message;
      INFO(m);
      CHECK(m.rfind(bad + ": ", 0) == 0);
      if (i < 8)
        CHECK_THAT(m, Catch::Contains("not an mlstudio checkpoint"));
      else if (i >= 12)
        CHECK_THAT(m, Catch::Contains("checksum mismatch") && Catch::Contains("corrupt"));
    }
  }
  std::vector<uint8_t> f = b;
  f[b.size() / 2] ^= 0x10;
  write_bytes(bad, f);
  CHECK(read_checkpoint(bad).error().message == bad + ": checksum mismatch: the file is corrupt");
}

TEST_CASE("checkpoint: content that passes the checksums but is malformed", "[checkpoint]") {
  // A writer bug, not disk damage: the parser must still fail cleanly, never crash or
  // allocate what the file merely claims.
  TempDir dir("mls_ckpt");
  const std::string good = dir.file("good.ckpt"), bad = dir.file("bad.ckpt");
  REQUIRE(write_checkpoint(sample(), good).ok());
  const std::vector<uint8_t> b = read_bytes(good);
  int failures = 0;
  for (size_t i = 24; i + 4 < b.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7F}, uint8_t{0xFF}}) {
      if (b[i] == v) continue;
      std::vector<uint8_t> f = b;
      f[i] = v;
      reseal(f);
      write_bytes(bad, f);
      auto r = read_checkpoint(bad);
      if (!r.ok()) {
        ++failures;
        INFO("byte " << i << " set to " << int(v) << ": " << r.error().message);
        CHECK(r.error().message.rfind(bad + ": malformed", 0) == 0);
      }
    }
  }
  CHECK(failures > 100);  // the table's lengths, counts, dtypes and offsets are checked

  // The writer refuses the same inconsistencies before touching the disk.
  const std::vector<uint8_t> kept = read_bytes(bad);
  Checkpoint c = sample();
  c.tensors[2].name = c.tensors[1].name;
  auto dup = write_checkpoint(c, bad);
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message ==
        "cannot write checkpoint " + bad + ": two tensors are called 'opt/fc1.weight/0'");
  c = sample();
  c.tensors[0].bytes.pop_back();
  auto wrong = write_checkpoint(c, bad);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message ==
        "cannot write checkpoint " + bad +
            ": tensor 'param/fc1.weight' holds 23 bytes; f32 [2,3] needs 24");
  CHECK(read_bytes(bad) == kept);
}

TEST_CASE("checkpoint: foreign, newer, padded and missing files are refused", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  const std::string p = dir.file("x.ckpt");

  const std::string text = "{\"this\": \"is a JSON file, not a checkpoint\"}\n";
  write_bytes(p, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  CHECK(read_checkpoint(p).error().message ==
        p + ": not an mlstudio checkpoint (wrong magic number)");
  write_bytes(p, reinterpret_cast<const uint8_t*>("PK"), 2);  // short and foreign
  CHECK_THAT(read_checkpoint(p).error().message, Catch::Contains("not an mlstudio checkpoint"));

  REQUIRE(write_checkpoint(sample(), p).ok());
  std::vector<uint8_t> b = read_bytes(p);

  std::vector<uint8_t> newer = b;
  newer[8] = 2;
  reseal(newer);  // a well-formed file from a later release
  write_bytes(p, newer);
  CHECK(read_checkpoint(p).error().message ==
        p + ": written in checkpoint format version 2, newer than this build reads (1); "
            "update mlstudio");
  write_bytes(p, newer.data(), 16);  // even its first 16 bytes say so
  CHECK_THAT(read_checkpoint(p).error().message, Catch::Contains("version 2, newer"));

  std::vector<uint8_t> padded = b;
  padded.push_back(0);
  write_bytes(p, padded);
  CHECK_THAT(read_checkpoint(p).error().message,
             Catch::StartsWith(p + ": 1 unexpected bytes after the end of the checkpoint"));

  const std::string missing = dir.file("missing.ckpt");
  CHECK(read_checkpoint(missing).error().message ==
        missing + ": file not found");
  CHECK(read_checkpoint(dir.str()).error().message ==
        dir.str() + ": is a directory, not a regular file");
}

TEST_CASE("checkpoint: writing into a missing directory leaves nothing", "[checkpoint]") {
  TempDir dir("mls_ckpt");
  const std::string sub = dir.file("no/such/dir");
  const std::string path = sub + "/last.ckpt";
  auto r = write_checkpoint(sample(), path);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::StartsWith("cannot write checkpoint " + path + ": ") &&
                                    Catch::Contains("No such file or directory"));
  CHECK_FALSE(std::filesystem::exists(dir.file("no")));
  CHECK(entries(dir.str()).empty());
}

TEST_CASE("checkpoint: a file that cannot be created keeps the old checkpoint", "[checkpoint]") {
  // Holds for root too: with no file descriptors left, no file can be created, whoever asks.
  TempDir dir("mls_ckpt");
  const std::string path = dir.file("last.ckpt");
  REQUIRE(write_checkpoint(sample(), path).ok());
  const std::vector<uint8_t> before = read_bytes(path);
  Checkpoint later = sample();
  later.step += 100;
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit none = old;
  none.rlim_cur = 0;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &none) == 0);
  auto r = write_checkpoint(later, path);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::StartsWith("cannot write checkpoint " + path + ": ") &&
                                    Catch::Contains("Too many open files"));
  CHECK(read_bytes(path) == before);
  CHECK(entries(dir.str()) == std::vector<std::string>{"last.ckpt"});
}

TEST_CASE("checkpoint: a read-only directory keeps the old checkpoint", "[checkpoint]") {
  if (::geteuid() == 0) {
    // Root writes into a read-only directory; the test above covers it with a file that
    // cannot be created, which holds for root.
    WARN("mode bits do not bind root: covered by 'a file that cannot be created'");
    return;
  }
  TempDir dir("mls_ckpt");
  const std::string path = dir.file("last.ckpt");
  REQUIRE(write_checkpoint(sample(), path).ok());
  const std::vector<uint8_t> before = read_bytes(path);
  REQUIRE(::chmod(dir.str().c_str(), 0555) == 0);
  Checkpoint later = sample();
  later.step += 100;
  auto r = write_checkpoint(later, path);
  REQUIRE(::chmod(dir.str().c_str(), 0755) == 0);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::StartsWith("cannot write checkpoint " + path + ": ") &&
                                    Catch::Contains("Permission denied"));
  CHECK(read_bytes(path) == before);
  CHECK(entries(dir.str()) == std::vector<std::string>{"last.ckpt"});
}

TEST_CASE("checkpoint: a write that fails midway keeps the old checkpoint", "[checkpoint]") {
  // A file-size limit makes write() fail with EFBIG after the first 4 KiB, as a full disk
  // fails with ENOSPC; unlike a read-only directory, it works when running as root too.
  TempDir dir("mls_ckpt");
  const std::string path = dir.file("last.ckpt");
  REQUIRE(write_checkpoint(sample(), path).ok());
  const std::vector<uint8_t> before = read_bytes(path);

  Checkpoint big = sample();
  big.tensors.push_back({"param/big", DType::F32, {64, 256}, std::vector<uint8_t>(65536, 0x3F)});
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  auto r = write_checkpoint(big, path);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);

  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::StartsWith("cannot write checkpoint " + path + ": ") &&
                                    Catch::Contains(std::strerror(EFBIG)));
  CHECK(read_bytes(path) == before);
  CHECK(entries(dir.str()) == std::vector<std::string>{"last.ckpt"});
  auto back = read_checkpoint(path);
  REQUIRE(back.ok());
  require_same(sample(), *back);
}
