// Broadcast (direct or pipelined chain) and the dissemination barrier.
#include "runtime/comm/algorithm_util.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/collective_algorithms.h"

namespace corescape::comm {

absl::Status RunBroadcast(MessageChannel& channel, const AlgorithmSettings& settings,
                          void* data, int64_t bytes, int root) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  if (world == 1 || bytes == 0) return absl::OkStatus();
  char* buffer = static_cast<char*>(data);
  std::vector<MessageChannel::MessageId> ids;

  if (bytes <= settings.small_bytes) {
    if (rank == root) {
      for (int peer = 0; peer < world; ++peer) {
        if (peer == root) continue;
        if (auto s = Track(channel.Send(peer, 0, buffer, bytes), ids); !s.ok()) return s;
      }
    } else if (auto s = Track(channel.Recv(root, 0, buffer, bytes), ids); !s.ok()) {
      return s;
    }
    return WaitAll(channel, ids);
  }

  // Chain root -> root+1 -> ... in segments: each rank forwards a segment as
  // soon as it has it, so the whole buffer takes about one transfer time.
  const int position = PositiveMod(rank - root, world);
  const int prev = PositiveMod(rank - 1, world);
  const int next = PositiveMod(rank + 1, world);
  const int64_t segment =
      ChooseSegmentBytes(bytes, settings.segment_bytes, 1, 1, kMessageIndexLimit);
  const int64_t segments = NumSegments(bytes, segment);
  if (position == 0) {
    for (int64_t k = 0; k < segments; ++k) {
      auto [begin, end] = SegmentRange(bytes, segment, k);
      if (auto s = Track(channel.Send(next, k, buffer + begin, end - begin), ids); !s.ok()) {
        return s;
      }
    }
    return WaitAll(channel, ids);
  }
  std::vector<MessageChannel::MessageId> recvs;
  for (int64_t k = 0; k < segments; ++k) {
    auto [begin, end] = SegmentRange(bytes, segment, k);
    if (auto s = Track(channel.Recv(prev, k, buffer + begin, end - begin), recvs); !s.ok()) {
      return s;
    }
  }
  const bool forwards = position < world - 1;
  for (int64_t k = 0; k < segments; ++k) {
    if (auto s = channel.Wait(recvs[k]); !s.ok()) return s;
    if (!forwards) continue;
    auto [begin, end] = SegmentRange(bytes, segment, k);
    if (auto s = Track(channel.Send(next, k, buffer + begin, end - begin), ids); !s.ok()) {
      return s;
    }
  }
  return WaitAll(channel, ids);
}

// Round k: send to rank + 2^k, receive from rank - 2^k. After ceil(log2 P)
// rounds every rank has (transitively) heard from every other.
absl::Status RunBarrier(MessageChannel& channel) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  for (int round = 0, distance = 1; distance < world; ++round, distance <<= 1) {
    std::vector<MessageChannel::MessageId> ids;
    if (auto s = Track(channel.Recv(PositiveMod(rank - distance, world), round, nullptr, 0), ids);
        !s.ok()) {
      return s;
    }
    if (auto s = Track(channel.Send(PositiveMod(rank + distance, world), round, nullptr, 0), ids);
        !s.ok()) {
      return s;
    }
    if (auto s = WaitAll(channel, ids); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace corescape::comm
