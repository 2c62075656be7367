#include "runtime/data/shard_format.h"

#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/crc32c.h"

namespace corescape::data {
namespace {

// Field offsets inside the header (see docs/data_format.md).
constexpr int kVersionAt = 8;
constexpr int kHeaderBytesAt = 12;
constexpr int kWidthAt = 16;
constexpr int kVocabAt = 20;
constexpr int kTokenCountAt = 24;
constexpr int kDocumentCountAt = 32;
constexpr int kOffsetsOffsetAt = 40;
constexpr int kPayloadCrcAt = 48;
constexpr int kFlagsAt = 52;
constexpr int kReservedAt = 56;

template <typename T>
void Put(std::string& out, int at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T Get(absl::string_view bytes, int at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

}  // namespace

uint32_t TokenWidthFor(uint32_t vocab_size) {
  return vocab_size <= (1u << 16) ? 2 : 4;
}

absl::StatusOr<ShardLayout> LayoutOf(const ShardHeader& header) {
  constexpr uint64_t kLimit = uint64_t{1} << 60;
  if (header.token_count > kLimit / 4 || header.document_count > kLimit / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token count ", header.token_count, " or document count ",
        header.document_count, " is too large for a shard"));
  }
  ShardLayout layout;
  layout.token_bytes =
      static_cast<int64_t>(header.token_count * header.token_width_bytes);
  layout.offsets_offset = (layout.tokens_offset + layout.token_bytes + 7) / 8 * 8;
  layout.offsets_bytes = static_cast<int64_t>((header.document_count + 1) * 8);
  layout.file_bytes = layout.offsets_offset + layout.offsets_bytes;
  return layout;
}

std::string EncodeShardHeader(const ShardHeader& header) {
  std::string out(kShardHeaderBytes, '\0');
  std::memcpy(out.data(), kShardMagic, sizeof(kShardMagic));
  Put<uint32_t>(out, kVersionAt, header.format_version);
  Put<uint32_t>(out, kHeaderBytesAt, kShardHeaderBytes);
  Put<uint32_t>(out, kWidthAt, header.token_width_bytes);
  Put<uint32_t>(out, kVocabAt, header.vocab_size);
  Put<uint64_t>(out, kTokenCountAt, header.token_count);
  Put<uint64_t>(out, kDocumentCountAt, header.document_count);
  absl::StatusOr<ShardLayout> layout = LayoutOf(header);
  Put<uint64_t>(out, kOffsetsOffsetAt,
                layout.ok() ? static_cast<uint64_t>(layout->offsets_offset) : 0);
  Put<uint32_t>(out, kPayloadCrcAt, header.payload_crc32c);
  Put<uint32_t>(out, kFlagsAt, 0);
  Put<uint32_t>(out, kReservedAt, 0);
  Put<uint32_t>(out, kHeaderChecksumOffset,
                Crc32c(out.data(), kHeaderChecksumOffset));
  return out;
}

absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes,
                                              const std::string& path) {
  auto error = [&path](int64_t offset, absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("shard ", path, ": byte offset ", offset, ": ", what));
  };
  if (bytes.size() < static_cast<size_t>(kShardHeaderBytes)) {
    return error(bytes.size(),
                 absl::StrCat("file is ", bytes.size(), " bytes, shorter than the ",
                              kShardHeaderBytes, "-byte header (truncated?)"));
  }
  if (std::memcmp(bytes.data(), kShardMagic, sizeof(kShardMagic)) != 0) {
    return error(0, absl::StrCat("bad magic \"",
                                 absl::CHexEscape(bytes.substr(0, 8)),
                                 "\", expected \"CSSHARD1\": not a token shard"));
  }
  ShardHeader header;
  // The version is checked before anything else so a newer layout is
  // reported as such, not as a checksum failure.
  header.format_version = Get<uint32_t>(bytes, kVersionAt);
  if (header.format_version != kShardFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", path, ": byte offset ", kVersionAt, ": format version ",
        header.format_version, " is not supported (this build reads version ",
        kShardFormatVersion, ")"));
  }
  uint32_t stored_header_crc = Get<uint32_t>(bytes, kHeaderChecksumOffset);
  uint32_t computed_header_crc = Crc32c(bytes.data(), kHeaderChecksumOffset);
  if (stored_header_crc != computed_header_crc) {
    return error(kHeaderChecksumOffset,
                 absl::StrFormat("header checksum mismatch (stored 0x%08x, "
                                 "computed 0x%08x over bytes [0, %d))",
                                 stored_header_crc, computed_header_crc,
                                 kHeaderChecksumOffset));
  }
  if (uint32_t header_bytes = Get<uint32_t>(bytes, kHeaderBytesAt);
      header_bytes != kShardHeaderBytes) {
    return error(kHeaderBytesAt, absl::StrCat("header size ", header_bytes,
                                              ", expected ", kShardHeaderBytes));
  }
  header.token_width_bytes = Get<uint32_t>(bytes, kWidthAt);
  if (header.token_width_bytes != 2 && header.token_width_bytes != 4) {
    return error(kWidthAt, absl::StrCat("token width ", header.token_width_bytes,
                                        " bytes, expected 2 or 4"));
  }
  header.vocab_size = Get<uint32_t>(bytes, kVocabAt);
  if (header.vocab_size == 0 ||
      (header.token_width_bytes == 2 && header.vocab_size > (1u << 16)) ||
      header.vocab_size > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return error(kVocabAt, absl::StrCat("vocabulary size ", header.vocab_size,
                                        " does not fit ", header.token_width_bytes,
                                        "-byte tokens"));
  }
  if (Get<uint32_t>(bytes, kFlagsAt) != 0 || Get<uint32_t>(bytes, kReservedAt) != 0) {
    return error(kFlagsAt, "reserved header fields are not zero");
  }
  header.token_count = Get<uint64_t>(bytes, kTokenCountAt);
  header.document_count = Get<uint64_t>(bytes, kDocumentCountAt);
  header.payload_crc32c = Get<uint32_t>(bytes, kPayloadCrcAt);
  absl::StatusOr<ShardLayout> layout = LayoutOf(header);
  if (!layout.ok()) return error(kTokenCountAt, layout.status().message());
  if (uint64_t offsets_offset = Get<uint64_t>(bytes, kOffsetsOffsetAt);
      offsets_offset != static_cast<uint64_t>(layout->offsets_offset)) {
    return error(kOffsetsOffsetAt,
                 absl::StrCat("document offsets said to start at byte ", offsets_offset,
                              " but the counts put them at byte ",
                              layout->offsets_offset));
  }
  return header;
}

}  // namespace corescape::data
