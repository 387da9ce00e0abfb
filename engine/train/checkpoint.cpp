// Checkpoint files (layout in checkpoint.h).
//
// [SECTION] CRC-32
// [SECTION] Host copies of tensors
// [SECTION] Encoding and the atomic write
// [SECTION] Reading and validation
#include "engine/train/checkpoint.h"

#include "engine/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

namespace mls {

namespace {

constexpr char kMagic[8] = {'M', 'L', 'S', 'C', 'K', 'P', 'T', '\0'};
constexpr size_t kHeaderSize = 24;  // magic, version, file size, header CRC
constexpr uint64_t kDataAlign = 64;
constexpr uint32_t kMaxRank = 64;

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

std::string type_str(DType t, const Shape& s) {
  return std::string(dtype_name(t)) + " " + shape_str(s);
}

// numel(shape) * dtype_size(dtype), or false when that does not fit in 64 bits.
bool byte_count(DType t, const Shape& s, uint64_t& out) {
  uint64_t n = dtype_size(t);
  for (int64_t d : s) {
    if (d < 0) return false;
    auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > UINT64_MAX / ud) return false;
    n *= ud;
  }
  out = n;
  return true;
}

}  // namespace

// [SECTION] CRC-32 ------------------------------------------------------------------------

namespace {
constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();
}  // namespace

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// [SECTION] Host copies of tensors --------------------------------------------------------

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  for (const CheckpointTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

CheckpointTensor snapshot(const std::string& name, const Tensor& t) {
  MLS_CHECK(t.defined(), "snapshot of an undefined tensor");
  CheckpointTensor c{name, t.dtype(), t.shape(), std::vector<uint8_t>(t.nbytes())};
  if (c.bytes.empty()) return c;
  // Views are packed on their own device first; parameters and state are contiguous.
  const Tensor packed = t.is_contiguous() ? t : t.contiguous();
  packed.backend().copy_to_host(*packed.buffer(), packed.byte_offset(), c.bytes.data(),
                                c.bytes.size());
  return c;
}

Result<void> restore(const CheckpointTensor& c, Tensor& t) {
  MLS_CHECK(t.defined(), "restore into an undefined tensor");
  if (c.dtype != t.dtype() || c.shape != t.shape())
    return make_error("checkpoint tensor '" + c.name + "' is " + type_str(c.dtype, c.shape) +
                      " but the tensor it should restore is " + type_str(t.dtype(), t.shape()));
  if (c.bytes.size() != t.nbytes())
    return make_error("checkpoint tensor '" + c.name + "' holds " + std::to_string(c.bytes.size()) +
                      " bytes; " + type_str(c.dtype, c.shape) + " needs " +
                      std::to_string(t.nbytes()));
  if (!t.is_contiguous())
    return make_error("cannot restore checkpoint tensor '" + c.name +
                      "' into a strided view; restore into a contiguous tensor");
  if (!c.bytes.empty()) t.fill_raw(c.bytes.data(), c.bytes.size());
  return {};
}

// [SECTION] Encoding and the atomic write -------------------------------------------------

namespace {

// Little-endian encoding into a byte vector, whatever the host's byte order.
class Encoder {
 public:
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void patch_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void patch_u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Everything before the tensor data (header and tables), with the data offsets filled
// in; `file_size` receives the size of the whole file.
Result<std::vector<uint8_t>> encode_head(const Checkpoint& c, std::vector<uint64_t>& offsets,
                                         uint64_t& file_size) {
  std::set<std::string_view> names;
  for (const CheckpointTensor& t : c.tensors) {
    uint64_t want = 0;
    if (!byte_count(t.dtype, t.shape, want) || t.shape.size() > kMaxRank)
      return make_error("tensor '" + t.name + "' has an invalid shape " + shape_str(t.shape));
    if (want != t.bytes.size())
      return make_error("tensor '" + t.name + "' holds " + std::to_string(t.bytes.size()) +
                        " bytes; " + type_str(t.dtype, t.shape) + " needs " + std::to_string(want));
    if (!names.insert(t.name).second) return make_error("two tensors are called '" + t.name + "'");
  }

  Encoder e;
  e.raw(kMagic, sizeof kMagic);
  e.u32(kCheckpointVersion);
  e.u64(0);  // file size, patched below
  e.u32(0);  // header CRC, patched below
  e.i64(c.step);
  e.i64(c.epoch);
  e.u32(static_cast<uint32_t>(c.ints.size()));
  for (const auto& [k, v] : c.ints) {
    e.str(k);
    e.i64(v);
  }
  e.u32(static_cast<uint32_t>(c.numbers.size()));
  for (const auto& [k, v] : c.numbers) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);  // raw bits: NaN payloads and -0.0 survive
    e.str(k);
    e.u64(bits);
  }
  e.u32(static_cast<uint32_t>(c.strings.size()));
  for (const auto& [k, v] : c.strings) {
    e.str(k);
    e.str(v);
  }
  e.u32(static_cast<uint32_t>(c.tensors.size()));
  std::vector<size_t> offset_fields;
  for (const CheckpointTensor& t : c.tensors) {
    e.str(t.name);
    e.str(dtype_name(t.dtype));
    e.u32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) e.i64(d);
    offset_fields.push_back(e.size());
    e.u64(0);  // offset, patched below
    e.u64(t.bytes.size());
  }

  uint64_t cursor = e.size();
  offsets.clear();
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    // Empty tensors are not aligned, so they add no padding.
    if (!c.tensors[i].bytes.empty()) cursor = align_up(cursor, kDataAlign);
    offsets.push_back(cursor);
    e.patch_u64(offset_fields[i], cursor);
    cursor += c.tensors[i].bytes.size();
  }
  file_size = cursor + 4;
  e.patch_u64(12, file_size);
  e.patch_u32(20, crc32(e.bytes().data(), 20));
  return std::move(e.bytes());
}

