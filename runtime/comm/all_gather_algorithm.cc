// All-gather-v: direct exchange for small totals, recursive doubling for
// mid-size ones (power-of-two P), pipelined ring otherwise.
#include <cstring>

#include "runtime/comm/algorithm_util.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/doubling_gather.h"
#include "runtime/comm/ring_pass.h"

namespace corescape::comm {

absl::Status RunAllGatherV(MessageChannel& channel, const AlgorithmSettings& settings,
                           const void* send, void* recv,
                           absl::Span<const int64_t> recv_bytes_per_rank) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  absl::StatusOr<BlockLayout> layout = BlockLayout::FromSizes(recv_bytes_per_rank);
  if (!layout.ok()) return layout.status();
  char* out = static_cast<char*>(recv);
  char* own_slot = out + layout->offset[rank];
  if (layout->bytes[rank] > 0 && send != own_slot) {
    std::memcpy(own_slot, send, layout->bytes[rank]);
  }
  if (world == 1) return absl::OkStatus();

  if (layout->total_bytes() <= settings.small_bytes) {
    // Every block goes straight to every rank: one round of latency.
    std::vector<MessageChannel::MessageId> ids;
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      if (auto s = Track(channel.Recv(peer, 0, out + layout->offset[peer], layout->bytes[peer]),
                         ids);
          !s.ok()) {
        return s;
      }
    }
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      if (auto s = Track(channel.Send(peer, 0, own_slot, layout->bytes[rank]), ids); !s.ok()) {
        return s;
      }
    }
    return WaitAll(channel, ids);
  }

  if (UseDoublingGather(world, layout->total_bytes(), settings.doubling_bytes)) {
    return RunDoublingGather(channel, *layout, out, 0);
  }
  RingPass pass;
  pass.num_steps = world - 1;
  pass.shift = 0;
  pass.layout = &*layout;
  pass.receive_depth = settings.ring_receive_depth;
  pass.segment_bytes = ChooseSegmentBytes(layout->max_block_bytes(), settings.segment_bytes,
                                          pass.num_steps, 1, kMessageIndexLimit);
  pass.send_source = [&](int, int block) -> const char* { return out + layout->offset[block]; };
  pass.recv_target = [&](int, int block) -> char* { return out + layout->offset[block]; };
  return RunRingPass(channel, pass);
}

}  // namespace corescape::comm
