#include "runtime/comm/byte_counters.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace corescape::comm {

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kPointToPoint: return "point_to_point";
  }
  return "unknown";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMean: return "mean";
  }
  return "unknown";
}

int64_t ByteCounters::total_sent() const {
  int64_t total = 0;
  for (const KindCounters& c : by_kind) total += c.bytes_sent;
  return total;
}

int64_t ByteCounters::total_received() const {
  int64_t total = 0;
  for (const KindCounters& c : by_kind) total += c.bytes_received;
  return total;
}

int64_t ByteCounters::total_operations() const {
  int64_t total = 0;
  for (const KindCounters& c : by_kind) total += c.operations;
  return total;
}

ByteCounters& ByteCounters::operator+=(const ByteCounters& other) {
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    by_kind[k].bytes_sent += other.by_kind[k].bytes_sent;
    by_kind[k].bytes_received += other.by_kind[k].bytes_received;
    by_kind[k].operations += other.by_kind[k].operations;
  }
  return *this;
}

ByteCounters& ByteCounters::operator-=(const ByteCounters& other) {
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    by_kind[k].bytes_sent -= other.by_kind[k].bytes_sent;
    by_kind[k].bytes_received -= other.by_kind[k].bytes_received;
    by_kind[k].operations -= other.by_kind[k].operations;
  }
  return *this;
}

std::string ByteCounters::DebugString() const {
  std::vector<std::string> parts;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const KindCounters& c = by_kind[k];
    if (c.bytes_sent == 0 && c.bytes_received == 0 && c.operations == 0) continue;
    parts.push_back(absl::StrCat(CollectiveKindName(static_cast<CollectiveKind>(k)),
                                 ": sent ", c.bytes_sent, " B, received ",
                                 c.bytes_received, " B in ", c.operations, " ops"));
  }
  if (parts.empty()) return "no traffic";
  return absl::StrJoin(parts, "; ");
}

}  // namespace corescape::comm