// A file descriptor that writes everything it is given and keeps a running CRC.
struct CrcWriter {
  int fd;
  uint32_t crc = 0;
  uint64_t written = 0;
  bool write(const void* p, size_t n) {
    crc = crc32(p, n, crc);
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t done = 0; done < n;) {
      ssize_t k = ::write(fd, b + done, n - done);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) return false;
      done += static_cast<size_t>(k);
    }
    written += n;
    return true;
  }
};

}  // namespace

Result<void> write_checkpoint(const Checkpoint& c, const std::string& path) {
  auto fail = [&](const std::string& why) {
    return make_error("cannot write checkpoint " + path + ": " + why);
  };
  std::vector<uint64_t> offsets;
  uint64_t file_size = 0;
  auto head = encode_head(c, offsets, file_size);
  if (!head) return fail(head.error().message);

  auto r = write_file_atomically(path, [&](int fd, const std::string& tmp) -> Result<void> {
    CrcWriter w{fd};
    static constexpr uint8_t kZeros[kDataAlign] = {};
    auto failed = [&] { return make_error("cannot write " + tmp + ": " + errno_text()); };
    if (!w.write(head->data(), head->size())) return failed();
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const std::vector<uint8_t>& b = c.tensors[i].bytes;
      bool ok = w.write(kZeros, static_cast<size_t>(offsets[i] - w.written)) &&
                (b.empty() || w.write(b.data(), b.size()));
      if (!ok) return failed();
    }
    uint8_t tail[4];
    for (int i = 0; i < 4; ++i) tail[i] = static_cast<uint8_t>(w.crc >> (8 * i));
    if (!w.write(tail, 4)) return failed();
    MLS_CHECK(w.written == file_size, "checkpoint size differs from its header");
    return {};
  });
  if (!r) return fail(r.error().message);
  return {};
}

// [SECTION] Reading and validation --------------------------------------------------------

