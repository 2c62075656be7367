#ifndef CORESCAPE_RUNTIME_COMM_RING_PASS_H_
#define CORESCAPE_RUNTIME_COMM_RING_PASS_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/message_channel.h"

namespace corescape::comm {

// A pipelined ring: at step t every rank sends block
//   send_block(t) = (rank - t + shift) mod P   to rank + 1, and receives
//   recv_block(t) = (rank - t + shift - 1) mod P from rank - 1,
// so what arrives at step t is what goes out at step t + 1. Blocks are cut
// into segments; segment k of step t + 1 is sent as soon as segment k of
// step t has arrived and been combined, so forwarding overlaps receiving and
// the reduction overlaps the transfer. Reduce-scatter (shift -1), the
// all-gather half of all-reduce, and all-gather (shift 0) are ring passes.
struct RingPass {
  int num_steps = 0;
  int shift = 0;
  const BlockLayout* layout = nullptr;
  int64_t segment_bytes = 1;   // from ChooseSegmentBytes
  uint32_t first_message_index = 0;
  // Receives kept posted ahead of the segment being combined; 0: all of a
  // step's segments at once.
  int receive_depth = 0;

  // Start of block `block` as sent at `step`.
  std::function<const char*(int step, int block)> send_source;
  // Where block `block` arriving at `step` is written (scratch for reduce
  // steps, the output for copy steps).
  std::function<char*(int step, int block)> recv_target;
  // Called once bytes [begin, end) of the block have arrived, before they
  // are forwarded; reduce steps combine them here. May be empty.
  std::function<void(int step, int block, int64_t begin, int64_t end)> on_received;
};

// Message indices used: first_message_index + step * S + segment, with
// S = NumSegments(layout->max_block_bytes(), segment_bytes).
int64_t RingPassMessageCount(const RingPass& pass);

absl::Status RunRingPass(MessageChannel& channel, const RingPass& pass);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_RING_PASS_H_
