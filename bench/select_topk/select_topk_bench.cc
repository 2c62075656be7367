// SCAPE's host top-k at the sizes a step ranks: one rank's range of
// statistics (|m + scaled e|-like: non-negative, many near-ties), k = d·n.
// Prints the time per entry on this thread and on thread pools of each
// size in --threads, their ratio to this thread's (same run), and summing
// the statistic once (the memory floor). Every pool's selection is checked
// against this thread's. Last line: one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/best_seconds.h"
#include "runtime/base/thread_pool.h"
#include "runtime/optim/sparse_mask.h"

ABSL_FLAG(int64_t, range, 20'900'000, "entries in the rank's range (small: 20.9M at P = 2)");
ABSL_FLAG(double, density, 0.1, "fraction of the range selected");
ABSL_FLAG(std::string, threads, "2,4", "thread pool sizes to time beside one thread");
ABSL_FLAG(int, repeats, 5, "timed runs per form (the best is reported)");

namespace corescape::bench {
namespace {

}  // namespace

int RunBenchmark() {
  const int64_t range = absl::GetFlag(FLAGS_range);
  const double density = absl::GetFlag(FLAGS_density);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<int> pool_sizes;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',', absl::SkipEmpty())) {
    int threads = 0;
    if (!absl::SimpleAtoi(part, &threads) || threads < 1 || threads > 256) {
      std::fprintf(stderr, "--threads: '%s' is not a thread count in [1, 256]\n",
                   std::string(part).c_str());
      return 2;
    }
    pool_sizes.push_back(threads);
  }
  if (range <= 0 || range > (int64_t{1} << 31) - 1 || !(density > 0 && density <= 1)) {
    std::fprintf(stderr, "--range must be in (0, 2^31), --density in (0, 1]\n");
    return 2;
  }
  std::mt19937 rng(7);
  std::vector<float> statistic(range);
  // Magnitudes spread over a few decades, rounded so ties occur.
  std::lognormal_distribution<float> magnitude(-8.0f, 2.0f);
  for (float& x : statistic) x = std::ldexp(std::round(std::ldexp(magnitude(rng), 30)), -30);
  const int64_t k = static_cast<int64_t>(density * static_cast<double>(range));

  volatile float sink = 0;
  const double read_s = BestSeconds(repeats, [&] {
    float sum = 0;
    for (float x : statistic) sum += x;
    sink = sum;
  });
  std::vector<int64_t> serial;
  const double serial_s = BestSeconds(repeats, [&] { serial = optim::SelectTopK(statistic, 0, k); });
  std::printf("range %lld, k %lld (d = %.3f), %d hardware threads; reading the statistic once: "
              "%.2f ns/entry\n",
              static_cast<long long>(range), static_cast<long long>(k), density,
              DefaultThreadCount(), 1e9 * read_s / range);
  std::printf("%-12s %12s %14s %12s\n", "threads", "ns/entry", "vs 1 thread", "vs reading");
  std::printf("%-12d %12.2f %14.2f %12.1f\n", 1, 1e9 * serial_s / range, 1.0, serial_s / read_s);
  std::string json = absl::StrCat("{\"range\": ", range, ", \"k\": ", k, ", \"read_ns\": ",
                                  1e9 * read_s / range, ", \"threads_1_ns\": ", 1e9 * serial_s / range);
  for (int threads : pool_sizes) {
    ThreadPool pool(threads);
    std::vector<int64_t> pooled;
    const double pooled_s =
        BestSeconds(repeats, [&] { pooled = optim::SelectTopK(statistic, 0, k, &pool); });
    if (pooled != serial) {
      std::fprintf(stderr, "%d threads: a different selection than one thread's\n", threads);
      return 1;
    }
    std::printf("%-12d %12.2f %14.2f %12.1f\n", threads, 1e9 * pooled_s / range,
                serial_s / pooled_s, pooled_s / read_s);
    absl::StrAppend(&json, ", \"threads_", threads, "_ns\": ", 1e9 * pooled_s / range,
                    ", \"threads_", threads, "_speedup\": ", serial_s / pooled_s);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}

}  // namespace corescape::bench
