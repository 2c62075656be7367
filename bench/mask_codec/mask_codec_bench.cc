// SCAPE's mask coding per step at the sizes a step codes: one rank's part
// of d·N indices over its range, with the previous step's part (about half
// the entries kept). Prints each encoding's encode and decode time per
// index beside copying the indices (the memory floor, same run), and the
// automatic choice's. Last line: one JSON object.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "bench/best_seconds.h"
#include "runtime/optim/mask_codec.h"

ABSL_FLAG(int64_t, range, 20'900'000, "entries in the rank's range (small: 20.9M at P = 1)");
ABSL_FLAG(double, density, 0.1, "fraction of the range in the mask");
ABSL_FLAG(int, repeats, 5, "timed runs per form (the best is reported)");

namespace corescape::bench {
namespace {

// `count` sorted unique indices of [0, range).
std::vector<int64_t> RandomMask(int64_t range, int64_t count, std::mt19937_64& rng) {
  std::vector<int64_t> out;
  out.reserve(count);
  // Reservoir-free: a Bernoulli pass at the right rate, trimmed or topped up.
  std::bernoulli_distribution keep(static_cast<double>(count) / static_cast<double>(range));
  for (int64_t i = 0; i < range && static_cast<int64_t>(out.size()) < count; ++i) {
    if (keep(rng)) out.push_back(i);
  }
  return out;
}

}  // namespace

int RunBenchmark() {
  const int64_t range = absl::GetFlag(FLAGS_range);
  const double density = absl::GetFlag(FLAGS_density);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  if (range <= 0 || range > (int64_t{1} << 32) || !(density > 0 && density <= 1)) {
    std::fprintf(stderr, "--range must be in (0, 2^32], --density in (0, 1]\n");
    return 2;
  }
  std::mt19937_64 rng(1);
  const int64_t count = static_cast<int64_t>(density * static_cast<double>(range));
  const std::vector<int64_t> previous = RandomMask(range, count, rng);
  // Half of the previous mask stays, the rest moves elsewhere.
  std::vector<int64_t> mask;
  {
    std::vector<int64_t> kept, fresh = RandomMask(range, count, rng);
    for (size_t i = 0; i < previous.size(); i += 2) kept.push_back(previous[i]);
    std::set_union(kept.begin(), kept.end(), fresh.begin(),
                   fresh.begin() + std::min<size_t>(fresh.size(), count - kept.size()),
                   std::back_inserter(mask));
  }
  const int64_t n = static_cast<int64_t>(mask.size());
  std::vector<int64_t> copy(n);
  const double copy_s = BestSeconds(repeats, [&] { std::copy(mask.begin(), mask.end(), copy.begin()); });
  std::printf("range %lld, %lld indices (d = %.3f); copying them: %.2f ns/index\n",
              static_cast<long long>(range), static_cast<long long>(n), density, 1e9 * copy_s / n);
  std::printf("%-22s %8s %12s %12s %10s %10s\n", "encoding", "bytes", "encode ns/i", "decode ns/i",
              "enc/copy", "dec/copy");
  std::string json = absl::StrCat("{\"indices\": ", n, ", \"copy_ns\": ", 1e9 * copy_s / n);
  const optim::MaskPartitionView view{0, range, mask};
  struct Form {
    const char* name;
    std::optional<optim::MaskEncoding> force;
  };
  for (const Form& form : {Form{"bitmask", optim::MaskEncoding::kBitmask},
                           Form{"index-list", optim::MaskEncoding::kIndexList},
                           Form{"delta-indices", optim::MaskEncoding::kDeltaIndices},
                           Form{"change-from-previous", optim::MaskEncoding::kChangeFromPrevious},
                           Form{"automatic", std::nullopt}}) {
    std::string encoded;
    bool failed = false;
    const double encode_s = BestSeconds(repeats, [&] {
      auto e = optim::EncodeMaskPartition(optim::MaskPartitionHeader{}, view, &previous, form.force);
      if (e.ok()) encoded = *std::move(e); else failed = true;
    });
    bool decoded_ok = true;
    const double decode_s = BestSeconds(repeats, [&] {
      auto d = optim::DecodeMaskPartition(encoded, 0, range, &previous);
      decoded_ok = decoded_ok && d.ok() && d->indices == mask;
    });
    if (failed || !decoded_ok) {
      std::fprintf(stderr, "%s: the round trip failed\n", form.name);
      return 1;
    }
    std::printf("%-22s %8zu %12.2f %12.2f %10.1f %10.1f\n", form.name, encoded.size(), 1e9 * encode_s / n,
                1e9 * decode_s / n, encode_s / copy_s, decode_s / copy_s);
    absl::StrAppend(&json, ", \"", form.name, "_encode_ns\": ", 1e9 * encode_s / n, ", \"", form.name,
                    "_decode_ns\": ", 1e9 * decode_s / n);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}

}  // namespace corescape::bench
