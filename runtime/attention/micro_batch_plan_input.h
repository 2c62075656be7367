#ifndef CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_INPUT_H_
#define CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_INPUT_H_

// The planner's input of one micro-batch, as every participant (worker,
// attention server) and the scheduler build it, so all reach the same plan.
// Free of the kernels (and their BLAS): the scheduler links it.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/planner/plan.h"

namespace corescape::attention {

enum class PlannerKind {
  kCorescape,     // planner::PlanAttention
  kDistcaGreedy,  // planner::PlanDistcaGreedy (mirrored head/tail pieces)
};

struct PlanOptions {
  int32_t servers = 1;
  double tolerance = 0.05;
  PlannerKind planner = PlannerKind::kCorescape;
  // Relative server speeds (versioned_speed_weights.h), one per server; empty: equal.
  // The DistCA greedy planner has no speeds and ignores them.
  std::vector<double> server_speeds;
  // In-place mode: server s is worker s (its own rows move no bytes), so
  // `servers` must equal the number of workers.
  bool in_place = false;
};

// The planner's model of core attention with these heads: fp32 on the
// wire, as the exchanges are.
planner::ModelShape PlannerModelShape(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim);

// options.servers dedicated servers (in place: server s is worker s) at
// options.server_speeds (equal when empty), the default cost model.
// InvalidArgument when the counts do not fit.
absl::StatusOr<planner::PlanInput> MicroBatchPlanInput(
    std::vector<std::vector<int64_t>> worker_documents, const planner::ModelShape& model,
    const PlanOptions& options);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_INPUT_H_
