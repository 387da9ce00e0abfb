// Replacing a file so that a failure at any point (full disk, crash, power loss) leaves
// either the old file or the new one, never a mix: write a hidden temporary file next to
// it, flush it to disk, rename it over the target. Project saves and checkpoints use it.
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
// write. The temporary file keeps the permissions of the file it replaces. Messages say
// what failed and why (strerror) and name the temporary file or directory; callers add
// the target's name.
Result<void> write_file_atomically(const std::string& path,
                                   const std::function<Result<void>(int fd, const std::string& tmp)>& body);

// write_file_atomically with `text` as the whole content.
Result<void> write_text_atomically(const std::string& path, std::string_view text);

// write(2) until done, retrying on EINTR; false on an error (errno set).
bool write_all(int fd, const void* data, size_t size);

std::string errno_text();  // strerror(errno)

}  // namespace mls
