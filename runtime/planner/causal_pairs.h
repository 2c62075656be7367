#ifndef CORESCAPE_RUNTIME_PLANNER_CAUSAL_PAIRS_H_
#define CORESCAPE_RUNTIME_PLANNER_CAUSAL_PAIRS_H_

// Exact integer arithmetic on causal (query, key) pairs of query ranges of a
// document. Query position i attends keys 0..i, i.e. i + 1 pairs, so the
// range [begin, end) holds (end - begin)(begin + end + 1) / 2 pairs, which
// equals q*kv - q(q-1)/2 with q = end - begin, kv = end. Solvers invert it.

#include <cstdint>

namespace corescape::planner {

// Pairs of query positions [begin, end); 0 when end <= begin.
int64_t CausalPairs(int64_t begin, int64_t end);

inline int64_t DocumentPairs(int64_t length) { return CausalPairs(0, length); }

// Smallest end in (begin, limit] with CausalPairs(begin, end) >= pairs, or
// limit when even [begin, limit) has fewer.
int64_t EndForAtLeast(int64_t begin, int64_t pairs, int64_t limit);

// Largest end in [begin, limit] with CausalPairs(begin, end) <= pairs.
int64_t EndForAtMost(int64_t begin, int64_t pairs, int64_t limit);

// Largest begin in [0, end) with CausalPairs(begin, end) >= pairs, or 0 when
// even [0, end) has fewer.
int64_t BeginForAtLeast(int64_t end, int64_t pairs);

// Smallest begin in [0, end] with CausalPairs(begin, end) <= pairs.
int64_t BeginForAtMost(int64_t end, int64_t pairs);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_CAUSAL_PAIRS_H_
