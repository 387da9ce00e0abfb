// Byte-level writers for the dataset tests: NPY files and zip (NPZ) archives built field by
// field from the format specifications, independently of the readers under test.
//
//   Bytes a = npy_bytes("<f4", {2, 3}, le_bytes<float>({1, 2, 3, 4, 5, 6}));
//   Bytes z = zip_bytes({{"x.npy", a, /*deflate=*/true}});
//   write_plain(dir.file("d.npz"), z);
#pragma once

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/datasets/fixtures.h"

namespace mls::data::test {

template <typename T>
Bytes le_bytes(const std::vector<T>& values) {
  Bytes b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.data(), b.size());  // the test machines are little-endian
  return b;
}

// Appends by resize + index: GCC 12 at -O3 reports bogus -Wstringop-overflow for
// push_back/insert on byte vectors here (like its -Wrestrict bug 105329).
inline void put_le(Bytes& b, uint64_t v, int n) {
  const size_t at = b.size();
  b.resize(at + static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) b[at + static_cast<size_t>(k)] = static_cast<uint8_t>(v >> (8 * k));
}

inline void append(Bytes& b, const void* data, size_t n) {
  const size_t at = b.size();
  b.resize(at + n);
  if (n) std::memcpy(b.data() + at, data, n);
}

// An NPY file: magic, version, header length, the dict padded with spaces to a multiple
// of 64 bytes and ended by '\n' (as numpy writes it), then `data`.
inline Bytes npy_bytes(const std::string& descr, const std::vector<int64_t>& shape,
                       const Bytes& data, int version = 1, bool fortran = false) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shape_text += std::to_string(shape[i]) + (shape.size() == 1      ? ","
                                              : i + 1 < shape.size() ? ", "
                                                                     : "");
  shape_text += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape_text + ", }";
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  Bytes b;
  append(b, "\x93NUMPY", 6);
  put_le(b, static_cast<uint64_t>(version), 1);
  put_le(b, 0, 1);
  put_le(b, dict.size(), version == 1 ? 2 : 4);
  append(b, dict.data(), dict.size());
  append(b, data.data(), data.size());
  return b;
}

// Raw deflate (no zlib header), as zip stores it.
inline Bytes raw_deflate(const Bytes& in) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&zs, static_cast<uLong>(in.size())));
  zs.next_in = const_cast<Bytef*>(in.data());  // zlib does not write through it
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct ZipMember {
  std::string name;
  Bytes data;
  bool deflate = false;
  // Sizes as 0xffffffff plus a zip64 extra field (id 1: size, compressed size), in the local
  // header and the central directory: np.savez writes its local headers this way.
  bool zip64 = false;
};

// A zip archive: local headers and data, the central directory, the end record.
inline Bytes zip_bytes(const std::vector<ZipMember>& members) {
  Bytes zip, central;
  for (const ZipMember& m : members) {
    const Bytes packed = m.deflate ? raw_deflate(m.data) : m.data;
    const uint32_t crc =
        static_cast<uint32_t>(crc32(0, m.data.data(), static_cast<uInt>(m.data.size())));
    const uint16_t method = m.deflate ? 8 : 0;
    const size_t offset = zip.size();
    put_le(zip, 0x04034b50, 4);
    put_le(zip, 20, 2);  // version needed
    put_le(zip, 0, 2);   // flags
    put_le(zip, method, 2);
    put_le(zip, 0, 4);  // time, date
    put_le(zip, crc, 4);
    put_le(zip, m.zip64 ? 0xffffffff : packed.size(), 4);
    put_le(zip, m.zip64 ? 0xffffffff : m.data.size(), 4);
    put_le(zip, m.name.size(), 2);
    put_le(zip, m.zip64 ? 20 : 0, 2);  // extra length
    append(zip, m.name.data(), m.name.size());
    const auto zip64_extra = [&](Bytes& b) {
      put_le(b, 0x0001, 2);
      put_le(b, 16, 2);
      put_le(b, m.data.size(), 8);
      put_le(b, packed.size(), 8);
    };
    if (m.zip64) zip64_extra(zip);
    append(zip, packed.data(), packed.size());

    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);  // made by
    put_le(central, 20, 2);  // needed
    put_le(central, 0, 2);
    put_le(central, method, 2);
    put_le(central, 0, 4);
    put_le(central, crc, 4);
    put_le(central, m.zip64 ? 0xffffffff : packed.size(), 4);
    put_le(central, m.zip64 ? 0xffffffff : m.data.size(), 4);
    put_le(central, m.name.size(), 2);
    put_le(central, m.zip64 ? 20 : 0, 2);  // extra
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, offset, 4);
    append(central, m.name.data(), m.name.size());
    if (m.zip64) zip64_extra(central);
  }
  const size_t cd_offset = zip.size();
  append(zip, central.data(), central.size());
  put_le(zip, 0x06054b50, 4);
  put_le(zip, 0, 4);  // disk numbers
  put_le(zip, members.size(), 2);
  put_le(zip, members.size(), 2);
  put_le(zip, central.size(), 4);
  put_le(zip, cd_offset, 4);
  put_le(zip, 0, 2);  // comment
  return zip;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
}

}  // namespace mls::data::test
