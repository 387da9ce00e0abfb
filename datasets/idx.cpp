#include "datasets/idx.h"

#define ZLIB_CONST  // makes z_stream::next_in const, so no const_cast is needed
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>

#include "engine/core/atomic_file.h"

namespace mls::data {
namespace {

using Bytes = std::vector<uint8_t>;

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

// The gzip trailer stores the uncompressed size mod 2^32. A corrupt trailer must not make
// us allocate gigabytes, so the hint is capped at deflate's best possible ratio (~1032:1)
// and at what the IDX header allows.
size_t gzip_size_hint(const Bytes& in, uint64_t limit) {
  constexpr size_t kMin = size_t{1} << 16;
  if (in.size() < 18) return kMin;
  const uint8_t* t = in.data() + in.size() - 4;
  const size_t isize = size_t{t[0]} | size_t{t[1]} << 8 | size_t{t[2]} << 16 | size_t{t[3]} << 24;
  // The buffer doubles past the hint, so a modest first guess costs little.
  constexpr uint64_t kMaxHint = uint64_t{256} << 20;
  const size_t cap =
      static_cast<size_t>(std::min({uint64_t{in.size()} * 1032, limit + 1, kMaxHint}));
  return std::clamp(isize, kMin, std::max(kMin, cap));
}

uint32_t read_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

// The file size an IDX header declares (header plus dims x 1 byte), from the first bytes
// decompressed so far; kMaxIdxBytes until the header is complete or when it is malformed
// (parse_idx then says what is wrong).
uint64_t declared_idx_size(const uint8_t* b, size_t n) {
  if (n < 4) return kMaxIdxBytes;
  const int ndims = b[3];
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (ndims < 1 || ndims > 4 || n < header) return kMaxIdxBytes;
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    total *= read_be32(b + 4 + 4 * i);
    if (total > kMaxIdxBytes) return kMaxIdxBytes;
  }
  return std::min<uint64_t>(total + header, kMaxIdxBytes);
}

struct InflateStream {
  z_stream zs{};
  bool live = false;
  ~InflateStream() {
    if (live) inflateEnd(&zs);
  }
};

bool is_gzip(const Bytes& b, size_t at) {
  return b.size() - at >= 2 && b[at] == 0x1f && b[at + 1] == 0x8b;
}

// Decompresses no more than the header declares: a few megabytes that unpack to gigabytes
// (a "gzip bomb") are refused after the declared size, not unpacked into memory.
Result<Bytes> gunzip(const std::string& path, const Bytes& in) {
  InflateStream s;
  if (inflateInit2(&s.zs, 15 + 16) != Z_OK)  // 15 + 16: gzip wrapper, largest window
    return file_error(path, "cannot initialise zlib");
  s.live = true;

  // zlib counts in 32-bit uInt, so large buffers are fed in chunks.
  constexpr size_t kChunk = size_t{1} << 30;
  Bytes out(gzip_size_hint(in, kMaxIdxBytes));
  size_t consumed = 0, produced = 0;
  for (;;) {
    const uint64_t limit = declared_idx_size(out.data(), produced);
    if (produced > limit)
      return file_error(path,
                        "decompresses to more than the " + std::to_string(limit) +
                            " bytes its header declares" +
                            (limit == kMaxIdxBytes ? " (or the most an IDX file may have)" : ""));
    // One byte past the limit is enough to know the data is too long.
    if (produced == out.size())
      out.resize(static_cast<size_t>(std::min<uint64_t>(out.size() * 2, limit + 1)));
    const size_t in_chunk = std::min(in.size() - consumed, kChunk);
    const size_t out_chunk = std::min(out.size() - produced, kChunk);
    s.zs.next_in = in.data() + consumed;
    s.zs.avail_in = static_cast<uInt>(in_chunk);
    s.zs.next_out = out.data() + produced;
    s.zs.avail_out = static_cast<uInt>(out_chunk);
    const int ret = inflate(&s.zs, Z_NO_FLUSH);
    consumed += in_chunk - s.zs.avail_in;
    produced += out_chunk - s.zs.avail_out;

    if (ret == Z_STREAM_END) {
      if (consumed == in.size()) break;
      // gzip allows concatenated members (e.g. from `cat a.gz b.gz`).
      if (is_gzip(in, consumed)) {
        inflateReset(&s.zs);
        continue;
      }
      return file_error(path, std::to_string(in.size() - consumed) +
                                  " bytes of trailing garbage after the gzip stream");
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR && consumed == in.size())
      return file_error(path, "truncated gzip stream: it ends after " + std::to_string(produced) +
                                  " decompressed bytes");
    if (ret == Z_MEM_ERROR) return file_error(path, "out of memory while decompressing");
    const char* why = s.zs.msg ? s.zs.msg : "no progress";
    return file_error(path, std::string("corrupt gzip stream: ") + why);
  }
  out.resize(produced);
  return out;
}

const char* type_name(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0b:
      return "int16";
    case 0x0c:
      return "int32";
    case 0x0d:
      return "float32";
    case 0x0e:
      return "float64";
    default:
      return "not an IDX type";
  }
}

