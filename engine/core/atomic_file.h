// Replacing a file so that a failure at any point (full disk, crash, power loss) leaves
// either the old file or the new one, never a mix: write a hidden temporary file next to
// it, flush it to disk, rename it over the target. Every file mlstudio writes goes through
// it (projects, checkpoints, traces, ONNX and NPY exports, the dashboard CSV), so it is
// also the one place that refuses to replace what is not a regular file: renaming over
// /dev/null, a FIFO or a socket would replace the node itself (as root, the device).
//
//   auto r = write_file_atomically("run-3/last.ckpt", [&](int fd, const std::string& tmp) -> Result<void> {
//     if (!write_all(fd, bytes.data(), bytes.size())) return make_error("cannot write " + tmp + ": " + errno_text());
//     return {};
//   });
//   if (!r) return make_error("cannot save run-3/last.ckpt: " + r.error().message);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace mls {

// `body` writes the content to `fd` (the temporary file `tmp`); its error abandons the
// write. The temporary file keeps the permissions of the file it replaces. `path` must be
// missing or a regular file (a symlink is followed to decide): a directory, device, FIFO
// or socket is refused before anything is written (see check_replaceable). Messages say
// what failed and why (strerror) and name the temporary file or directory; callers add
// the target's name.
Result<void> write_file_atomically(const std::string& path,
                                   const std::function<Result<void>(int fd, const std::string& tmp)>& body);

// write_file_atomically with `text` as the whole content.
Result<void> write_text_atomically(const std::string& path, std::string_view text);

// Whether `path` may be replaced by a rename: it is missing (a dangling symlink counts as
// missing) or a regular file. Otherwise the message names the path and what it is:
// "/dev/null is a character device, not a regular file; only a regular file is replaced".
Result<void> check_replaceable(const std::string& path);

// rename(2) of `tmp` over `path` after check_replaceable(path), for writers that prepare
// their file under a hidden name themselves (import writes and checks two files first).
Result<void> replace_file(const std::string& tmp, const std::string& path);

// "a directory", "a FIFO", "a socket", "a character device", "a block device", "a symlink",
// "a regular file", for messages; `mode` is a stat st_mode.
const char* file_type_name(unsigned mode);

// write(2) until done, retrying on EINTR; false on an error (errno set).
bool write_all(int fd, const void* data, size_t size);

std::string errno_text();  // strerror(errno)

// [SECTION] Reading: regular files only, never blocking, bounded
//
// Every reader of user-named files (datasets, weights, checkpoints, hashed inputs) opens
// them here. A FIFO would block open(2) or read(2) forever, /dev/zero never ends, and a
// directory reads as an error much later: all are refused at once by name.
//
//   auto f = open_for_reading("run-3/last.ckpt");       // "x: is a FIFO, not a regular file"
//   if (!f) return f.error();
//   pread(f->fd(), buf, n, 0);  f->size();
//   auto bytes = read_whole_file("x.npy", kMaxBytes);   // refuses a file larger than that

// An open regular file, closed on destruction.
class ReadableFile {
 public:
  ReadableFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ReadableFile(ReadableFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  ReadableFile& operator=(ReadableFile&&) = delete;
  ReadableFile(const ReadableFile&) = delete;
  ~ReadableFile();
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // st_size when opened
  // Hands the descriptor over (to fdopen, say); the caller closes it.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
  uint64_t size_;
};

// Opens `path` read-only if it is a regular file (symlinks followed): the type is checked
// with stat before opening (a device is never opened) and with fstat after an O_NONBLOCK
// open (a FIFO swapped in meanwhile cannot block), then O_NONBLOCK is cleared. Messages:
// "PATH: file not found", "PATH: is a FIFO, not a regular file", "PATH: cannot open: why".
Result<ReadableFile> open_for_reading(const std::string& path);

// The whole of the regular file `path`, refused when it is larger than `max_bytes` (the
// message names the file, its size and the limit). Out of memory is an error naming the
// file, not an exception.
Result<std::vector<uint8_t>> read_whole_file(const std::string& path, uint64_t max_bytes);

// The message for running out of memory while reading `path`.
Error out_of_memory_reading(const std::string& path);

// Runs `read` (returning a Result) and turns std::bad_alloc into out_of_memory_reading:
// a header that declares gigabytes must not abort the program.
template <typename F>
auto catching_bad_alloc(const std::string& path, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
    return out_of_memory_reading(path);
  }
}

}  // namespace mls
