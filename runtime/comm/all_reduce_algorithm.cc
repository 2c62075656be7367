// All-reduce: recursive doubling for small buffers, pipelined ring
// reduce-scatter + all-gather (ring or recursive doubling) for large ones.
#include "runtime/comm/algorithm_util.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/doubling_gather.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/ring_pass.h"

namespace corescape::comm {
namespace {

// Ranks r >= P2 (the largest power of two <= P) first hand their vector to
// r - P2, which adds it; the P2 ranks then exchange whole vectors with
// partner r ^ mask for mask = 1, 2, ..., each adding (lower rank's value) +
// (higher rank's value) so both partners compute the same bits; at the end
// the folded ranks get the result back. Message indices: 0 fold-in, 1..L
// rounds, L + 1 fold-out.
absl::Status RecursiveDoublingAllReduce(MessageChannel& channel, float* data,
                                        int64_t count, ReduceOp op) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  int pow2 = 1;
  while (pow2 * 2 <= world) pow2 *= 2;
  int rounds = 0;
  while ((1 << rounds) < pow2) ++rounds;
  const uint32_t fold_out_index = static_cast<uint32_t>(rounds + 1);

  if (rank >= pow2) {
    const int partner = rank - pow2;
    std::vector<MessageChannel::MessageId> ids;
    if (auto s = Track(channel.Send(partner, 0, data, bytes), ids); !s.ok()) return s;
    if (auto s = WaitAll(channel, ids); !s.ok()) return s;
    ids.clear();
    if (auto s = Track(channel.Recv(partner, fold_out_index, data, bytes), ids); !s.ok()) {
      return s;
    }
    return WaitAll(channel, ids);
  }

  float* incoming = static_cast<float*>(channel.Scratch(0, bytes));
  const bool has_folded_partner = rank + pow2 < world;
  if (has_folded_partner) {
    std::vector<MessageChannel::MessageId> ids;
    if (auto s = Track(channel.Recv(rank + pow2, 0, incoming, bytes), ids); !s.ok()) return s;
    if (auto s = WaitAll(channel, ids); !s.ok()) return s;
    AddFloats(data, incoming, data, count);  // rank before rank + pow2
  }
  for (int round = 1, mask = 1; mask < pow2; ++round, mask <<= 1) {
    const int partner = rank ^ mask;
    std::vector<MessageChannel::MessageId> ids;
    if (auto s = Track(channel.Recv(partner, round, incoming, bytes), ids); !s.ok()) return s;
    if (auto s = Track(channel.Send(partner, round, data, bytes), ids); !s.ok()) return s;
    if (auto s = WaitAll(channel, ids); !s.ok()) return s;
    if (rank < partner) {
      AddFloats(data, incoming, data, count);
    } else {
      AddFloats(incoming, data, data, count);
    }
  }
  if (op == ReduceOp::kMean) DivideFloats(data, count, static_cast<float>(world));
  if (has_folded_partner) {
    std::vector<MessageChannel::MessageId> ids;
    if (auto s = Track(channel.Send(rank + pow2, fold_out_index, data, bytes), ids); !s.ok()) {
      return s;
    }
    return WaitAll(channel, ids);
  }
  return absl::OkStatus();
}

// Reduce-scatter over P balanced chunks (rank r ends owning chunk r; chunk c
// is summed along the ring starting at rank c + 1, each step adding
// (arriving partial) + (own value)), then the owners' chunks circulate:
// further along the same ring, or by recursive doubling.
absl::Status RingAllReduce(MessageChannel& channel, const AlgorithmSettings& settings,
                           float* data, int64_t count, ReduceOp op) {
  const int world = channel.world_size();
  const BlockLayout layout = BlockLayout::Balanced(count, world, sizeof(float));
  char* base = reinterpret_cast<char*>(data);
  const bool doubling_gather =
      UseDoublingGather(world, layout.total_bytes(), settings.doubling_bytes);
  RingPass pass;
  pass.num_steps = doubling_gather ? world - 1 : 2 * (world - 1);
  pass.shift = -1;
  pass.layout = &layout;
  pass.receive_depth = settings.ring_receive_depth;
  // Segments sized for the full two-half ring either way, so the indices of
  // a doubling gather after the reduce-scatter still fit.
  pass.segment_bytes = ChooseSegmentBytes(layout.max_block_bytes(), settings.segment_bytes,
                                          2 * (world - 1), sizeof(float), kMessageIndexLimit);
  char* scratch = static_cast<char*>(channel.Scratch(0, layout.max_block_bytes()));
  const int last_reduce_step = world - 2;
  pass.send_source = [&](int, int block) -> const char* { return base + layout.offset[block]; };
  pass.recv_target = [&](int step, int block) -> char* {
    return step <= last_reduce_step ? scratch : base + layout.offset[block];
  };
  pass.on_received = [&](int step, int block, int64_t begin, int64_t end) {
    if (step > last_reduce_step) return;
    const float* arriving = reinterpret_cast<const float*>(scratch + begin);
    float* own = reinterpret_cast<float*>(base + layout.offset[block] + begin);
    const int64_t n = (end - begin) / static_cast<int64_t>(sizeof(float));
    if (op == ReduceOp::kMean && step == last_reduce_step) {
      AddThenDivideFloats(arriving, own, own, n, static_cast<float>(world));
    } else {
      AddFloats(arriving, own, own, n);
    }
  };
  if (absl::Status s = RunRingPass(channel, pass); !s.ok() || !doubling_gather) return s;
  return RunDoublingGather(channel, layout, base,
                           static_cast<uint32_t>(RingPassMessageCount(pass)));
}

}  // namespace

absl::Status RunAllReduce(MessageChannel& channel, const AlgorithmSettings& settings,
                          float* data, int64_t count, ReduceOp op) {
  // x / 1 == x, so one rank has nothing to do even for a mean.
  if (count == 0 || channel.world_size() == 1) return absl::OkStatus();
  if (count * static_cast<int64_t>(sizeof(float)) <= settings.small_bytes) {
    return RecursiveDoublingAllReduce(channel, data, count, op);
  }
  return RingAllReduce(channel, settings, data, count, op);
}

}  // namespace corescape::comm
