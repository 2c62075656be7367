// Fuzzes the token shard header decoder and the layout computed from it.
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/data/shard_format.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) {
  auto header = data::DecodeShardHeader(input, "fuzz");
  return header.ok() && data::LayoutOf(*header).ok();
}

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (uint32_t vocab : {257u, 50257u, 128256u}) {
    data::ShardHeader header;
    header.vocab_size = vocab;
    header.token_width_bytes = data::TokenWidthFor(vocab);
    header.token_count = 4096;
    header.document_count = 17;
    header.payload_crc32c = 0x12345678;
    seeds.push_back(data::EncodeShardHeader(header));
  }
  return seeds;
}

}  // namespace corescape::fuzz
