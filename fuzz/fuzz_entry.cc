// libFuzzer's entry point for every fuzz target: the bytes as a string_view
// to the target's ParseFuzzInput. Its own file, so a target that defines
// LLVMFuzzerTestOneInput itself does not pull it in.
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (corescape::fuzz::ParseFuzzInput(
          absl::string_view(reinterpret_cast<const char*>(data), size))) {
    corescape::fuzz::NoteAccepted();
  }
  return 0;
}
