#ifndef CORESCAPE_RUNTIME_OPTIM_MASK_CODEC_H_
#define CORESCAPE_RUNTIME_OPTIM_MASK_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace corescape::optim {

// How one rank's mask partition travels. The encoder picks whichever is
// smallest for the mask at hand (ties: the lower value).
enum class MaskEncoding : uint8_t {
  kBitmask = 0,             // one bit per coordinate of the range, LSB first
  kIndexList = 1,           // uint32 offset from the range start per entry
  kDeltaIndices = 2,        // LEB128 varint gaps between consecutive entries
  kChangeFromPrevious = 3,  // varint-gap list of coordinates that entered or left
                            // the previous step's mask of the same range
};
const char* MaskEncodingName(MaskEncoding encoding);

// Identifies a mask partition: receivers refuse one whose mask epoch or
// step is not the one they expect.
struct MaskPartitionHeader {
  uint64_t mask_epoch = 0;  // the scheduler's mask epoch (changes with membership)
  int64_t step = 0;         // the step the mask is applied at
  int32_t rank = 0;         // who selected it
  MaskEncoding encoding = MaskEncoding::kBitmask;
  int64_t count = 0;        // entries
};
inline constexpr int64_t kMaskHeaderBytes = 24;

// A coordinate range [begin, end) of the flat buffer and the sorted entries
// selected in it.
struct MaskPartitionView {
  int64_t begin = 0;
  int64_t end = 0;
  absl::Span<const int64_t> indices;  // sorted ascending, within [begin, end)
};

// OK when `mask.indices` are sorted, unique and inside [begin, end); else
// INVALID_ARGUMENT naming the first entry out of place (what the encoder
// refuses).
absl::Status CheckMaskPartition(const MaskPartitionView& mask);

// Payload bytes (header excluded) of `indices` under `encoding`. For
// kChangeFromPrevious, `previous` is the same range's previous mask; without
// one that encoding is unavailable (nullopt).
std::optional<int64_t> MaskPayloadBytes(MaskEncoding encoding, const MaskPartitionView& mask,
                                        const std::vector<int64_t>* previous);

// Header + payload in the smallest encoding (or `force`d one). `previous`
// (may be null) is the range's previous part, sorted ascending as parts are.
absl::StatusOr<std::string> EncodeMaskPartition(MaskPartitionHeader header,
                                                const MaskPartitionView& mask,
                                                const std::vector<int64_t>* previous,
                                                std::optional<MaskEncoding> force = std::nullopt);

struct DecodedMaskPartition {
  MaskPartitionHeader header;
  std::vector<int64_t> indices;
};

// Parses and checks one encoded partition of [begin, end). `previous` is
// needed for kChangeFromPrevious.
absl::StatusOr<DecodedMaskPartition> DecodeMaskPartition(absl::string_view bytes, int64_t begin,
                                                         int64_t end,
                                                         const std::vector<int64_t>* previous);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_MASK_CODEC_H_
