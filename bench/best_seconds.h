// How the CPU benchmarks time a piece of work.
#ifndef CORESCAPE_BENCH_BEST_SECONDS_H_
#define CORESCAPE_BENCH_BEST_SECONDS_H_

#include <functional>

namespace corescape::bench {

// The shortest wall time, in seconds, of `repeats` runs of `fn` (at least
// one), after one untimed warm-up run when repeats > 1.
double BestSeconds(int repeats, const std::function<void()>& fn);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_BEST_SECONDS_H_