namespace {

// Sequential, buffered reads from a file position up to a byte limit, with a running CRC
// of everything consumed. A read past the limit fails without consuming anything.
class Reader {
 public:
  Reader(int fd, uint64_t pos, uint32_t crc, uint64_t limit)
      : fd_(fd), pos_(pos), crc_(crc), limit_(limit), buf_(1 << 16) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return limit_ - pos_; }
  uint32_t crc() const { return crc_; }
  void set_limit(uint64_t limit) { limit_ = limit; }
  // A read error from the system (not running out of bytes), or "".
  const std::string& io_error() const { return io_error_; }

  bool bytes(void* dst, uint64_t n) {
    if (n > left()) return false;
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (begin_ == end_ && !fill()) return false;
      size_t k = static_cast<size_t>(std::min<uint64_t>(n, end_ - begin_));
      if (out) {
        std::memcpy(out, buf_.data() + begin_, k);
        out += k;
      }
      crc_ = crc32(buf_.data() + begin_, k, crc_);
      begin_ += k;
      pos_ += k;
      n -= k;
    }
    return true;
  }
  bool skip(uint64_t n) { return bytes(nullptr, n); }
  bool u32(uint32_t& v) { return le(v, 4); }
  bool u64(uint64_t& v) { return le(v, 8); }
  bool i64(int64_t& v) {
    uint64_t u;
    if (!le(u, 8)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  bool str(std::string& s) {
    uint32_t n;
    if (!u32(n) || n > left()) return false;
    s.resize(n);
    return bytes(s.data(), n);
  }

 private:
  template <typename T>
  bool le(T& v, int n) {
    uint8_t b[8];
    if (!bytes(b, static_cast<uint64_t>(n))) return false;
    v = 0;
    for (int i = n - 1; i >= 0; --i) v = static_cast<T>((v << 8) | b[i]);
    return true;
  }
  bool fill() {
    for (;;) {
      // pread at our own position: several readers may share the descriptor.
      ssize_t k = ::pread(fd_, buf_.data(), buf_.size(), static_cast<off_t>(pos_));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) io_error_ = "read error: " + errno_text();
      if (k == 0) io_error_ = "the file shrank while it was being read";
      if (k <= 0) return false;
      begin_ = 0;
      end_ = static_cast<size_t>(k);
      return true;
    }
  }

  int fd_;
  uint64_t pos_;
  uint32_t crc_;
  uint64_t limit_;
  std::vector<uint8_t> buf_;
  size_t begin_ = 0, end_ = 0;
  std::string io_error_;
};

struct TableEntry {
  uint64_t offset = 0, nbytes = 0;
};

// What parsing found wrong: `section` is set when the bytes ran out there, `malformed`
// when they were present but inconsistent.
struct ParseProblem {
  std::string section, malformed;
  bool ok() const { return section.empty() && malformed.empty(); }
};

