#ifndef CORESCAPE_BENCH_PLANNER_DOCUMENT_SAMPLES_H_
#define CORESCAPE_BENCH_PLANNER_DOCUMENT_SAMPLES_H_

// DistCA's shipped document-length samples (../shared/data) and per-rank
// micro-batches drawn from them, shared by the planner benchmark and the
// scale simulator.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace corescape::bench {

// The directory holding distca_*.json/csv: `flag_value` if non-empty, else
// $BUILD_WORKSPACE_DIRECTORY/../shared/data (set by `bazel run`), else
// ../shared/data.
std::string DataDirectory(const std::string& flag_value);

// A JSON list of document lengths.
absl::StatusOr<std::vector<int64_t>> LoadLengths(const std::string& path);

struct BatchSampling {
  int ranks = 0;
  int64_t tokens_per_rank = 0;
  int64_t round_to = 16;     // lengths rounded up to a multiple of this
  int64_t max_length = 0;    // > 0: longer documents truncated to it first
  uint64_t seed = 1;
};

// Documents drawn uniformly with replacement (std::mt19937_64 seeded with
// `seed`), rounded up, and packed rank after rank so that every rank holds
// exactly tokens_per_rank tokens. A document that does not fit in what is
// left of a rank continues on the next one as a separate attention segment
// (its positions restart), the way corescape's batch loader cuts documents
// at row ends.
std::vector<std::vector<int64_t>> SampleRankBatches(const std::vector<int64_t>& lengths,
                                                    const BatchSampling& sampling);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_PLANNER_DOCUMENT_SAMPLES_H_
