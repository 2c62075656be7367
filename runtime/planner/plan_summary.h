#ifndef CORESCAPE_RUNTIME_PLANNER_PLAN_SUMMARY_H_
#define CORESCAPE_RUNTIME_PLANNER_PLAN_SUMMARY_H_

// What both planners share: input validation, the cost and byte model, and
// the summary (per-server load, imbalance, bytes moved) of a list of tasks,
// which also checks that the tasks cover every document exactly once.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/planner/plan.h"

namespace corescape::planner {

// InvalidArgument naming the offending field: no servers, a speed that is
// not finite and positive, a colocated worker out of range or shared by two
// servers, a document length < 1, a bad model shape or cost model.
absl::Status ValidatePlanInput(const PlanInput& input);

// One of the input's documents: its worker, its index among that worker's
// documents, and its length in tokens.
struct InputDocument {
  int32_t worker;
  int32_t index;
  int64_t length;
};

// Every document of the input, worker by worker, in input order.
std::vector<InputDocument> FlattenDocuments(const PlanInput& input);

// 4 * n_heads * head_dim * (1 + backward_factor).
double FlopsPerPair(const PlanInput& input);

// Wire bytes per token: a Q row, and a K row plus a V row.
int64_t QBytesPerToken(const ModelShape& model);
int64_t KvBytesPerToken(const ModelShape& model);

// Builds the Plan of `tasks` (any order; returned sorted by server, worker,
// document, q_begin): loads, imbalance, bytes and stats. Fails with
// Internal if a task is out of range or the tasks of a document do not
// cover [0, length) exactly once — a planner bug, never a user error.
absl::StatusOr<Plan> SummarizePlan(const PlanInput& input,
                                   std::vector<PlannedTask> tasks);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_PLAN_SUMMARY_H_