// Parses everything after the header into `c`. With `read_data` false, stops after the
// tensor table (for diagnosing a truncated file). `body_end` is where the final CRC starts.
ParseProblem parse_body(Reader& r, Checkpoint& c, std::vector<TableEntry>& table, uint64_t body_end,
                        bool read_data) {
  auto ran_out = [](const char* section) { return ParseProblem{section, ""}; };
  auto bad = [](std::string what) { return ParseProblem{"", std::move(what)}; };
  if (!r.i64(c.step) || !r.i64(c.epoch)) return ran_out("step and epoch fields");

  uint32_t n = 0;
  std::string key;
  if (!r.u32(n)) return ran_out("ints");
  for (uint32_t i = 0; i < n; ++i) {
    int64_t v;
    if (!r.str(key) || !r.i64(v)) return ran_out("ints");
    if (!c.ints.emplace(key, v).second) return bad("the int '" + key + "' appears twice");
  }
  if (!r.u32(n)) return ran_out("numbers");
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t bits;
    if (!r.str(key) || !r.u64(bits)) return ran_out("numbers");
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!c.numbers.emplace(key, v).second) return bad("the number '" + key + "' appears twice");
  }
  if (!r.u32(n)) return ran_out("strings");
  for (uint32_t i = 0; i < n; ++i) {
    std::string v;
    if (!r.str(key) || !r.str(v)) return ran_out("strings");
    if (!c.strings.emplace(key, std::move(v)).second)
      return bad("the string '" + key + "' appears twice");
  }

  if (!r.u32(n)) return ran_out("tensor table");
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) {
    CheckpointTensor t;
    std::string dtype;
    uint32_t rank;
    if (!r.str(t.name) || !r.str(dtype) || !r.u32(rank)) return ran_out("tensor table");
    auto dt = parse_dtype(dtype);
    if (!dt) return bad("tensor '" + t.name + "' has an unknown dtype '" + dtype + "'");
    t.dtype = *dt;
    if (rank > kMaxRank)
      return bad("tensor '" + t.name + "' has rank " + std::to_string(rank) + " (at most " +
                 std::to_string(kMaxRank) + ")");
    t.shape.resize(rank);
    for (int64_t& d : t.shape)
      if (!r.i64(d)) return ran_out("tensor table");
    TableEntry e;
    if (!r.u64(e.offset) || !r.u64(e.nbytes)) return ran_out("tensor table");
    uint64_t want = 0;
    if (!byte_count(t.dtype, t.shape, want))
      return bad("tensor '" + t.name + "' has an invalid shape " + shape_str(t.shape));
    if (want != e.nbytes)
      return bad("tensor '" + t.name + "' is " + type_str(t.dtype, t.shape) + " (" +
                 std::to_string(want) + " bytes) but the table gives " + std::to_string(e.nbytes) +
                 " bytes");
    if (!names.insert(t.name).second) return bad("two tensors are called '" + t.name + "'");
    c.tensors.push_back(std::move(t));
    table.push_back(e);
  }

  // The data follows the table, in table order, inside the file.
  uint64_t at = r.pos();
  for (size_t i = 0; i < table.size(); ++i) {
    const TableEntry& e = table[i];
    if (e.offset < at || e.offset > body_end || e.nbytes > body_end - e.offset)
      return bad("the data of tensor '" + c.tensors[i].name + "' (offset " +
                 std::to_string(e.offset) + ", " + std::to_string(e.nbytes) +
                 " bytes) is out of place");
    at = e.offset + e.nbytes;
  }
  if (!read_data) return {};

  for (size_t i = 0; i < table.size(); ++i) {
    std::vector<uint8_t>& b = c.tensors[i].bytes;
    b.resize(static_cast<size_t>(table[i].nbytes));
    if (!r.skip(table[i].offset - r.pos()) || !r.bytes(b.data(), b.size()))
      return ran_out("tensor data");
  }
  if (r.pos() != body_end)
    return bad(std::to_string(body_end - r.pos()) + " unexpected bytes after the tensor data");
  return {};
}

