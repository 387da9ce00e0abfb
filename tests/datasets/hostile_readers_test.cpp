// Readers against hostile files: a FIFO or /dev/zero where a data file should be is refused
// at once by name (never blocks, never reads without end), a gzip bomb stops at the size its
// IDX header declares, and CSV memory follows stated limits (size, columns, NUL bytes).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>

#include "datasets/csv_reader.h"
#include "datasets/idx.h"
#include "datasets/image_decode.h"
#include "datasets/npy.h"
#include "datasets/npz.h"
#include "tests/common/deadline.h"
#include "tests/datasets/fixtures.h"
#include "tests/datasets/formats.h"

// ASan reserves terabytes of address space, so an RLIMIT_AS test cannot run under it.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLS_READERS_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MLS_READERS_TEST_ASAN 1
#endif

using Catch::Matchers::StartsWith;
using namespace mls;
using namespace mls::data;
using namespace mls::data::test;

namespace {

// Each reader, as an error message ("" when it succeeded).
const std::vector<std::pair<const char*, std::function<std::string(const std::string&)>>> kReaders =
    {
        {"idx",
         [](const std::string& p) {
           auto r = read_idx(p);
           return r ? "" : r.error().message;
         }},
        {"npy",
         [](const std::string& p) {
           auto r = read_npy(p);
           return r ? "" : r.error().message;
         }},
        {"npz",
         [](const std::string& p) {
           auto r = read_npz_array(p, "x");
           return r ? "" : r.error().message;
         }},
        {"csv",
         [](const std::string& p) {
           auto r = read_csv(p);
           return r ? "" : r.error().message;
         }},
        {"image",
         [](const std::string& p) {
           auto r = decode_image_file(p, 1);
           return r ? "" : r.error().message;
         }},
};

// Gzip of an IDX header declaring `declared` bytes followed by `zeros` zero bytes, made in
// pieces so the test never holds the decompressed size.
Bytes idx_gzip_bomb(uint32_t declared, size_t zeros) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out, chunk(1 << 16);
  auto pump = [&](const Bytes& in, int flush) {
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    do {
      zs.next_out = chunk.data();
      zs.avail_out = static_cast<uInt>(chunk.size());
      deflate(&zs, flush);
      out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - zs.avail_out));
    } while (zs.avail_out == 0);
  };
  pump(idx_bytes(0x08, {declared}, {}), Z_NO_FLUSH);
  const Bytes block(size_t{1} << 20, 0);
  for (size_t done = 0; done < zeros; done += block.size()) pump(block, Z_NO_FLUSH);
  pump({}, Z_FINISH);
  deflateEnd(&zs);
  return out;
}

#if !defined(MLS_READERS_TEST_ASAN)
// Runs `body` in a child process whose address space may grow by 256 MiB at most; its exit
// code (0: `body` returned true), or -1 when it died (an uncaught std::bad_alloc aborts).
int in_child_with_256mib(const std::function<bool()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                         (rlim_t{256} << 20);
    rlimit rl{limit, limit};
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(3);
    std::_Exit(body() ? 0 : 4);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
#endif

}  // namespace

TEST_CASE("every reader refuses a FIFO at once, naming it", "[datasets][hostile]") {
  TempDir dir;
  const std::string fifo = dir.file("data.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const auto& [name, read] : kReaders) {
    INFO(name);
    std::string msg;
    // Before the fix open(2) blocked here until a writer came, which none does.
    REQUIRE(mls::test::finishes_within(std::chrono::seconds(5),
                                       [&, read = read] { msg = read(fifo); }));
    CHECK(msg == fifo + ": is a FIFO, not a regular file");
  }
}

TEST_CASE("every reader refuses /dev/zero at once instead of reading without end",
          "[datasets][hostile]") {
  for (const auto& [name, read] : kReaders) {
    INFO(name);
    std::string msg;
    REQUIRE(mls::test::finishes_within(std::chrono::seconds(5),
                                       [&, read = read] { msg = read("/dev/zero"); }));
    CHECK(msg == "/dev/zero: is a character device, not a regular file");
  }
}

TEST_CASE("a gzip IDX that unpacks past its header's size is refused without unpacking it",
          "[datasets][hostile][idx]") {
  TempDir dir;
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  // 10 declared bytes, then 512 MiB of zeros in about half a megabyte of gzip.
  write_plain(path, idx_gzip_bomb(10, size_t{512} << 20));
  // (No time limit here: unit tests are not timed. The 256 MiB address-space run below shows
  // the unpacked size is never allocated.)
  const std::string msg = error_of(read_idx(path));
  CHECK_THAT(msg,
             StartsWith(path + ": decompresses to more than the 18 bytes its header declares"));

#if !defined(MLS_READERS_TEST_ASAN)
  // And with 256 MiB of address space to spare: no allocation of the unpacked size (before
  // the fix: std::bad_alloc, an abort).
  CHECK(in_child_with_256mib([&] {
          auto r = read_idx(path);
          return !r && r.error().message.find("its header declares") != std::string::npos;
        }) == 0);
#endif
}

TEST_CASE("a file larger than memory allows is an error naming it, not an abort",
          "[datasets][hostile][npy]") {
#if !defined(MLS_READERS_TEST_ASAN)
  TempDir dir;
  const std::string path = dir.file("sparse.npy");
  // A valid header for 2^30 f32 values, then 4 GiB of holes: the file is what it claims,
  // but reading it needs more memory than the child may take.
  const Bytes head = npy_bytes("<f4", {int64_t{1} << 30}, {});
  write_plain(path, head);
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(head.size() + (uint64_t{4} << 30))) == 0);
  CHECK(in_child_with_256mib([&] {
          auto r = read_npy(path);
          return !r && r.error().message == path + ": not enough memory to read it";
        }) == 0);
#else
  WARN("SKIPPED under ASan: an address-space limit cannot be set beside its shadow memory");
#endif
}

TEST_CASE("CSV: a sparse file over the size limit is refused before it is read",
          "[datasets][hostile][csv]") {
  TempDir dir;
  const std::string path = dir.file("sparse.csv");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  // 2 GiB of holes: no disk used, but a reader that trusts it takes gigabytes of memory.
  REQUIRE(::ftruncate(fd, off_t{2} << 30) == 0);
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(error_of(read_csv(path)) ==
        path +
            ": is 2147483648 bytes, more than the 1073741824 bytes a file of this kind may have");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.5);
}

TEST_CASE("CSV: a NUL byte (a binary or sparse file) is an error naming the line",
          "[datasets][hostile][csv]") {
  TempDir dir;
  const std::string path = dir.file("nul.csv");
  write_plain(path, Bytes{'a', ',', 'b', '\n', '1', ',', '2', '\n', '3', ',', 0, '\n'});
  CHECK(error_of(read_csv(path)) ==
        path + ":3: a NUL byte: this is not a text file (binary or sparse?)");
}

TEST_CASE("CSV: a row wider than the column limit is refused", "[datasets][hostile][csv]") {
  std::string text;
  for (uint64_t c = 0; c <= kMaxCsvColumns; ++c) text += (c ? ",c" : "c") + std::to_string(c);
  text += "\n";
  CHECK_THAT(error_of(parse_csv(text, "wide.csv")),
             StartsWith("wide.csv:1: more than 65536 fields in one row"));
}
