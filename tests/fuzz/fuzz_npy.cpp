// NPY arrays from bytes, and the same bytes as an NPZ archive holding "x".
#include "datasets/npy.h"
#include "datasets/npz.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = mls::data::parse_npy(std::vector<uint8_t>(data, data + size), "fuzz.npy");
  if (a) (void)a->to_floats();
  (void)mls::data::read_npz_array(mls::fuzz::as_file(data, size, ".npz"), "x");
  return 0;
}