// RAII for a file descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Result<Checkpoint> read_checkpoint_unguarded(const std::string& path) {
  auto fail = [&](const std::string& why) { return make_error(path + ": " + why); };
  // A regular file only: open(2) of a FIFO named last.ckpt would block --resume forever.
  auto file = open_for_reading(path);
  if (!file) return file.error();
  Fd f{file->release()};
  const uint64_t size = file->size();

  // The header: magic, version, declared size, header CRC.
  uint8_t h[kHeaderSize];
  const size_t have = static_cast<size_t>(std::min<uint64_t>(size, kHeaderSize));
  Reader hr(f.fd, 0, 0, have);
  if (!hr.bytes(h, have))
    return fail(hr.io_error().empty() ? "cannot read the header" : hr.io_error());
  const std::string of_size = " (the file is " + std::to_string(size) + " bytes)";
  if (std::memcmp(h, kMagic, std::min(have, sizeof kMagic)) != 0)
    return fail("not an mlstudio checkpoint (wrong magic number)");
  if (have < kHeaderSize) {
    // Only a version newer than ours is worth naming from a partial header.
    if (have >= 12 && load_le(h + 8, 4) > kCheckpointVersion)
      return fail("written in checkpoint format version " + std::to_string(load_le(h + 8, 4)) +
                  ", newer than this build reads (" + std::to_string(kCheckpointVersion) +
                  "); update mlstudio");
    return fail("truncated: the " + std::to_string(kHeaderSize) + "-byte header is incomplete" +
                of_size);
  }
  const uint64_t version = load_le(h + 8, 4);
  if (version > kCheckpointVersion)
    return fail("written in checkpoint format version " + std::to_string(version) +
                ", newer than this build reads (" + std::to_string(kCheckpointVersion) +
                "); update mlstudio");
  if (load_le(h + 20, 4) != crc32(h, 20))
    return fail("checksum mismatch in the header: the file is corrupt");
  if (version == 0) return fail("unsupported checkpoint format version 0");
  const uint64_t declared = load_le(h + 12, 8);
  if (declared < kHeaderSize + 4) return fail("malformed header: the file size field is too small");

  Checkpoint c;
  std::vector<TableEntry> table;
  const uint32_t head_crc = crc32(h, kHeaderSize);
  const uint64_t body_end = declared - 4;

  if (size < declared) {
    // Say where the file was cut: in the tables, in the tensor data, or in the CRC.
    const std::string of = " (the file has " + std::to_string(size) + " of its " +
                           std::to_string(declared) + " bytes)";
    Reader r(f.fd, kHeaderSize, head_crc, size);
    ParseProblem p = parse_body(r, c, table, body_end, false);
    if (!r.io_error().empty()) return fail(r.io_error());
    if (!p.section.empty()) return fail("truncated in the " + p.section + of);
    if (!p.malformed.empty()) return fail("truncated" + of);
    uint64_t expected = 0, found = 0;
    for (const TableEntry& e : table) {
      expected += e.nbytes;
      if (size > e.offset) found += std::min(e.nbytes, size - e.offset);
    }
    if (found < expected)
      return fail("truncated (expected " + std::to_string(expected) +
                  " bytes of tensor data, found " + std::to_string(found) + ")");
    return fail("truncated: the final checksum is missing" + of);
  }
  if (size > declared)
    return fail(std::to_string(size - declared) +
                " unexpected bytes after the end of the checkpoint (the header says " +
                std::to_string(declared) + " bytes, the file has " + std::to_string(size) + ")");

  Reader r(f.fd, kHeaderSize, head_crc, body_end);
  ParseProblem p = parse_body(r, c, table, body_end, true);
  if (!r.io_error().empty()) return fail(r.io_error());
  // Corruption explains any inconsistency, so the checksum is checked first.
  if (!p.ok() && !r.skip(r.left()))
    return fail(r.io_error().empty() ? "cannot read to the end" : r.io_error());
  const uint32_t computed = r.crc();
  r.set_limit(declared);
  uint32_t stored = 0;
  if (!r.u32(stored)) return fail(r.io_error().empty() ? "cannot read the checksum" : r.io_error());
  if (stored != computed) return fail("checksum mismatch: the file is corrupt");
  if (!p.section.empty())
    return fail("malformed: the " + p.section + " run past the end of the data");
  if (!p.malformed.empty()) return fail("malformed: " + p.malformed);
  return c;
}

}  // namespace

Result<Checkpoint> read_checkpoint(const std::string& path) {
  // Tensor sizes are checked against the file's size before they are allocated, but a
  // large file may still not fit in memory: that is an error naming it, not an abort.
  return catching_bad_alloc(path, [&] { return read_checkpoint_unguarded(path); });
}

}  // namespace mls
