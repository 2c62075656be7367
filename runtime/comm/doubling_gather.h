#ifndef CORESCAPE_RUNTIME_COMM_DOUBLING_GATHER_H_
#define CORESCAPE_RUNTIME_COMM_DOUBLING_GATHER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/message_channel.h"

namespace corescape::comm {

// Whether a gather of `total_bytes` over `world_size` ranks runs as
// recursive doubling under `doubling_bytes` (AlgorithmSettings).
bool UseDoublingGather(int world_size, int64_t total_bytes, int64_t doubling_bytes);

// Recursive-doubling all-gather for a power-of-two world size: block r of
// `buffer` (laid out by `layout`) is rank r's on entry, every block is
// everyone's on return. In round k (mask = 2^k) rank r holds the blocks of
// its group of 2^k ranks (r with the low k bits cleared, onwards: contiguous
// bytes) and swaps them with partner r XOR mask, receiving straight into
// their place. log2 P rounds; rank r receives total - b_r and sends the sum
// of its groups' bytes. Message indices first_message_index + k.
absl::Status RunDoublingGather(MessageChannel& channel, const BlockLayout& layout, char* buffer,
                               uint32_t first_message_index);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_DOUBLING_GATHER_H_
