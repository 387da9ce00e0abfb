// Training checkpoints (the .ckpt files --resume, eval and predict read).
#include "engine/train/checkpoint.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)mls::read_checkpoint(mls::fuzz::as_file(data, size, ".ckpt"));
  return 0;
}
