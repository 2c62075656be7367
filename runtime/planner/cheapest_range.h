#ifndef CORESCAPE_RUNTIME_PLANNER_CHEAPEST_RANGE_H_
#define CORESCAPE_RUNTIME_PLANNER_CHEAPEST_RANGE_H_

// Where to cut a given amount of work out of a document so that moving it
// costs the fewest bytes. Moving query range [a, b) of a document to one
// server sends (b - a) Q rows and the K/V prefix [0, b): bytes
// (b - a) * q + b * kv. For a fixed number of pairs P, a head [0, b) has the
// shortest prefix but the most tokens, a tail [a, L) the fewest tokens but
// the whole prefix. In between, with rho = 1 + kv / q, the continuous
// optimum is b = rho * sqrt(2P / (rho^2 - 1)) (bf16 Q of width h and GQA
// K+V of width h/2: b ~ 1.9 sqrt(P), ~25% fewer bytes than a head range).
//
// When the range is too big for one server it will be cut into consecutive
// pieces, and each piece repeats the K/V prefix up to its own end. Then the
// sum of the ends matters: the best range moves away from the document's end
// (its owner keeps the head and the tail, whose K/V it has anyway, and the
// middle goes out in pieces), which for a 64k-token document spread over
// four servers saves ~6% against cutting off the tail and matches an
// exhaustive search.

#include <cstdint>

namespace corescape::planner {

struct QueryRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Bytes to move [begin, end) as consecutive pieces of at most piece_pairs
// pairs each, cut from the end downwards (piece_pairs <= 0: one piece).
int64_t RangeBytes(QueryRange r, int64_t q_bytes, int64_t kv_bytes, int64_t piece_pairs = 0);

// The cheapest range of a document of `length` tokens, under RangeBytes
// with piece_pairs, holding at least `edge_pairs` pairs if it starts at 0 or
// ends at `length` (the rest stays one piece) and at least `interior_pairs`
// if it is strictly inside (the rest becomes two pieces: callers add a task
// overhead). The whole document when it has fewer pairs than asked.
QueryRange CheapestRange(int64_t length, int64_t edge_pairs, int64_t interior_pairs,
                         int64_t q_bytes, int64_t kv_bytes, int64_t piece_pairs = 0);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_CHEAPEST_RANGE_H_
