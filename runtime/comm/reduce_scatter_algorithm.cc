// Reduce-scatter: direct (sum in rank order) for small totals, pipelined
// ring otherwise.
#include <cstring>

#include "runtime/comm/algorithm_util.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/ring_pass.h"

namespace corescape::comm {
namespace {

// Every rank sends block b of its input to rank b and sums the P pieces of
// its own block as x_0 + x_1 + ... + x_{P-1}.
absl::Status DirectReduceScatter(MessageChannel& channel, const float* send, float* recv,
                                 const BlockLayout& layout, ReduceOp op) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  const int64_t my_bytes = layout.bytes[rank];
  const int64_t n = my_bytes / static_cast<int64_t>(sizeof(float));
  const char* input = reinterpret_cast<const char*>(send);
  char* pieces = static_cast<char*>(channel.Scratch(0, my_bytes * world));
  std::vector<MessageChannel::MessageId> ids;
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    if (auto s = Track(channel.Recv(peer, 0, pieces + peer * my_bytes, my_bytes), ids); !s.ok()) {
      return s;
    }
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    if (auto s = Track(channel.Send(peer, 0, input + layout.offset[peer], layout.bytes[peer]), ids);
        !s.ok()) {
      return s;
    }
  }
  if (auto s = WaitAll(channel, ids); !s.ok()) return s;
  auto piece = [&](int r) -> const float* {
    return r == rank ? reinterpret_cast<const float*>(input + layout.offset[rank])
                     : reinterpret_cast<const float*>(pieces + r * my_bytes);
  };
  for (int r = 1; r < world; ++r) {
    const float* acc = r == 1 ? piece(0) : recv;
    if (op == ReduceOp::kMean && r == world - 1) {
      AddThenDivideFloats(acc, piece(r), recv, n, static_cast<float>(world));
    } else {
      AddFloats(acc, piece(r), recv, n);
    }
  }
  return absl::OkStatus();
}

// Block b's partial sum starts at rank b + 1 and travels the ring, each rank
// adding (arriving partial) + (own piece); the last addition lands in recv
// at rank b. Partials alternate between two work buffers because the one
// produced at step t is still being sent during step t + 1.
absl::Status RingReduceScatter(MessageChannel& channel, const AlgorithmSettings& settings,
                               const float* send, float* recv, const BlockLayout& layout,
                               ReduceOp op) {
  const int world = channel.world_size();
  const char* input = reinterpret_cast<const char*>(send);
  const int64_t max_block = layout.max_block_bytes();
  char* arriving = static_cast<char*>(channel.Scratch(0, max_block));
  char* work[2] = {static_cast<char*>(channel.Scratch(1, max_block)),
                   static_cast<char*>(channel.Scratch(2, max_block))};
  const int last_step = world - 2;
  RingPass pass;
  pass.num_steps = world - 1;
  pass.shift = -1;
  pass.layout = &layout;
  pass.receive_depth = settings.ring_receive_depth;
  pass.segment_bytes = ChooseSegmentBytes(max_block, settings.segment_bytes, pass.num_steps,
                                          sizeof(float), kMessageIndexLimit);
  auto output = [&](int step) -> char* {
    return step == last_step ? reinterpret_cast<char*>(recv) : work[step % 2];
  };
  pass.send_source = [&](int step, int block) -> const char* {
    return step == 0 ? input + layout.offset[block] : work[(step - 1) % 2];
  };
  pass.recv_target = [&](int, int) -> char* { return arriving; };
  pass.on_received = [&](int step, int block, int64_t begin, int64_t end) {
    const float* in = reinterpret_cast<const float*>(arriving + begin);
    const float* own = reinterpret_cast<const float*>(input + layout.offset[block] + begin);
    float* out = reinterpret_cast<float*>(output(step) + begin);
    const int64_t n = (end - begin) / static_cast<int64_t>(sizeof(float));
    if (op == ReduceOp::kMean && step == last_step) {
      AddThenDivideFloats(in, own, out, n, static_cast<float>(world));
    } else {
      AddFloats(in, own, out, n);
    }
  };
  return RunRingPass(channel, pass);
}

}  // namespace

absl::Status RunReduceScatter(MessageChannel& channel, const AlgorithmSettings& settings,
                              const float* send, float* recv,
                              absl::Span<const int64_t> counts_per_rank, ReduceOp op) {
  absl::StatusOr<BlockLayout> layout = BlockLayout::FromSizes(counts_per_rank, sizeof(float));
  if (!layout.ok()) return layout.status();
  if (channel.world_size() == 1) {
    if (layout->bytes[0] > 0) std::memcpy(recv, send, layout->bytes[0]);
    return absl::OkStatus();
  }
  if (layout->total_bytes() <= settings.small_bytes) {
    return DirectReduceScatter(channel, send, recv, *layout, op);
  }
  return RingReduceScatter(channel, settings, send, recv, *layout, op);
}

}  // namespace corescape::comm
