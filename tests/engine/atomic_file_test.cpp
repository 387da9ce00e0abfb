// The atomic write replaces only regular files: a FIFO, a socket, a directory or a symlink
// to a device at the target is refused with a message naming the path and what it is, and
// is left exactly as it was (renaming over it would replace the node itself). The reading
// side opens only regular files, without ever blocking (a checkpoint that is a FIFO).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../common/deadline.h"
#include "../common/temp_dir.h"
#include "engine/core/atomic_file.h"
#include "engine/train/checkpoint.h"

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

bool still_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

mode_t lmode(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & S_IFMT;
}

}  // namespace

TEST_CASE("atomic write: a regular file, a missing path and a dangling symlink are written",
          "[atomic_file]") {
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

TEST_CASE("atomic write: a unix socket at the path is refused and stays a socket",
          "[atomic_file]") {
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
  CHECK(r.error().message.find(link + " (a symlink) points to a character device") !=
        std::string::npos);
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

TEST_CASE(
    "open_for_reading: a regular file opens, a FIFO, /dev/zero, a directory are refused at once",
    "[atomic_file]") {
  TempDir dir("mls_atomic");
  std::ofstream(dir.file("f")) << "12345";
  auto f = open_for_reading(dir.file("f"));
  REQUIRE(f);
  CHECK(f->size() == 5);
  char buf[8] = {};
  CHECK(::read(f->fd(), buf, sizeof buf) == 5);  // blocking mode again: a normal descriptor
  CHECK(std::string(buf) == "12345");

  const std::string fifo = dir.file("p");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string msg;
  REQUIRE(finishes_within(std::chrono::seconds(5),
                          [&] { msg = open_for_reading(fifo).error().message; }));
  CHECK(msg == fifo + ": is a FIFO, not a regular file");
  CHECK(open_for_reading("/dev/zero").error().message ==
        "/dev/zero: is a character device, not a regular file");
  CHECK(open_for_reading(dir.str()).error().message ==
        dir.str() + ": is a directory, not a regular file");
  CHECK(open_for_reading(dir.file("none")).error().message ==
        dir.file("none") + ": file not found");
  CHECK(read_whole_file(dir.file("f"), 4).error().message ==
        dir.file("f") + ": is 5 bytes, more than the 4 bytes a file of this kind may have");
  auto all = read_whole_file(dir.file("f"), 5);
  REQUIRE(all);
  CHECK(std::string(all->begin(), all->end()) == "12345");
}

TEST_CASE("read_checkpoint of a FIFO (last.ckpt) is refused at once instead of blocking",
          "[atomic_file][checkpoint]") {
  TempDir dir("mls_atomic");
  const std::string fifo = dir.file("last.ckpt");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string msg;
  // Before the fix open(2) waited for a writer that never comes.
  REQUIRE(finishes_within(std::chrono::seconds(5),
                          [&] { msg = read_checkpoint(fifo).error().message; }));
  CHECK(msg == fifo + ": is a FIFO, not a regular file");
  CHECK(still_fifo(fifo));
}
