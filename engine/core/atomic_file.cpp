#include "engine/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace mls {

std::string errno_text() {
  return std::strerror(errno);
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

const char* file_type_name(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFLNK:
      return "a symlink";
    default:
      return "not a regular file";
  }
}

Result<void> check_replaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Missing (or a dangling symlink): the rename creates it.
    if (errno == ENOENT) return {};
    return make_error("cannot access " + path + ": " + errno_text());
  }
  if (S_ISREG(st.st_mode)) return {};
  struct stat link {};
  const bool via_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  return make_error(path + (via_link ? " (a symlink) points to " : " is ") +
                    file_type_name(st.st_mode) +
                    ", not a regular file; only a regular file is replaced");
}

Result<void> replace_file(const std::string& tmp, const std::string& path) {
  if (auto ok = check_replaceable(path); !ok) return ok;
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error("cannot replace " + path + ": " + errno_text());
  return {};
}

Result<void> write_file_atomically(
    const std::string& path,
    const std::function<Result<void>(int fd, const std::string& tmp)>& body) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Refused before any work; checked again before the rename, as the body may take a while.
  if (auto ok = check_replaceable(path); !ok) return ok;
  // A unique hidden name next to the target: rename() is atomic only within a filesystem.
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
    tmp = (dir / ("." + target.filename().string() + ".tmp-" + suffix)).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    return make_error("cannot create a temporary file in " + dir.string() + ": " + errno_text());
  auto abandon = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(why);
  };
  // Keep the permissions of the file being replaced (the temporary file starts from umask).
  // Only when they differ: a sandboxed process may not change modes at all (the script
  // jail's seccomp refuses fchmod), and a file it wrote itself already has its umask's.
  struct stat old {}, now {};
  if (::stat(path.c_str(), &old) == 0 && ::fstat(fd, &now) == 0 &&
      (now.st_mode & 07777) != (old.st_mode & 07777) && ::fchmod(fd, old.st_mode & 07777) != 0)
    return abandon("cannot set permissions on " + tmp + ": " + errno_text());
  if (auto r = body(fd, tmp); !r) return abandon(r.error().message);
  // Without fsync a crash right after rename() can leave an empty file under the old name.
  if (::fsync(fd) != 0) return abandon("cannot flush " + tmp + ": " + errno_text());
  if (::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return make_error("cannot close " + tmp + ": " + why);
  }
  if (auto ok = check_replaceable(path); !ok) {
    ::unlink(tmp.c_str());
    return ok;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return make_error("cannot replace it: " + why);
  }
  // Best effort: make the rename itself durable.
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<ReadableFile> open_for_reading(const std::string& path) {
  auto fail = [&](const std::string& why) { return make_error(path + ": " + why); };
  auto not_regular = [&](unsigned mode) {
    return fail(std::string("is ") + file_type_name(mode) + ", not a regular file");
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return fail(errno == ENOENT ? "file not found" : "cannot access: " + errno_text());
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return fail(errno == ENOENT ? "file not found" : "cannot open: " + errno_text());
  auto give_up = [&](const Error& e) {
    ::close(fd);
    return e;
  };
  if (::fstat(fd, &st) != 0) return give_up(fail("cannot stat: " + errno_text()));
  if (!S_ISREG(st.st_mode)) return give_up(not_regular(st.st_mode));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return give_up(fail("cannot open: " + errno_text()));
  return ReadableFile(fd, static_cast<uint64_t>(st.st_size));
}

Error out_of_memory_reading(const std::string& path) {
  return make_error(path + ": not enough memory to read it");
}

Result<std::vector<uint8_t>> read_whole_file(const std::string& path, uint64_t max_bytes) {
  auto f = open_for_reading(path);
  if (!f) return f.error();
  const uint64_t size = f->size();
  if (size > max_bytes)
    return make_error(path + ": is " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(max_bytes) + " bytes a file of this kind may have");
  return catching_bad_alloc(path, [&]() -> Result<std::vector<uint8_t>> {
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::read(f->fd(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return make_error(path + ": read failed: " + errno_text());
      if (n == 0) return make_error(path + ": read failed (file changed while reading?)");
      done += static_cast<size_t>(n);
    }
    return bytes;
  });
}

Result<void> write_text_atomically(const std::string& path, std::string_view text) {
  return write_file_atomically(path, [&](int fd, const std::string& tmp) -> Result<void> {
    if (!write_all(fd, text.data(), text.size()))
      return make_error("cannot write " + tmp + ": " + errno_text());
    return {};
  });
}

}  // namespace mls
