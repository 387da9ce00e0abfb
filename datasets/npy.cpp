#include "datasets/npy.h"

#include "engine/core/atomic_file.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <limits>

namespace mls::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the NPY reader copies little-endian data as is");

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct DictParser {
  std::string_view s;
  size_t i = 0;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  bool string(std::string& out) {
    skip();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    const char q = s[i++];
    const size_t end = s.find(q, i);
    if (end == std::string_view::npos) return false;
    out = std::string(s.substr(i, end - i));
    i = end + 1;
    return true;
  }
  bool word(std::string& out) {
    skip();
    const size_t start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    out = std::string(s.substr(start, i - start));
    return !out.empty();
  }
  bool shape(Shape& out) {
    if (!eat('(')) return false;
    while (!eat(')')) {
      skip();
      int64_t v = 0;
      size_t digits = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
        v = v * 10 + (s[i++] - '0');
        ++digits;
      }
      skip();
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2 longs
      if (!digits) return false;
      out.push_back(v);
      if (!eat(',')) {
        if (!eat(')')) return false;
        break;
      }
    }
    return true;
  }
};

bool dtype_of(const std::string& descr, NpyType& out) {
  struct Known {
    const char* names[3];
    NpyType type;
  };
  static const Known known[] = {{{"<f4", "=f4", "f4"}, NpyType::F32},
                                {{"<f8", "=f8", "f8"}, NpyType::F64},
                                {{"|u1", "<u1", "u1"}, NpyType::U8},
                                {{"<i4", "=i4", "i4"}, NpyType::I32},
                                {{"<i8", "=i8", "i8"}, NpyType::I64}};
  for (const Known& k : known)
    for (const char* n : k.names)
      if (descr == n) return out = k.type, true;
  return false;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

const char* npy_descr(NpyType t) {
  switch (t) {
    case NpyType::F32:
      return "<f4";
    case NpyType::F64:
      return "<f8";
    case NpyType::U8:
      return "|u1";
    case NpyType::I32:
      return "<i4";
    case NpyType::I64:
      return "<i8";
  }
  return "?";
}

int64_t npy_item_size(NpyType t) {
  switch (t) {
    case NpyType::F32:
    case NpyType::I32:
      return 4;
    case NpyType::F64:
    case NpyType::I64:
      return 8;
    case NpyType::U8:
      return 1;
  }
  return 0;
}

std::vector<float> NpyArray::to_floats() const {
  const size_t n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  const uint8_t* p = raw.data();
  switch (dtype) {
    case NpyType::F32:
      if (n > 0) std::memcpy(out.data(), p, n * 4);  // an empty array has no buffer to copy
      break;
    case NpyType::F64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
      break;
    case NpyType::U8:
      for (size_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    case NpyType::I32:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int32_t>(p + 4 * i));
      break;
    case NpyType::I64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int64_t>(p + 8 * i));
      break;
  }
  return out;
}

std::vector<int64_t> NpyArray::to_ints() const {
  const size_t n = static_cast<size_t>(numel());
  std::vector<int64_t> out(n);
  const uint8_t* p = raw.data();
  for (size_t i = 0; i < n; ++i)
    out[i] = dtype == NpyType::U8    ? p[i]
             : dtype == NpyType::I32 ? load<int32_t>(p + 4 * i)
             : dtype == NpyType::I64 ? load<int64_t>(p + 8 * i)
                                     : 0;
  return out;
}

Result<NpyArray> parse_npy(std::vector<uint8_t> bytes, const std::string& name) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0)
    return file_error(name, bytes.size() < 6 || std::memcmp(bytes.data(), magic, 6) != 0
                                ? "not an NPY file (it does not start with \\x93NUMPY)"
                                : "truncated header");
  const int major = bytes[6];
  if (major < 1 || major > 3)
    return file_error(name, "NPY format version " + std::to_string(major) + "." +
                                std::to_string(bytes[7]) + " is not supported (1, 2 and 3 are)");
  const size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) return file_error(name, "truncated header");
  size_t header_len = 0;
  for (size_t k = 0; k < len_size; ++k) header_len |= size_t{bytes[8 + k]} << (8 * k);
  const size_t data_at = 8 + len_size + header_len;
  if (bytes.size() < data_at)
    return file_error(name, "truncated header: expected " + std::to_string(data_at) +
                                " bytes, found " + std::to_string(bytes.size()));

  DictParser p{
      std::string_view(reinterpret_cast<const char*>(bytes.data()) + 8 + len_size, header_len)};
  std::string descr, fortran;
  bool has_shape = false;
  NpyArray a;
  if (!p.eat('{')) return file_error(name, "malformed header (expected a Python dict)");
  while (!p.eat('}')) {
    std::string key;
    if (!p.string(key) || !p.eat(':')) return file_error(name, "malformed header dict");
    bool ok = true;
    if (key == "descr")
      ok = p.string(descr);
    else if (key == "fortran_order")
      ok = p.word(fortran);
    else if (key == "shape")
      ok = has_shape = p.shape(a.shape);
    else
      return file_error(name, "unexpected header key '" + key + "'");
    if (!ok) return file_error(name, "malformed value for '" + key + "' in the header");
    if (!p.eat(',')) {
      if (!p.eat('}')) return file_error(name, "malformed header dict");
      break;
    }
  }
  if (descr.empty() || fortran.empty() || !has_shape)
    return file_error(name, "header lacks 'descr', 'fortran_order' or 'shape'");
  if (fortran != "False")
    return file_error(name,
                      "Fortran-order arrays are not supported; save a C-order copy "
                      "(np.save(f, np.ascontiguousarray(a)))");
  if (!descr.empty() && descr[0] == '>')
    return file_error(name, "big-endian dtype '" + descr +
                                "' is not supported; save with "
                                "a.astype(a.dtype.newbyteorder('<'))");
  if (!dtype_of(descr, a.dtype))
    return file_error(name,
                      "unsupported dtype '" + descr + "' (supported: <f4, <f8, |u1, <i4, <i8)");

  uint64_t expected = static_cast<uint64_t>(npy_item_size(a.dtype));
  for (int64_t d : a.shape) {
    if (d != 0 && expected > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      return file_error(name, "shape is too large");
    expected *= static_cast<uint64_t>(d);
  }
  const uint64_t found = bytes.size() - data_at;
  if (found < expected)
    return file_error(name, "truncated: expected " + std::to_string(expected) +
                                " bytes of data, found " + std::to_string(found));
  if (found > expected)
    return file_error(name, "trailing data: expected " + std::to_string(expected) +
                                " bytes of data, found " + std::to_string(found));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(data_at));
  a.raw = std::move(bytes);
  return a;
}

Result<std::vector<uint8_t>> read_binary_file(const std::string& path) {
  return read_whole_file(path, kMaxDataFileBytes);
}

Result<NpyArray> read_npy(const std::string& path) {
  auto bytes = read_binary_file(path);
  if (!bytes) return bytes.error();
  return catching_bad_alloc(path, [&] { return parse_npy(std::move(*bytes), path); });
}

Result<void> write_npy_f32(const std::string& path, const Shape& shape,
                           const std::vector<float>& values) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // (3,) keeps its comma, (3, 4) has none
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // The magic, version and length take 10 bytes; the header ends in '\n' at a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  if (auto w = write_text_atomically(path, bytes); !w)
    return make_error("cannot write " + path + ": " + w.error().message);
  return {};
}

}  // namespace mls::data
