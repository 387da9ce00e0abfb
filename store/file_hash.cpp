#include "store/file_hash.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace mls::store {

uint64_t fnv1a64(std::string_view bytes, uint64_t state) {
  for (char c : bytes) {
    state ^= static_cast<unsigned char>(c);
    state *= kFnv1a64Prime;
  }
  return state;
}

Result<std::string> file_hash_hex(const std::string& path) {
  auto fail = [&](int err) {
    return make_error(path + ": cannot read (" + std::strerror(err) + ")");
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return fail(errno);

  uint64_t h = kFnv1a64Offset;
  char buf[1 << 16];
  for (;;) {
    size_t n = std::fread(buf, 1, sizeof buf, f.get());
    h = fnv1a64(std::string_view(buf, n), h);
    if (n < sizeof buf) break;
  }
  // fopen succeeds on a directory; the read is what fails (EISDIR).
  if (std::ferror(f.get())) return fail(errno);

  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(hex);
}

}  // namespace mls::store
