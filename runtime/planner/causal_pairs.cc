#include "runtime/planner/causal_pairs.h"

#include <algorithm>
#include <cmath>

namespace corescape::planner {

int64_t CausalPairs(int64_t begin, int64_t end) {
  if (end <= begin) return 0;
  return (end - begin) * (begin + end + 1) / 2;
}

namespace {

// Root of CausalPairs(begin, e) = pairs in e, from e^2 + e = begin^2 +
// begin + 2*pairs. The double estimate is then fixed up exactly by callers.
int64_t EndEstimate(int64_t begin, int64_t pairs) {
  const long double c = static_cast<long double>(begin) * begin + begin +
                        2.0L * static_cast<long double>(pairs);
  return static_cast<int64_t>(std::floor((std::sqrt(1.0L + 4.0L * c) - 1) / 2));
}

// Root of CausalPairs(b, end) = pairs in b: b^2 + b = end^2 + end - 2*pairs.
int64_t BeginEstimate(int64_t end, int64_t pairs) {
  const long double c = static_cast<long double>(end) * end + end -
                        2.0L * static_cast<long double>(pairs);
  if (c <= 0) return 0;
  return static_cast<int64_t>(std::floor((std::sqrt(1.0L + 4.0L * c) - 1) / 2));
}

}  // namespace

int64_t EndForAtLeast(int64_t begin, int64_t pairs, int64_t limit) {
  if (pairs <= 0) return std::min(begin + 1, limit);
  int64_t e = std::clamp(EndEstimate(begin, pairs), begin + 1, limit);
  while (e > begin + 1 && CausalPairs(begin, e - 1) >= pairs) --e;
  while (e < limit && CausalPairs(begin, e) < pairs) ++e;
  return e;
}

int64_t EndForAtMost(int64_t begin, int64_t pairs, int64_t limit) {
  if (pairs <= 0) return begin;
  int64_t e = std::clamp(EndEstimate(begin, pairs), begin, limit);
  while (e < limit && CausalPairs(begin, e + 1) <= pairs) ++e;
  while (e > begin && CausalPairs(begin, e) > pairs) --e;
  return e;
}

int64_t BeginForAtLeast(int64_t end, int64_t pairs) {
  if (end <= 0) return 0;
  if (pairs <= 0) return end - 1;
  int64_t b = std::clamp(BeginEstimate(end, pairs), int64_t{0}, end - 1);
  while (b < end - 1 && CausalPairs(b + 1, end) >= pairs) ++b;
  while (b > 0 && CausalPairs(b, end) < pairs) --b;
  return b;
}

int64_t BeginForAtMost(int64_t end, int64_t pairs) {
  if (end <= 0) return 0;
  int64_t b = std::clamp(BeginEstimate(end, pairs), int64_t{0}, end);
  while (b > 0 && CausalPairs(b - 1, end) <= pairs) --b;
  while (b < end && CausalPairs(b, end) > pairs) ++b;
  return b;
}

}  // namespace corescape::planner
