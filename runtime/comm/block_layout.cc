#include "runtime/comm/block_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace corescape::comm {

int64_t BlockLayout::total_bytes() const {
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  return total;
}

int64_t BlockLayout::max_block_bytes() const {
  int64_t m = 0;
  for (int64_t b : bytes) m = std::max(m, b);
  return m;
}

BlockLayout BlockLayout::Balanced(int64_t count, int parts, int64_t element_bytes) {
  BlockLayout layout;
  layout.offset.resize(parts);
  layout.bytes.resize(parts);
  int64_t base = count / parts;
  int64_t extra = count % parts;
  int64_t at = 0;
  for (int i = 0; i < parts; ++i) {
    int64_t n = base + (i < extra ? 1 : 0);
    layout.offset[i] = at * element_bytes;
    layout.bytes[i] = n * element_bytes;
    at += n;
  }
  return layout;
}

absl::StatusOr<BlockLayout> BlockLayout::FromSizes(absl::Span<const int64_t> sizes,
                                                   int64_t element_bytes) {
  BlockLayout layout;
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("size of block ", i, " is negative (", sizes[i], ")"));
    }
    layout.offset.push_back(at);
    layout.bytes.push_back(sizes[i] * element_bytes);
    at += sizes[i] * element_bytes;
  }
  return layout;
}

int64_t NumSegments(int64_t block_bytes, int64_t segment_bytes) {
  if (block_bytes <= 0) return 1;
  return (block_bytes + segment_bytes - 1) / segment_bytes;
}

std::pair<int64_t, int64_t> SegmentRange(int64_t block_bytes, int64_t segment_bytes,
                                         int64_t segment) {
  int64_t begin = std::min(block_bytes, segment * segment_bytes);
  int64_t end = std::min(block_bytes, begin + segment_bytes);
  return {begin, end};
}

int64_t ChooseSegmentBytes(int64_t max_block_bytes, int64_t preferred, int num_steps,
                           int64_t alignment, int64_t max_messages) {
  int64_t segment = std::max(alignment, preferred / alignment * alignment);
  int64_t max_segments = std::max<int64_t>(1, max_messages / std::max(1, num_steps));
  if (NumSegments(max_block_bytes, segment) > max_segments) {
    int64_t needed = (max_block_bytes + max_segments - 1) / max_segments;
    segment = (needed + alignment - 1) / alignment * alignment;
  }
  return segment;
}

}  // namespace corescape::comm
