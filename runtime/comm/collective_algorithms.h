#ifndef CORESCAPE_RUNTIME_COMM_COLLECTIVE_ALGORITHMS_H_
#define CORESCAPE_RUNTIME_COMM_COLLECTIVE_ALGORITHMS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/comm/comm_types.h"
#include "runtime/comm/message_channel.h"

namespace corescape::comm {

// Tuning every rank must share (the handshake compares a fingerprint of it).
struct AlgorithmSettings {
  // Payloads up to this many bytes use the latency-optimal algorithms.
  int64_t small_bytes = 64 << 10;
  // Pipeline segment of the ring and chain algorithms.
  int64_t segment_bytes = 1 << 20;
  // Gathers of at most this many bytes in all (all-gather-v, and the second
  // half of a ring all-reduce) use recursive doubling when the world size is
  // a power of two: log2 P rounds instead of P - 1 ring steps, the same
  // bytes. 0 keeps the ring at every size.
  int64_t doubling_bytes = 4 << 20;
  // Segments a ring step keeps posted for receiving ahead of the one being
  // combined; 0 posts every segment of the step at once.
  int ring_receive_depth = 0;
};

// The CPU collectives over a MessageChannel. Arguments must already be
// validated (see the Validate* functions) and identical on every rank where
// the API says so. Every result is deterministic: the reduction order is a
// function of (world size, count, settings) only, never of timing, and each
// element is reduced on one rank (or symmetrically, with operands ordered by
// rank) so every rank ends with the same bits.
//
// all-reduce, count*4 <= small_bytes: recursive doubling (log2 P rounds;
//   ranks beyond the largest power of two fold into a partner first).
// all-reduce, larger: ring reduce-scatter then an all-gather of the reduced
//   chunks (recursive doubling up to doubling_bytes when P is a power of
//   two, else the ring), pipelined in segments: each rank sends and
//   receives 2(P-1)/P of the buffer. The gather adds nothing, so the
//   reduction order is the ring's whichever gather runs.
// reduce-scatter: direct (each rank sums its block in rank order) when small,
//   else the ring reduce-scatter.
// all-gather-v: direct (everyone sends its block to everyone) when small,
//   else recursive doubling (power-of-two P, up to doubling_bytes), else a
//   pipelined ring.
// broadcast: root sends to everyone when small, else a pipelined chain.
// barrier: dissemination, ceil(log2 P) rounds of empty messages.
absl::Status RunAllReduce(MessageChannel& channel, const AlgorithmSettings& settings,
                          float* data, int64_t count, ReduceOp op);
// `send` is copied into its slot of `recv` unless it already is that slot.
absl::Status RunAllGatherV(MessageChannel& channel, const AlgorithmSettings& settings,
                           const void* send, void* recv,
                           absl::Span<const int64_t> recv_bytes_per_rank);
absl::Status RunReduceScatter(MessageChannel& channel, const AlgorithmSettings& settings,
                              const float* send, float* recv,
                              absl::Span<const int64_t> counts_per_rank, ReduceOp op);
absl::Status RunBroadcast(MessageChannel& channel, const AlgorithmSettings& settings,
                          void* data, int64_t bytes, int root);
absl::Status RunBarrier(MessageChannel& channel);

// Argument checks (InvalidArgument naming the bad argument).
absl::Status ValidateSettings(const AlgorithmSettings& settings);
// Every field of the settings, for the handshake's fingerprint.
std::string DescribeSettings(const AlgorithmSettings& settings);
absl::Status ValidateAllReduceArgs(const float* data, int64_t count);
absl::Status ValidateAllGatherVArgs(int rank, int world_size, const void* send,
                                    int64_t send_bytes, const void* recv,
                                    absl::Span<const int64_t> recv_bytes_per_rank);
absl::Status ValidateReduceScatterArgs(int rank, int world_size, const float* send,
                                       const float* recv,
                                       absl::Span<const int64_t> counts_per_rank);
absl::Status ValidateBroadcastArgs(int world_size, const void* data, int64_t bytes, int root);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_COLLECTIVE_ALGORITHMS_H_
