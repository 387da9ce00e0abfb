// IDX files (MNIST's format, optionally gzipped).
#include "datasets/idx.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)mls::data::read_idx(mls::fuzz::as_file(data, size, ".idx"));
  return 0;
}
