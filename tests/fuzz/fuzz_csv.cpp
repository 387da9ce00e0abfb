// CSV text, with each delimiter the dataset spec allows.
#include "datasets/csv_reader.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (char d : {',', ';', '\t'}) (void)mls::data::parse_csv(text, "fuzz.csv", d);
  return 0;
}
