#ifndef CORESCAPE_RUNTIME_COMM_BLOCK_LAYOUT_H_
#define CORESCAPE_RUNTIME_COMM_BLOCK_LAYOUT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace corescape::comm {

// Byte ranges of world_size blocks laid out back to back: the per-rank
// pieces of an all-gather-v or reduce-scatter, or the chunks a ring
// all-reduce splits its buffer into.
struct BlockLayout {
  std::vector<int64_t> offset;  // bytes from the buffer start
  std::vector<int64_t> bytes;

  int size() const { return static_cast<int>(bytes.size()); }
  int64_t total_bytes() const;
  int64_t max_block_bytes() const;

  // `count` elements of `element_bytes` split into `parts` blocks: the first
  // count % parts blocks get one element more than the others.
  static BlockLayout Balanced(int64_t count, int parts, int64_t element_bytes);
  // Blocks of the given sizes (each >= 0) in order.
  static absl::StatusOr<BlockLayout> FromSizes(absl::Span<const int64_t> sizes,
                                               int64_t element_bytes = 1);
};

// x mod n in [0, n) for any sign of x.
inline int PositiveMod(int64_t x, int n) {
  int64_t m = x % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

// A block is cut into segments of `segment_bytes` (the last one shorter) so a
// ring can forward a segment while the next is still arriving. An empty block
// is one empty segment: it is still sent, so the receiver checks its size.
int64_t NumSegments(int64_t block_bytes, int64_t segment_bytes);
std::pair<int64_t, int64_t> SegmentRange(int64_t block_bytes, int64_t segment_bytes,
                                         int64_t segment);  // [begin, end)

// The segment size to use: `preferred` rounded down to a multiple of
// `alignment` (at least one alignment unit), grown if needed so that
// num_steps * NumSegments(max_block_bytes) message indices fit in
// `max_messages`.
int64_t ChooseSegmentBytes(int64_t max_block_bytes, int64_t preferred, int num_steps,
                           int64_t alignment, int64_t max_messages);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_BLOCK_LAYOUT_H_
