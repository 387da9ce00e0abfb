// Image decoding (PNG, JPEG, BMP, ... through stb), to 1 and 3 channels.
#include "datasets/image_decode.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (int channels : {1, 3}) (void)mls::data::decode_image_memory(data, size, channels, "fuzz.img");
  return 0;
}
