#include "runtime/comm/ring_pass.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace corescape::comm {

int64_t RingPassMessageCount(const RingPass& pass) {
  return static_cast<int64_t>(pass.num_steps) *
         NumSegments(pass.layout->max_block_bytes(), pass.segment_bytes);
}

absl::Status RunRingPass(MessageChannel& channel, const RingPass& pass) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  if (pass.num_steps <= 0 || world == 1) return absl::OkStatus();
  const int next = PositiveMod(rank + 1, world);
  const int prev = PositiveMod(rank - 1, world);
  const BlockLayout& layout = *pass.layout;
  const int64_t segments_per_step = NumSegments(layout.max_block_bytes(), pass.segment_bytes);
  auto send_block = [&](int t) { return PositiveMod(rank - t + pass.shift, world); };
  auto recv_block = [&](int t) { return PositiveMod(rank - t + pass.shift - 1, world); };
  auto index = [&](int t, int64_t k) {
    return static_cast<uint32_t>(pass.first_message_index + t * segments_per_step + k);
  };

  // Sends of the current step (posted during the previous one) and of the next.
  std::vector<MessageChannel::MessageId> sends, next_sends, recvs;
  {
    const int block = send_block(0);
    const char* source = pass.send_source(0, block);
    const int64_t n = NumSegments(layout.bytes[block], pass.segment_bytes);
    for (int64_t k = 0; k < n; ++k) {
      auto [begin, end] = SegmentRange(layout.bytes[block], pass.segment_bytes, k);
      absl::StatusOr<MessageChannel::MessageId> id =
          channel.Send(next, index(0, k), source + begin, end - begin);
      if (!id.ok()) return id.status();
      sends.push_back(*id);
    }
  }
  for (int t = 0; t < pass.num_steps; ++t) {
    const int block = recv_block(t);
    DCHECK(t + 1 >= pass.num_steps || send_block(t + 1) == block);
    const int64_t block_bytes = layout.bytes[block];
    const int64_t n = NumSegments(block_bytes, pass.segment_bytes);
    char* target = pass.recv_target(t, block);
    recvs.clear();
    auto post_recv = [&](int64_t k) -> absl::Status {
      auto [begin, end] = SegmentRange(block_bytes, pass.segment_bytes, k);
      absl::StatusOr<MessageChannel::MessageId> id =
          channel.Recv(prev, index(t, k), target + begin, end - begin);
      if (!id.ok()) return id.status();
      recvs.push_back(*id);
      return absl::OkStatus();
    };
    const int64_t depth = pass.receive_depth > 0 ? std::min<int64_t>(pass.receive_depth, n) : n;
    for (int64_t k = 0; k < depth; ++k) {
      if (absl::Status s = post_recv(k); !s.ok()) return s;
    }
    next_sends.clear();
    const bool forward = t + 1 < pass.num_steps;
    const char* forward_source = forward ? pass.send_source(t + 1, block) : nullptr;
    for (int64_t k = 0; k < n; ++k) {
      if (absl::Status s = channel.Wait(recvs[k]); !s.ok()) return s;
      // Keep `depth` receives posted: the next one goes up before this
      // segment is combined, so the transfer continues meanwhile.
      if (k + depth < n) {
        if (absl::Status s = post_recv(k + depth); !s.ok()) return s;
      }
      auto [begin, end] = SegmentRange(block_bytes, pass.segment_bytes, k);
      if (pass.on_received) pass.on_received(t, block, begin, end);
      if (forward) {
        absl::StatusOr<MessageChannel::MessageId> id =
            channel.Send(next, index(t + 1, k), forward_source + begin, end - begin);
        if (!id.ok()) return id.status();
        next_sends.push_back(*id);
      }
    }
    // This step's sends read a block the next steps may overwrite (or, for
    // all-reduce, receive into); finish them before moving on.
    for (MessageChannel::MessageId id : sends) {
      if (absl::Status s = channel.Wait(id); !s.ok()) return s;
    }
    std::swap(sends, next_sends);
  }
  DCHECK(sends.empty());
  return absl::OkStatus();
}

}  // namespace corescape::comm
