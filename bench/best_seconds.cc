#include "bench/best_seconds.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace corescape::bench {

double BestSeconds(int repeats, const std::function<void()>& fn) {
  if (repeats > 1) fn();
  double best = INFINITY;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace corescape::bench
