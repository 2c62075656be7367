// The all-reduce's reduction kernel (comm::AddFloats, out = first + second,
// in place as the ring uses it) against the plain loop it replaced, timed
// alternately in one process. The plain loop is what -O2 makes of it: scalar,
// because `out` may alias an input. One JSON line per size.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "bench/bench_main.h"
#include "runtime/comm/reduce_kernels.h"

ABSL_FLAG(double, seconds_per_size, 0.2, "time per kernel and size");

namespace corescape::bench {
namespace {

__attribute__((noinline)) void PlainAdd(const float* first, const float* second, float* out,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = first[i] + second[i];
}

// Best time of a few rounds of `calls` calls (the machine is shared).
template <typename Fn>
double BestSeconds(Fn fn, int calls) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const absl::Time t0 = absl::Now();
    for (int i = 0; i < calls; ++i) fn();
    best = std::min(best, absl::ToDoubleSeconds(absl::Now() - t0) / calls);
  }
  return best;
}

}  // namespace

int RunBenchmark() {
  for (int64_t bytes : {int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20}) {
    const int64_t n = bytes / 4;
    std::vector<float> arriving(n, 0.5f), own(n, 0.25f);
    const int calls = std::max<int64_t>(
        1, static_cast<int64_t>(absl::GetFlag(FLAGS_seconds_per_size) / 5 * 4e9 / bytes));
    const double plain = BestSeconds([&] { PlainAdd(arriving.data(), own.data(), own.data(), n); },
                                     calls);
    const double vector = BestSeconds(
        [&] { comm::AddFloats(arriving.data(), own.data(), own.data(), n); }, calls);
    // Bytes the kernel moves: two reads and one write per element.
    std::printf("{\"kernel\": \"add_floats\", \"bytes\": %lld, \"plain_gbs\": %.3f, "
                "\"vector_gbs\": %.3f, \"vector_vs_plain\": %.2f}\n",
                static_cast<long long>(bytes), 3.0 * bytes / plain / 1e9,
                3.0 * bytes / vector / 1e9, plain / vector);
  }
  return 0;
}

}  // namespace corescape::bench
