#include "runtime/attention/micro_batch_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/planner/attention_planner.h"
#include "runtime/planner/distca_greedy.h"
#include "runtime/planner/plan_summary.h"

namespace corescape::attention {

RowWidths RowWidths::Of(const kernels::AttentionShape& shape) {
  return {int64_t{shape.n_heads} * shape.head_dim, int64_t{shape.n_kv_heads} * shape.head_dim,
          shape.n_heads};
}

namespace {

planner::ModelShape PlannerModelShapeOf(const kernels::AttentionShape& shape) {
  return PlannerModelShape(shape.n_heads, shape.n_kv_heads, shape.head_dim);
}

// Lays `plan` out as every server's fused batch and every worker's share.
absl::StatusOr<MicroBatchPlan> LayOutMicroBatch(std::vector<std::vector<int64_t>> worker_documents,
                                                planner::Plan plan, int32_t servers) {
  MicroBatchPlan result;
  result.plan = std::move(plan);
  result.worker_documents = std::move(worker_documents);
  const int32_t workers = static_cast<int32_t>(result.worker_documents.size());
  result.batches.resize(servers);
  result.shares.assign(servers, std::vector<WorkerShare>(workers));
  for (int32_t s = 0; s < servers; ++s) {
    auto batch = planner::LayOutServerBatch(result.plan, s);
    if (!batch.ok()) return batch.status();
    result.batches[s] = *std::move(batch);
    const planner::ServerBatch& b = result.batches[s];
    std::vector<WorkerShare>& shares = result.shares[s];
    // Tasks and documents are in (worker, document, q_begin) order, so each
    // worker's part is one contiguous run; the first row of the run and the
    // sum of its rows give the share.
    std::vector<bool> seen_task(workers, false), seen_document(workers, false);
    for (size_t i = 0; i < b.tasks.size(); ++i) {
      const int32_t w = result.plan.tasks[b.plan_task[i]].worker;
      WorkerShare& share = shares[w];
      if (!seen_task[w]) {
        seen_task[w] = true;
        share.first_task = static_cast<int64_t>(i);
        share.q_row = b.tasks[i].q_row;
      }
      ++share.num_tasks;
      share.q_rows += b.tasks[i].q_end - b.tasks[i].q_begin;
    }
    for (size_t d = 0; d < b.documents.size(); ++d) {
      const int32_t w = b.documents[d].worker;
      WorkerShare& share = shares[w];
      if (!seen_document[w]) {
        seen_document[w] = true;
        share.first_document = static_cast<int64_t>(d);
        share.kv_row = b.documents[d].kv_row;
      }
      ++share.num_documents;
      share.kv_rows += b.documents[d].kv_rows;
    }
    // The layout packs rows back to back; check the shares tile them.
    int64_t q_row = 0, kv_row = 0;
    for (int32_t w = 0; w < workers; ++w) {
      if ((shares[w].q_rows > 0 && shares[w].q_row != q_row) ||
          (shares[w].kv_rows > 0 && shares[w].kv_row != kv_row)) {
        return absl::InternalError(absl::StrCat("server ", s, "'s batch is not laid out by worker"));
      }
      shares[w].q_row = q_row;
      shares[w].kv_row = kv_row;
      q_row += shares[w].q_rows;
      kv_row += shares[w].kv_rows;
    }
    if (q_row != b.q_rows || kv_row != b.kv_rows) {
      return absl::InternalError(absl::StrCat("server ", s, "'s shares do not cover its batch"));
    }
  }
  return result;
}

}  // namespace

absl::StatusOr<MicroBatchPlan> PlanMicroBatch(std::vector<std::vector<int64_t>> worker_documents,
                                              const kernels::AttentionShape& shape,
                                              const PlanOptions& options) {
  auto input =
      MicroBatchPlanInput(std::move(worker_documents), PlannerModelShapeOf(shape), options);
  if (!input.ok()) return input.status();
  absl::StatusOr<planner::Plan> plan;
  if (options.planner == PlannerKind::kDistcaGreedy) {
    int64_t tokens = 0;
    for (const auto& documents : input->worker_documents) {
      for (int64_t length : documents) tokens += length;
    }
    planner::DistcaOptions distca;
    distca.tolerance = options.tolerance;
    // Ranks are servers: lay every worker's documents out over them.
    distca.token_budget = std::max<int64_t>(1, (tokens + options.servers - 1) / options.servers);
    plan = planner::PlanDistcaGreedy(*input, distca);
  } else {
    plan = planner::PlanAttention(*input, planner::PlannerOptions{options.tolerance});
  }
  if (!plan.ok()) return plan.status();
  return LayOutMicroBatch(std::move(input->worker_documents), *std::move(plan), options.servers);
}

absl::StatusOr<MicroBatchPlan> AdoptMicroBatchPlan(
    std::vector<std::vector<int64_t>> worker_documents, const kernels::AttentionShape& shape,
    const PlanOptions& options, std::vector<planner::PlannedTask> tasks) {
  auto input =
      MicroBatchPlanInput(std::move(worker_documents), PlannerModelShapeOf(shape), options);
  if (!input.ok()) return input.status();
  if (absl::Status s = planner::ValidatePlanInput(*input); !s.ok()) return s;
  // Checks every task's range and that the tasks tile each document once.
  auto plan = planner::SummarizePlan(*input, std::move(tasks));
  if (!plan.ok()) return absl::InvalidArgumentError(plan.status().message());
  return LayOutMicroBatch(std::move(input->worker_documents), *std::move(plan), options.servers);
}

absl::Status CheckSameMicroBatch(bool planned,
                                 absl::Span<const kernels::AttentionTask> planned_tasks,
                                 int64_t planned_rows,
                                 absl::Span<const kernels::AttentionTask> tasks, int64_t rows,
                                 absl::string_view executor) {
  if (!planned || rows != planned_rows ||
      !std::equal(tasks.begin(), tasks.end(), planned_tasks.begin(), planned_tasks.end())) {
    return absl::FailedPreconditionError(
        absl::StrCat(executor,
                     ": the tasks differ from those of this micro-batch's layer 0 forward "
                     "(calls out of order?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerDocuments> WholeDocuments(const kernels::AttentionShape& shape,
                                               absl::Span<const kernels::AttentionTask> tasks,
                                               int64_t rows, absl::string_view executor) {
  if (absl::Status s = kernels::ValidateAttentionArgs(shape, tasks, std::max<int64_t>(rows, 1),
                                                      std::max<int64_t>(rows, 1));
      !s.ok()) {
    return s;
  }
  WorkerDocuments documents;
  documents.lengths.reserve(tasks.size());
  documents.rows.reserve(tasks.size());
  for (const kernels::AttentionTask& task : tasks) {
    if (task.q_begin != 0 || task.q_row != task.kv_row) {
      return absl::UnimplementedError(absl::StrCat(
          executor, " takes whole-document tasks (q_begin 0, q_row = kv_row)"));
    }
    documents.lengths.push_back(task.q_end);
    documents.rows.push_back(task.q_row);
  }
  return documents;
}

// (count may be 0 with a null pointer on either side: memcpy may not be
// called with one even then.)
void TakeFloats(const float*& in, float* out, int64_t count) {
  if (count > 0) std::memcpy(out, in, count * sizeof(float));
  in += count;
}

void PutFloats(float*& out, const float* in, int64_t count) {
  if (count > 0) std::memcpy(out, in, count * sizeof(float));
  out += count;
}

int64_t ForwardRequestFloats(const WorkerShare& s, const RowWidths& w) {
  return s.q_rows * w.q + 2 * s.kv_rows * w.kv;
}
int64_t ForwardReplyFloats(const WorkerShare& s, const RowWidths& w) {
  return s.q_rows * (w.q + w.lse);
}
int64_t BackwardRequestFloats(const WorkerShare& s, const RowWidths& w,
                              bool carries_forward_tensors) {
  const int64_t d_o = s.q_rows * w.q;
  return carries_forward_tensors ? d_o + ForwardRequestFloats(s, w) + ForwardReplyFloats(s, w)
                                 : d_o;
}
int64_t BackwardReplyFloats(const WorkerShare& s, const RowWidths& w) {
  return s.q_rows * w.q + 2 * s.kv_rows * w.kv;
}

std::vector<RowRange> WorkerQueryRows(const MicroBatchPlan& plan, int32_t server, int32_t worker,
                                      absl::Span<const int64_t> document_rows) {
  const WorkerShare& share = plan.shares[server][worker];
  const planner::ServerBatch& batch = plan.batches[server];
  std::vector<RowRange> ranges;
  ranges.reserve(share.num_tasks);
  for (int64_t i = share.first_task; i < share.first_task + share.num_tasks; ++i) {
    const planner::PlannedTask& task = plan.plan.tasks[batch.plan_task[i]];
    ranges.push_back({document_rows[task.document] + task.q_begin, task.q_end - task.q_begin});
  }
  return ranges;
}

std::vector<RowRange> WorkerKvRows(const MicroBatchPlan& plan, int32_t server, int32_t worker,
                                   absl::Span<const int64_t> document_rows) {
  const WorkerShare& share = plan.shares[server][worker];
  const planner::ServerBatch& batch = plan.batches[server];
  std::vector<RowRange> ranges;
  ranges.reserve(share.num_documents);
  for (int64_t d = share.first_document; d < share.first_document + share.num_documents; ++d) {
    const planner::ServerDocument& document = batch.documents[d];
    ranges.push_back({document_rows[document.document], document.kv_rows});
  }
  return ranges;
}

float* GatherRows(const float* buffer, int64_t width, absl::Span<const RowRange> ranges,
                  float* out) {
  for (const RowRange& r : ranges) {
    std::memcpy(out, buffer + r.row * width, r.count * width * sizeof(float));
    out += r.count * width;
  }
  return out;
}

const float* ScatterRows(const float* in, int64_t width, absl::Span<const RowRange> ranges,
                         float* buffer, bool accumulate) {
  for (const RowRange& r : ranges) {
    float* target = buffer + r.row * width;
    const int64_t n = r.count * width;
    if (accumulate) {
      for (int64_t i = 0; i < n; ++i) target[i] += in[i];
    } else {
      std::memcpy(target, in, n * sizeof(float));
    }
    in += n;
  }
  return in;
}

double PassCost(const planner::Plan& plan, int32_t server, bool backward) {
  const double factor = planner::CostModel{}.backward_factor;
  const double share = backward ? factor / (1 + factor) : 1 / (1 + factor);
  return plan.servers[server].flops * share;
}

std::vector<kernels::AttentionTask> KernelTasks(const planner::ServerBatch& batch) {
  std::vector<kernels::AttentionTask> tasks;
  tasks.reserve(batch.tasks.size());
  for (const planner::KernelTask& t : batch.tasks) {
    tasks.push_back({t.q_begin, t.q_end, t.q_row, t.kv_row});
  }
  return tasks;
}

}  // namespace corescape::attention
