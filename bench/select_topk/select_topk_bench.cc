// SCAPE's host top-k at the sizes a step ranks: one rank's range of
// statistics (|m + scaled e|-like: non-negative, many near-ties), k = d·n.
// Times SelectTopK (one pass above a sampled threshold) against its radix
// passes over the whole range (SelectTopKByRadix), on this thread and on
// thread pools of each size in --threads, as ratios to the radix passes on
// one thread and on the same threads (same run), and summing the statistic
// once (the memory floor). Every selection is checked against the radix
// passes' on one thread. Last line: one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
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
  std::printf("range %lld, k %lld (d = %.3f), %d hardware threads; reading the statistic once: "
              "%.2f ns/entry\n",
              static_cast<long long>(range), static_cast<long long>(k), density,
              DefaultThreadCount(), 1e9 * read_s / range);
  std::printf("%-8s %-10s %12s %18s %16s %12s\n", "threads", "method", "ns/entry",
              "vs radix 1 thread", "vs radix here", "vs reading");
  std::string json = absl::StrCat("{\"range\": ", range, ", \"k\": ", k, ", \"read_ns\": ",
                                  1e9 * read_s / range);
  std::vector<int64_t> reference;
  double radix_serial_s = 0;
  std::vector<int> all_sizes = {1};
  all_sizes.insert(all_sizes.end(), pool_sizes.begin(), pool_sizes.end());
  for (int threads : all_sizes) {
    std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
    std::vector<int64_t> radix, sampled;
    const double radix_s = BestSeconds(
        repeats, [&] { radix = optim::SelectTopKByRadix(statistic, 0, k, pool.get()); });
    const double sampled_s =
        BestSeconds(repeats, [&] { sampled = optim::SelectTopK(statistic, 0, k, pool.get()); });
    if (threads == 1) {
      reference = radix;
      radix_serial_s = radix_s;
    }
    if (radix != reference || sampled != reference) {
      std::fprintf(stderr, "%d threads: a different selection than the radix passes' on one\n",
                   threads);
      return 1;
    }
    for (const auto& [method, seconds] :
         {std::pair<const char*, double>{"radix", radix_s}, {"sampled", sampled_s}}) {
      std::printf("%-8d %-10s %12.2f %18.2f %16.2f %12.1f\n", threads, method,
                  1e9 * seconds / range, radix_serial_s / seconds, radix_s / seconds,
                  seconds / read_s);
      absl::StrAppend(&json, ", \"", method, "_", threads, "_ns\": ", 1e9 * seconds / range);
    }
    absl::StrAppend(&json, ", \"sampled_speedup_", threads, "\": ", radix_s / sampled_s);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}

}  // namespace corescape::bench
