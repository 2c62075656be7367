#ifndef CORESCAPE_RUNTIME_DATA_SHARD_FORMAT_H_
#define CORESCAPE_RUNTIME_DATA_SHARD_FORMAT_H_

// The on-disk layout of a token shard (docs/data_format.md has it byte by
// byte). Shared by ShardWriter and ShardReader; nothing here touches files.

#include <bit>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::data {

static_assert(std::endian::native == std::endian::little,
              "shards are little-endian and are mapped without byte swapping");

inline constexpr char kShardMagic[8] = {'C', 'S', 'S', 'H', 'A', 'R', 'D', '1'};
inline constexpr uint32_t kShardFormatVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 64;
// Bytes [0, kHeaderChecksumOffset) are covered by the header checksum.
inline constexpr int64_t kHeaderChecksumOffset = 60;

struct ShardHeader {
  uint32_t format_version = kShardFormatVersion;
  uint32_t token_width_bytes = 2;  // 2 (uint16 tokens) or 4 (uint32 tokens)
  uint32_t vocab_size = 0;         // every token is < vocab_size
  uint64_t token_count = 0;
  uint64_t document_count = 0;
  uint32_t payload_crc32c = 0;     // over every byte after the header
};

// Where the sections of a shard with this header start, and its total size.
struct ShardLayout {
  int64_t tokens_offset = kShardHeaderBytes;
  int64_t token_bytes = 0;
  int64_t offsets_offset = 0;  // 8-aligned start of the document offsets
  int64_t offsets_bytes = 0;   // (document_count + 1) * 8
  int64_t file_bytes = 0;
};

// Fails on counts whose layout would overflow 63 bits.
absl::StatusOr<ShardLayout> LayoutOf(const ShardHeader& header);

// Smallest width (2 or 4) that holds every id below vocab_size.
uint32_t TokenWidthFor(uint32_t vocab_size);

// The 64 header bytes, header checksum included.
std::string EncodeShardHeader(const ShardHeader& header);

// Parses and checks the fixed header: magic, version, header checksum,
// width, vocabulary. `path` only names the file in error messages.
absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes,
                                              const std::string& path);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_SHARD_FORMAT_H_
