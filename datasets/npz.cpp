#include "datasets/npz.h"

#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "datasets/npy.h"
#include "engine/core/atomic_file.h"

namespace mls::data {
namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = v << 8 | p[k];
  return v;
}

// A regular file only (a FIFO would block, /dev/zero never ends); `size` receives its size.
Result<File> open_file(const std::string& path, uint64_t& size) {
  auto r = open_for_reading(path);
  if (!r) return r.error();
  if (r->size() > kMaxDataFileBytes)
    return file_error(path, "is " + std::to_string(r->size()) + " bytes, more than the " +
                                std::to_string(kMaxDataFileBytes) +
                                " bytes a file of this kind may have");
  size = r->size();
  File f(::fdopen(r->fd(), "rb"), &std::fclose);
  if (!f) return file_error(path, std::string("cannot open: ") + std::strerror(errno));
  r->release();  // the FILE owns the descriptor now
  return f;
}

bool read_at(std::FILE* f, uint64_t offset, uint8_t* out, size_t n) {
  return fseeko(f, static_cast<off_t>(offset), SEEK_SET) == 0 && std::fread(out, 1, n, f) == n;
}

constexpr uint32_t kEocd = 0x06054b50, kZip64Locator = 0x07064b50, kZip64Eocd = 0x06064b50,
                   kCentral = 0x02014b50, kLocal = 0x04034b50;

// Where the central directory is and how many entries it has.
Result<std::pair<uint64_t, uint64_t>> find_central_directory(std::FILE* f, const std::string& path,
                                                             uint64_t file_size) {
  // The end record is 22 bytes plus a comment of up to 65535: search that tail backwards.
  const uint64_t tail = std::min<uint64_t>(file_size, 22 + 65535);
  std::vector<uint8_t> buf(static_cast<size_t>(tail));
  if (!read_at(f, file_size - tail, buf.data(), buf.size())) return file_error(path, "read failed");
  for (size_t i = buf.size() >= 22 ? buf.size() - 22 + 1 : 0; i-- > 0;) {
    if (le(&buf[i], 4) != kEocd) continue;
    uint64_t entries = le(&buf[i + 10], 2), offset = le(&buf[i + 16], 4);
    const uint64_t eocd_at = file_size - tail + i;
    if ((entries == 0xffff || offset == 0xffffffff) && eocd_at >= 20) {
      uint8_t loc[20], rec[56];
      if (!read_at(f, eocd_at - 20, loc, 20) || le(loc, 4) != kZip64Locator)
        return file_error(path, "corrupt zip: zip64 end record locator missing");
      if (!read_at(f, le(loc + 8, 8), rec, 56) || le(rec, 4) != kZip64Eocd)
        return file_error(path, "corrupt zip: zip64 end record missing");
      entries = le(rec + 32, 8);
      offset = le(rec + 48, 8);
    }
    return std::make_pair(offset, entries);
  }
  return file_error(path, "not a zip archive (no end-of-central-directory record); is it an .npz?");
}

}  // namespace

Result<std::vector<ZipEntry>> list_zip(const std::string& path) {
  uint64_t size = 0;
  auto f = open_file(path, size);
  if (!f) return f.error();
  auto cd = find_central_directory(f->get(), path, size);
  if (!cd) return cd.error();
  auto [offset, count] = *cd;

  std::vector<ZipEntry> entries;
  uint8_t h[46];
  for (uint64_t k = 0; k < count; ++k) {
    if (!read_at(f->get(), offset, h, 46) || le(h, 4) != kCentral)
      return file_error(
          path, "corrupt zip: central directory entry " + std::to_string(k) + " is damaged");
    ZipEntry e;
    e.flags = static_cast<uint16_t>(le(h + 8, 2));
    e.method = static_cast<uint16_t>(le(h + 10, 2));
    e.crc = static_cast<uint32_t>(le(h + 16, 4));
    e.compressed_size = le(h + 20, 4);
    e.size = le(h + 24, 4);
    e.local_offset = le(h + 42, 4);
    const size_t name_len = le(h + 28, 2), extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    std::vector<uint8_t> var(name_len + extra_len);
    if (!read_at(f->get(), offset + 46, var.data(), var.size()))
      return file_error(path, "corrupt zip: central directory is cut short");
    e.name.assign(var.begin(), var.begin() + static_cast<std::ptrdiff_t>(name_len));
    // A zip64 extra field holds the 8-byte values whose 4-byte fields read 0xffffffff.
    for (size_t at = name_len; at + 4 <= var.size();) {
      const uint64_t id = le(&var[at], 2), len = le(&var[at + 2], 2);
      size_t p = at + 4;
      if (id == 0x0001) {
        for (uint64_t* field : {&e.size, &e.compressed_size, &e.local_offset})
          if (*field == 0xffffffff && p + 8 <= at + 4 + len && p + 8 <= var.size()) {
            *field = le(&var[p], 8);
            p += 8;
          }
      }
      at += 4 + len;
    }
    entries.push_back(std::move(e));
    offset += 46 + name_len + extra_len + comment_len;
  }
  return entries;
}

