#ifndef CORESCAPE_RUNTIME_PLANNER_PLANNER_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_PLANNER_PLANNER_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/planner/plan.h"

namespace corescape::planner {

// DistCA's worked-example shape: hidden 4096, 32 heads, 8 KV heads, bf16.
ModelShape DistcaShape();

// One server per worker, colocated (in-place mode), all of speed 1.
PlanInput InPlaceInput(std::vector<std::vector<int64_t>> worker_documents);

// DistCA's published worked example, in place: 4 ranks, budget 16384,
// [[16384], [8192]*2, [4096]*4, [2048]*8].
PlanInput DistcaWorkedExample();

// `workers` batches of exactly `tokens` tokens each: heavy-tailed lengths
// (log-uniform in [1, max_length]), the last document of a batch cut to fit.
std::vector<std::vector<int64_t>> RandomBatches(std::mt19937_64& rng, int workers,
                                                int64_t tokens, int64_t max_length);

// Independent check of a plan against its input, by brute force over tokens:
// every query token of every document in exactly one task, tasks inside
// their documents, pairs conserved, per-server pairs and tasks consistent,
// and each task's K/V block in the server batch holding its whole prefix.
// Returns "" when all hold, else a description of the first violation.
std::string CheckPlan(const PlanInput& input, const Plan& plan);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_PLANNER_TEST_UTIL_H_
