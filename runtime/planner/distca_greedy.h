#ifndef CORESCAPE_RUNTIME_PLANNER_DISTCA_GREEDY_H_
#define CORESCAPE_RUNTIME_PLANNER_DISTCA_GREEDY_H_

// DistCA's published greedy planner (Zhuang et al., arXiv 2510.18121, public
// code at commit 039f2e4), re-implemented from its description as the
// baseline our planner is measured against on identical inputs:
//
//  1. Layout: documents laid out rank by rank up to a token budget; a
//     document that does not fit is cut zig-zag: the rank takes half of what
//     it has room for from the document's front and half from its back, the
//     middle goes on to the next rank.
//  2. Rebalancing in pair units: for each rank below the mean, most negative
//     first, while its need exceeds tolerance * mean, pick among the items on
//     ranks above the mean the one whose move costs the fewest elements per
//     pair moved, where moving m pairs of a document of length L costs
//     (m / (L + 1)) * hidden + 2 * (L + 1) * n_kv_heads * head_dim elements,
//     with m = min(need, donor surplus, item pairs); move floor(m / (L + 1))
//     mirrored pairs (positions i and L-1-i, L + 1 pairs together) taken from
//     the inside of the item.
//
// Ranks are servers: rank r is servers[r]. No per-server speed, no task
// overhead and no topology: it balances raw pairs (Plan still reports times
// with the input's speeds and overhead, so both planners are judged alike).

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/planner/plan.h"

namespace corescape::planner {

struct DistcaOptions {
  double tolerance = 0.05;  // their training script's value
  // Tokens per rank of the initial layout over the documents of all workers
  // in rank order. 0: worker r's batch is rank r's layout as given (then
  // there must be one server per worker).
  int64_t token_budget = 0;
};

absl::StatusOr<Plan> PlanDistcaGreedy(const PlanInput& input, const DistcaOptions& options);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_DISTCA_GREEDY_H_