Result<std::vector<uint8_t>> read_zip_entry(const std::string& path, const ZipEntry& e) {
  const std::string where = path + ": member '" + e.name + "'";
  if (e.flags & 1) return file_error(where, "is encrypted");
  if (e.method != 0 && e.method != 8)
    return file_error(where, "compression method " + std::to_string(e.method) +
                                 " is not supported (only stored and deflate)");
  uint64_t file_size = 0;
  auto f = open_file(path, file_size);
  if (!f) return f.error();
  uint8_t h[30];
  if (!read_at(f->get(), e.local_offset, h, 30) || le(h, 4) != kLocal)
    return file_error(where, "corrupt zip: local header missing");
  const uint64_t data_at = e.local_offset + 30 + le(h + 26, 2) + le(h + 28, 2);
  // Sizes come from the archive: checked against the file before anything that large is
  // allocated (a corrupt or hostile header may claim gigabytes).
  if (data_at > file_size || e.compressed_size > file_size - data_at)
    return file_error(where, "truncated: the member claims " + std::to_string(e.compressed_size) +
                                 " bytes, past the end of the archive");
  // Deflate expands at most 1032 to 1; a larger claim is a corrupt header.
  if (e.method == 8 && e.size / 1032 > e.compressed_size + 1)
    return file_error(where, "corrupt zip: " + std::to_string(e.compressed_size) +
                                 " compressed bytes cannot hold the " + std::to_string(e.size) +
                                 " bytes the header claims");
  std::vector<uint8_t> packed(static_cast<size_t>(e.compressed_size));
  if (!read_at(f->get(), data_at, packed.data(), packed.size()))
    return file_error(where, "truncated: the archive ends inside this member");

  std::vector<uint8_t> out;
  if (e.method == 0) {
    out = std::move(packed);
  } else {
    out.resize(static_cast<size_t>(e.size));
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return file_error(where, "cannot initialise zlib");
    // Sizes above 4 GiB are fed in chunks: zlib counts in 32-bit uInt.
    constexpr size_t kChunk = size_t{1} << 30;
    size_t in_at = 0, out_at = 0;
    int ret = Z_OK;
    while (ret == Z_OK) {
      const size_t in_n = std::min(packed.size() - in_at, kChunk),
                   out_n = std::min(out.size() - out_at, kChunk);
      zs.next_in = packed.data() + in_at;
      zs.avail_in = static_cast<uInt>(in_n);
      zs.next_out = out.data() + out_at;
      zs.avail_out = static_cast<uInt>(out_n);
      ret = inflate(&zs, Z_NO_FLUSH);
      in_at += in_n - zs.avail_in;
      out_at += out_n - zs.avail_out;
      if (ret == Z_OK && in_n == zs.avail_in && out_n == zs.avail_out) ret = Z_BUF_ERROR;
    }
    const std::string why = zs.msg ? zs.msg : "the stream ends early";
    inflateEnd(&zs);
    if (ret != Z_STREAM_END || out_at != out.size())
      return file_error(where,
                        "corrupt deflate data: " + (ret == Z_STREAM_END ? "size mismatch" : why));
  }
  const uLong crc = crc32_z(0, out.data(), out.size());
  if (crc != e.crc) return file_error(where, "CRC mismatch (the archive is corrupt)");
  return out;
}

namespace {

Result<NpyArray> read_npz_array_unguarded(const std::string& path, const std::string& key) {
  auto entries = list_zip(path);
  if (!entries) return entries.error();
  std::string keys;
  for (const ZipEntry& e : *entries) {
    if (e.name == key + ".npy" || e.name == key) {
      auto bytes = read_zip_entry(path, e);
      if (!bytes) return bytes.error();
      return parse_npy(std::move(*bytes), path + ": array '" + key + "'");
    }
    std::string k = e.name.ends_with(".npy") ? e.name.substr(0, e.name.size() - 4) : e.name;
    keys += (keys.empty() ? "'" : ", '") + k + "'";
  }
  return file_error(
      path, "no array '" + key + "' (the archive holds " + (keys.empty() ? "none" : keys) + ")");
}

}  // namespace

// A member whose header claims more than memory holds is an error naming the archive.
Result<NpyArray> read_npz_array(const std::string& path, const std::string& key) {
  return catching_bad_alloc(path, [&] { return read_npz_array_unguarded(path, key); });
}

}  // namespace mls::data
