// Fuzzes the checkpoint manifest parser (manifest.json of step-N/).
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/checkpoint/checkpoint.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) {
  return checkpoint::ParseCheckpointManifest(input, "fuzz").ok();
}

std::vector<std::string> FuzzSeeds() {
  checkpoint::CheckpointManifest manifest{.step = 300};
  manifest.blobs["params"] = {.bytes = 83886080, .crc32c = 0x1234abcd};
  manifest.blobs["optimizer"] = {.bytes = 167772160, .crc32c = 0xffffffff};
  manifest.blobs["loader.json"] = {.bytes = 57, .crc32c = 0};
  checkpoint::CheckpointManifest empty{.step = 0};
  return {checkpoint::CheckpointManifestToJson(manifest),
          checkpoint::CheckpointManifestToJson(empty)};
}

}  // namespace corescape::fuzz
