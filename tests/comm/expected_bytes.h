#ifndef CORESCAPE_TESTS_COMM_EXPECTED_BYTES_H_
#define CORESCAPE_TESTS_COMM_EXPECTED_BYTES_H_

// Bytes one rank must send and receive in each collective, written down
// from the schedules in docs/data_plane.md (independently of the code that
// runs them), for checking the communicator's byte counters exactly.

#include <cstdint>
#include <vector>

#include "runtime/comm/collective_algorithms.h"

namespace corescape::comm {

struct ExpectedBytes {
  int64_t sent = 0;
  int64_t received = 0;
};

// count floats split into world blocks, the first count % world one longer.
inline int64_t BalancedBlockBytes(int64_t count, int world, int block) {
  return (count / world + (block < count % world ? 1 : 0)) * 4;
}

// Recursive-doubling gathers (power-of-two P, at most doubling_bytes in
// all): in round k rank r sends its group of 2^k blocks, the one starting at
// r with its low k bits cleared.
inline bool DoublingGather(int world, int64_t total_bytes, const AlgorithmSettings& s) {
  return world > 1 && (world & (world - 1)) == 0 && total_bytes <= s.doubling_bytes;
}
template <typename BlockBytes>
int64_t DoublingGatherSent(int world, int rank, BlockBytes block_bytes) {
  int64_t sent = 0;
  for (int group = 1; group < world; group *= 2) {
    const int first = rank / group * group;
    for (int b = first; b < first + group; ++b) sent += block_bytes(b);
  }
  return sent;
}

inline ExpectedBytes AllReduceBytes(int64_t count, int world, int rank,
                                    const AlgorithmSettings& s) {
  const int64_t n = count * 4;
  if (world == 1 || count == 0) return {};
  if (n <= s.small_bytes) {
    // Recursive doubling: a rank beyond the largest power of two sends and
    // receives the vector once; the others once per round, plus once more
    // each way if a folded rank leans on them.
    int pow2 = 1, rounds = 0;
    while (pow2 * 2 <= world) pow2 *= 2, ++rounds;
    int64_t messages = rank >= pow2 ? 1 : rounds + (rank + pow2 < world ? 1 : 0);
    return {messages * n, messages * n};
  }
  // Ring reduce-scatter: every block but rank - 1's in, every block but our
  // own out; then the gather: every block but ours in, and out, by ring,
  // every block but rank + 1's.
  auto block = [&](int b) { return BalancedBlockBytes(count, world, (b + world) % world); };
  const int64_t received = 2 * n - block(rank) - block(rank - 1);
  if (DoublingGather(world, n, s)) {
    return {n - block(rank) + DoublingGatherSent(world, rank, block), received};
  }
  return {2 * n - block(rank) - block(rank + 1), received};
}

inline ExpectedBytes AllGatherVBytes(const std::vector<int64_t>& bytes, int rank,
                                     const AlgorithmSettings& s) {
  const int world = static_cast<int>(bytes.size());
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  if (world == 1) return {};
  const int64_t received = total - bytes[rank];
  if (total <= s.small_bytes) return {(world - 1) * bytes[rank], received};
  if (DoublingGather(world, total, s)) {
    return {DoublingGatherSent(world, rank, [&](int b) { return bytes[b]; }), received};
  }
  return {total - bytes[(rank + 1) % world], received};
}

inline ExpectedBytes ReduceScatterBytes(const std::vector<int64_t>& counts, int rank,
                                        const AlgorithmSettings& s) {
  const int world = static_cast<int>(counts.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c * 4;
  if (world == 1) return {};
  const int64_t sent = total - counts[rank] * 4;
  if (total <= s.small_bytes) return {sent, (world - 1) * counts[rank] * 4};
  return {sent, total - counts[(rank + world - 1) % world] * 4};
}

inline ExpectedBytes BroadcastBytes(int64_t bytes, int world, int rank, int root,
                                    const AlgorithmSettings& s) {
  if (world == 1 || bytes == 0) return {};
  const int position = (rank - root + world) % world;
  const int64_t received = position == 0 ? 0 : bytes;
  if (bytes <= s.small_bytes) return {position == 0 ? (world - 1) * bytes : 0, received};
  return {position < world - 1 ? bytes : 0, received};  // chain
}

}  // namespace corescape::comm

#endif  // CORESCAPE_TESTS_COMM_EXPECTED_BYTES_H_