// Takes the bytes by value so the header can be stripped in place: the data is the bulk
// of the file, and copying 47 MB of Fashion-MNIST pixels would be wasted time.
Result<IdxArray> parse_idx(const std::string& path, Bytes bytes) {
  if (bytes.size() < 4)
    return file_error(
        path, "truncated header: expected at least 4 bytes, found " + std::to_string(bytes.size()));
  if (bytes[0] != 0 || bytes[1] != 0)
    return file_error(path, "bad magic " + hex_byte(bytes[0]) + " " + hex_byte(bytes[1]) +
                                ": not an IDX file (its first two bytes must be zero)");
  const uint8_t type = bytes[2];
  if (type != 0x08)
    return file_error(path, "unsupported element type " + hex_byte(type) + " (" + type_name(type) +
                                "); only 0x08 (unsigned byte) is supported");
  const int ndims = bytes[3];
  if (ndims < 1 || ndims > 4)
    return file_error(path,
                      "number of dimensions " + std::to_string(ndims) + " is out of range 1..4");
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < header)
    return file_error(path, "truncated header: expected " + std::to_string(header) +
                                " bytes, found " + std::to_string(bytes.size()));

  IdxArray a;
  uint64_t expected = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint32_t d = read_be32(bytes.data() + 4 + 4 * i);
    if (d == 0) return file_error(path, "dimension " + std::to_string(i) + " is zero");
    if (expected > std::numeric_limits<uint64_t>::max() / d)
      return file_error(path, "dimensions are too large");
    expected *= d;
    a.dims.push_back(d);
  }

  const uint64_t found = bytes.size() - header;
  if (found < expected)
    return file_error(path, "truncated: expected " + std::to_string(expected) +
                                " bytes of data, found " + std::to_string(found));
  if (found > expected)
    return file_error(path, "trailing data: expected " + std::to_string(expected) +
                                " bytes of data, found " + std::to_string(found) + " (" +
                                std::to_string(found - expected) + " extra)");
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  a.data = std::move(bytes);
  return a;
}

Result<IdxArray> read_idx_unguarded(const std::string& path) {
  Result<Bytes> raw = read_whole_file(path, kMaxIdxBytes);
  if (!raw) return raw.error();
  if (!is_gzip(*raw, 0)) return parse_idx(path, std::move(*raw));
  Result<Bytes> plain = gunzip(path, *raw);
  if (!plain) return plain.error();
  raw->clear();
  raw->shrink_to_fit();  // free the compressed copy before parsing
  return parse_idx(path, std::move(*plain));
}

}  // namespace

Result<IdxArray> read_idx(const std::string& path) {
  return catching_bad_alloc(path, [&] { return read_idx_unguarded(path); });
}

}  // namespace mls::data
