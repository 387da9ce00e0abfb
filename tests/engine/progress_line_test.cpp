// The progress line (engine/train/progress_line.h) as a person reads it on stderr: the epoch
// line, and in a data-parallel job the job's samples/s followed by communication's share.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/train/progress_line.h"

using namespace mls;

namespace {

// What `f` writes to stderr.
template <class F>
std::string stderr_of(F f) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("mls-progress-" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  FILE* file = std::fopen(path.c_str(), "w");
  REQUIRE(file != nullptr);
  ::dup2(::fileno(file), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(file);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

ProgressInfo epoch_end(double comm) {
  ProgressInfo p;
  p.epoch = 1;
  p.epochs = 3;
  p.batch = p.batches = 235;
  p.loss = 0.5045;
  p.samples_per_s = 168157;
  p.eta_s = 0.7;
  p.data_fraction = 0.11;
  p.epoch_done = true;
  p.comm_fraction = comm;
  return p;
}

}  // namespace

TEST_CASE("progress line: a job's epoch line gives its samples/s and communication's share",
          "[progress]") {
  Progress bar(false);
  CHECK(stderr_of([&] { bar.update(epoch_end(0.44)); }) ==
        "epoch 1/3  loss 0.5045  168157 samples/s  comm 44%  235 steps  data 11%  ETA 0.7s\n");
  // One rank: no communication, nothing said of it.
  CHECK(stderr_of([&] { bar.update(epoch_end(0)); }) ==
        "epoch 1/3  loss 0.5045  168157 samples/s  235 steps  data 11%  ETA 0.7s\n");
  CHECK(comm_text(epoch_end(0.126)) == "  comm 13%");
  CHECK(comm_text(epoch_end(1.7)) == "  comm 100%");  // a clock's jitter past the epoch's time
  CHECK(comm_text(epoch_end(-0.1)).empty());
}

TEST_CASE("progress line: durations for people", "[progress]") {
  CHECK(format_duration(0.84) == "0.8s");
  CHECK(format_duration(41.2) == "41s");
  CHECK(format_duration(125) == "2m05s");
  CHECK(format_duration(3 * 3600 + 7 * 60) == "3h07m");
}
