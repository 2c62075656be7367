#ifndef CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_H_
#define CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_H_

// How one micro-batch's core attention is split between attention servers:
// the scheduler's plan, made ahead of the step and shipped by worker 0 with
// its document lengths at the forward of layer 0, or — when none came in
// time or it does not fit the documents — computed independently and
// identically by every worker and every server from all workers' document
// lengths with the pure planner (announced_micro_batch.h decides).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/attention/micro_batch_plan_input.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/planner/plan.h"
#include "runtime/planner/server_batch.h"

namespace corescape::attention {

// Worker w's part of server s's fused batch: contiguous, because the
// server's tasks are sorted by worker first.
struct WorkerShare {
  int64_t first_task = 0, num_tasks = 0;          // in ServerBatch::tasks
  int64_t first_document = 0, num_documents = 0;  // in ServerBatch::documents
  int64_t q_row = 0, q_rows = 0;                  // server's Q/O/LSE rows
  int64_t kv_row = 0, kv_rows = 0;                // server's K/V rows
};

struct MicroBatchPlan {
  std::vector<std::vector<int64_t>> worker_documents;  // [worker][document] = length
  planner::Plan plan;
  std::vector<planner::ServerBatch> batches;      // [server]
  std::vector<std::vector<WorkerShare>> shares;   // [server][worker]
  uint64_t speed_weights_version = 0;  // of the speeds planned with (0: equal)
  // Planned by the participants themselves, or by the scheduler ahead of
  // the step (shipped_plan.h; scheduler_step is the step it planned).
  enum class Source { kParticipants, kScheduler };
  Source source = Source::kParticipants;
  int64_t scheduler_step = 0;
};

absl::StatusOr<MicroBatchPlan> PlanMicroBatch(std::vector<std::vector<int64_t>> worker_documents,
                                              const kernels::AttentionShape& shape,
                                              const PlanOptions& options);

// The micro-batch laid out by `tasks`, a plan made elsewhere (the
// scheduler's; options.planner and tolerance are not used).
// InvalidArgument naming the task or document unless the tasks cover every
// query of every document exactly once over options.servers servers.
absl::StatusOr<MicroBatchPlan> AdoptMicroBatchPlan(
    std::vector<std::vector<int64_t>> worker_documents, const kernels::AttentionShape& shape,
    const PlanOptions& options, std::vector<planner::PlannedTask> tasks);

// One worker's micro-batch as the planner sees it: whole documents.
struct WorkerDocuments {
  std::vector<int64_t> lengths;
  std::vector<int64_t> rows;  // the row of each document's first token
};
// Checks an executor call's arguments (kernels::ValidateAttentionArgs) and
// that every task is a whole document (q_begin 0, q_row = kv_row), as the
// trainer makes them; Unimplemented naming `executor` otherwise.
absl::StatusOr<WorkerDocuments> WholeDocuments(const kernels::AttentionShape& shape,
                                               absl::Span<const kernels::AttentionTask> tasks,
                                               int64_t rows, absl::string_view executor);

// For every call of a micro-batch after its layer-0 forward: the call's
// `tasks` and `rows` must be those the micro-batch was planned with at that
// forward (`planned_tasks`, `planned_rows`; `planned` false when no plan was
// made). FailedPrecondition naming `executor` otherwise.
absl::Status CheckSameMicroBatch(bool planned,
                                 absl::Span<const kernels::AttentionTask> planned_tasks,
                                 int64_t planned_rows,
                                 absl::Span<const kernels::AttentionTask> tasks, int64_t rows,
                                 absl::string_view executor);

// Row widths in floats.
struct RowWidths {
  int64_t q = 0;    // n_heads * head_dim (Q, O, dO, dQ)
  int64_t kv = 0;   // n_kv_heads * head_dim (K, V, dK, dV)
  int64_t lse = 0;  // n_heads
  static RowWidths Of(const kernels::AttentionShape& shape);
};

// Payload sizes in floats (wire_format.h lists the parts).
int64_t ForwardRequestFloats(const WorkerShare& share, const RowWidths& w);
int64_t ForwardReplyFloats(const WorkerShare& share, const RowWidths& w);
int64_t BackwardRequestFloats(const WorkerShare& share, const RowWidths& w,
                              bool carries_forward_tensors);
int64_t BackwardReplyFloats(const WorkerShare& share, const RowWidths& w);

// Rows [row, row + count) of a buffer.
struct RowRange {
  int64_t row = 0;
  int64_t count = 0;
};

// The worker's rows, in wire order, of its tasks (Q/O/LSE/dO/dQ rows) and of
// its document prefixes (K/V/dK/dV rows) on `server`. document_rows[d] is
// the worker's row of its document d's first token.
std::vector<RowRange> WorkerQueryRows(const MicroBatchPlan& plan, int32_t server, int32_t worker,
                                      absl::Span<const int64_t> document_rows);
std::vector<RowRange> WorkerKvRows(const MicroBatchPlan& plan, int32_t server, int32_t worker,
                                   absl::Span<const int64_t> document_rows);

// Copies the ranges' rows (width floats each) back to back into `out`;
// returns the end of what was written.
float* GatherRows(const float* buffer, int64_t width, absl::Span<const RowRange> ranges,
                  float* out);
// Writes (or adds, with accumulate) back-to-back rows from `in` into the
// ranges' rows; returns the end of what was read.
const float* ScatterRows(const float* in, int64_t width, absl::Span<const RowRange> ranges,
                         float* buffer, bool accumulate);

// The plan's cost of one pass (forward or backward) over `server`'s batch:
// the planner counts forward + backward FLOPs per pair, backward_factor
// times forward's. What a timing of that pass is measured against.
double PassCost(const planner::Plan& plan, int32_t server, bool backward);

// Copy `count` floats and advance the source (Take) or the destination
// (Put): the request and reply layouts are runs of rows back to back.
void TakeFloats(const float*& in, float* out, int64_t count);
void PutFloats(float*& out, const float* in, int64_t count);

// The server's kernel tasks as the kernel takes them.
std::vector<kernels::AttentionTask> KernelTasks(const planner::ServerBatch& batch);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_MICRO_BATCH_PLAN_H_
