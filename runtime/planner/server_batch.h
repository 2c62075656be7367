#ifndef CORESCAPE_RUNTIME_PLANNER_SERVER_BATCH_H_
#define CORESCAPE_RUNTIME_PLANNER_SERVER_BATCH_H_

// One server's share of a plan laid out as the rows of its fused kernel call.
// Q rows: the server's tasks back to back in (worker, document, q_begin)
// order, the order of Plan::tasks. K/V rows: one block per document, the
// prefix [0, max q_end) of its tasks here, in the same order, sent once and
// shared by every task of that document (mirrored head/tail pieces of one
// document read the same block). The same order per source worker is the
// wire order: Q shards, then K, then V.
//
// KernelTask carries the same four integers as kernels::AttentionTask, so
// this folder does not depend on the kernel library; the caller copies them.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/planner/plan.h"

namespace corescape::planner {

struct KernelTask {
  int64_t q_begin = 0;
  int64_t q_end = 0;
  int64_t q_row = 0;   // row of the query at q_begin
  int64_t kv_row = 0;  // row of document position 0
};

struct ServerDocument {
  int32_t worker = 0;
  int32_t document = 0;
  int64_t kv_row = 0;   // first row of its K/V block
  int64_t kv_rows = 0;  // prefix length held here
};

struct ServerBatch {
  std::vector<KernelTask> tasks;
  std::vector<int64_t> plan_task;  // index into Plan::tasks of each task
  std::vector<ServerDocument> documents;
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
};

// InvalidArgument if server is out of range of plan.servers.
absl::StatusOr<ServerBatch> LayOutServerBatch(const Plan& plan, int32_t server);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_SERVER_BATCH_H_
