// .mls project files: every byte string either parses or is refused with a message, in
// each check mode (the CLI's Strict, the editor's Draft and Salvage); and what parses saves
// to text that parses back to the same document.
#include <cstdlib>

#include "fuzz_util.h"
#include "nodes/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mls::fuzz::init_once();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto check : {mls::nodes::GraphCheck::Strict, mls::nodes::GraphCheck::Draft,
                     mls::nodes::GraphCheck::Salvage}) {
    auto doc = mls::nodes::parse_document(text, "fuzz.mls", check);
    if (!doc) continue;
    const std::string saved = mls::nodes::serialize_document(*doc);
    auto again = mls::nodes::parse_document(saved, "saved.mls", mls::nodes::GraphCheck::Salvage);
    if (!again || !(*again == *doc)) std::abort();  // a save that does not read back
  }
  return 0;
}
