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
#include <functional>
#include <string>
#include <string_view>

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

}  // namespace mls
