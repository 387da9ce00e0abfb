// The atomic write replaces only regular files: a FIFO, a socket, a directory or a symlink
// to a device at the target is refused with a message naming the path and what it is, and
// is left exactly as it was (renaming over it would replace the node itself).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../common/temp_dir.h"
#include "engine/core/atomic_file.h"

using namespace mls;
using namespace mls::test;

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// No hidden ".NAME.tmp-..." file is left in `dir`.
bool no_temporary_files(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

mode_t lmode(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & S_IFMT;
}

}  // namespace

TEST_CASE("atomic write: a regular file, a missing path and a dangling symlink are written", "[atomic_file]") {
  TempDir dir("mls_atomic");
  const std::string file = dir.file("a.txt");
  std::ofstream(file) << "old";
  REQUIRE(write_text_atomically(file, "new"));
  CHECK(slurp(file) == "new");
  REQUIRE(write_text_atomically(dir.file("b.txt"), "fresh"));
  CHECK(slurp(dir.file("b.txt")) == "fresh");
  REQUIRE(::symlink(dir.file("nowhere").c_str(), dir.file("dangling").c_str()) == 0);
  REQUIRE(write_text_atomically(dir.file("dangling"), "x"));
  CHECK(lmode(dir.file("dangling")) == S_IFREG);
  CHECK(no_temporary_files(dir.str()));
}

TEST_CASE("atomic write: a FIFO at the path is refused, named, and stays a FIFO", "[atomic_file]") {
  TempDir dir("mls_atomic");
  const std::string fifo = dir.file("out.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto r = write_text_atomically(fifo, "data");
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find(fifo) != std::string::npos);
  CHECK(r.error().message.find("is a FIFO, not a regular file") != std::string::npos);
  CHECK(lmode(fifo) == S_IFIFO);
  CHECK(no_temporary_files(dir.str()));
}

TEST_CASE("atomic write: a directory at the path is refused and named", "[atomic_file]") {
  TempDir dir("mls_atomic");
  const std::string sub = dir.file("sub");
  fs::create_directory(sub);
  std::ofstream(sub + "/keep") << "kept";
  auto r = write_text_atomically(sub, "data");
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find(sub + " is a directory, not a regular file") != std::string::npos);
  CHECK(lmode(sub) == S_IFDIR);
  CHECK(slurp(sub + "/keep") == "kept");
  CHECK(no_temporary_files(dir.str()));
}

TEST_CASE("atomic write: a unix socket at the path is refused and stays a socket", "[atomic_file]") {
  TempDir dir("mls_atomic");
  const std::string sock = dir.file("s.sock");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(sock.size() < sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  auto r = write_text_atomically(sock, "data");
  ::close(fd);
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find(sock + " is a socket") != std::string::npos);
  CHECK(lmode(sock) == S_IFSOCK);
}

TEST_CASE("atomic write: a symlink to /dev/null is refused and stays a symlink", "[atomic_file]") {
  TempDir dir("mls_atomic");
  const std::string link = dir.file("null-link");
  REQUIRE(::symlink("/dev/null", link.c_str()) == 0);
  int called = 0;
  auto r = write_file_atomically(link, [&](int, const std::string&) -> Result<void> {
    ++called;
    return {};
  });
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find(link + " (a symlink) points to a character device") != std::string::npos);
  CHECK(called == 0);  // refused before any work
  CHECK(lmode(link) == S_IFLNK);
  CHECK(fs::read_symlink(link) == "/dev/null");
  CHECK(no_temporary_files(dir.str()));
}

TEST_CASE("replace_file renames over a regular file but refuses a FIFO", "[atomic_file]") {
  TempDir dir("mls_atomic");
  std::ofstream(dir.file("tmp1")) << "one";
  std::ofstream(dir.file("target")) << "old";
  REQUIRE(replace_file(dir.file("tmp1"), dir.file("target")));
  CHECK(slurp(dir.file("target")) == "one");
  REQUIRE(::mkfifo(dir.file("pipe").c_str(), 0600) == 0);
  std::ofstream(dir.file("tmp2")) << "two";
  auto r = replace_file(dir.file("tmp2"), dir.file("pipe"));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(dir.file("pipe") + " is a FIFO") != std::string::npos);
  CHECK(lmode(dir.file("pipe")) == S_IFIFO);
}
