#ifndef CORESCAPE_RUNTIME_COMM_COMM_TYPES_H_
#define CORESCAPE_RUNTIME_COMM_COMM_TYPES_H_

#include "absl/strings/string_view.h"

namespace corescape::comm {

// How AllReduce / ReduceScatter combine fp32 values. kMean divides the sum by
// world_size once, after the sum is complete.
enum class ReduceOp { kSum, kMean };

// What a message or byte counter belongs to. The numeric values are part of
// the wire format (they are encoded in message tags): append only.
enum class CollectiveKind {
  kAllReduce = 0,
  kAllGather = 1,
  kReduceScatter = 2,
  kBroadcast = 3,
  kBarrier = 4,
  kPointToPoint = 5,
};
inline constexpr int kNumCollectiveKinds = 6;

absl::string_view CollectiveKindName(CollectiveKind kind);
absl::string_view ReduceOpName(ReduceOp op);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_COMM_TYPES_H_
