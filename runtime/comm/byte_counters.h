#ifndef CORESCAPE_RUNTIME_COMM_BYTE_COUNTERS_H_
#define CORESCAPE_RUNTIME_COMM_BYTE_COUNTERS_H_

#include <array>
#include <cstdint>
#include <string>

#include "runtime/comm/comm_types.h"

namespace corescape::comm {

// Payload bytes one rank moved for one kind of operation. Payload means the
// application data in the messages (including partial sums a ring forwards),
// not UCX/TCP headers, handshakes or control messages.
struct KindCounters {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t operations = 0;  // operations of this kind that completed OK

  bool operator==(const KindCounters&) const = default;
};

// Counters per CollectiveKind. Plain values: copy them, subtract two
// snapshots to get the volume of one training step.
struct ByteCounters {
  std::array<KindCounters, kNumCollectiveKinds> by_kind{};

  KindCounters& operator[](CollectiveKind kind) {
    return by_kind[static_cast<int>(kind)];
  }
  const KindCounters& operator[](CollectiveKind kind) const {
    return by_kind[static_cast<int>(kind)];
  }

  int64_t total_sent() const;
  int64_t total_received() const;
  int64_t total_operations() const;

  ByteCounters& operator+=(const ByteCounters& other);
  ByteCounters& operator-=(const ByteCounters& other);
  friend ByteCounters operator+(ByteCounters a, const ByteCounters& b) { return a += b; }
  friend ByteCounters operator-(ByteCounters a, const ByteCounters& b) { return a -= b; }
  bool operator==(const ByteCounters&) const = default;

  // "all_reduce: sent 4096 B, received 4096 B in 2 ops; ..." (kinds with
  // activity only).
  std::string DebugString() const;
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_BYTE_COUNTERS_H_
