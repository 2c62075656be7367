#ifndef CORESCAPE_RUNTIME_PLANNER_PLAN_H_
#define CORESCAPE_RUNTIME_PLANNER_PLAN_H_

// Inputs and outputs of the core-attention planners (DistCA-style
// disaggregation). Plain data: no I/O, no clocks. A plan assigns query ranges
// of every document of every worker's micro-batch to attention servers.
//
// Task: query positions [q_begin, q_end) of one document; its keys/values are
// the document prefix [0, q_end) (causal, bottom-right aligned), exactly the
// unit runtime/kernels/core_attention.h executes.

#include <cstdint>
#include <vector>

namespace corescape::planner {

inline constexpr int32_t kNoWorker = -1;

// Attention shape of the model. Q rows are `hidden` wide (= n_heads*head_dim),
// K and V rows n_kv_heads*head_dim each.
struct ModelShape {
  int64_t hidden = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t bytes_per_element = 2;  // bf16 on the wire
};

// Cost of a task = pairs * FlopsPerPair + task_overhead_flops, where
// FlopsPerPair = 4 * n_heads * head_dim * (1 + backward_factor): forward
// QK^T and PV are 2 FLOPs each per (query, key, head_dim) element.
struct CostModel {
  double backward_factor = 2.5;  // backward FLOPs / forward FLOPs
  // Fixed cost of one task in FLOPs (partly filled kernel tiles, scheduling).
  // Splitting a document adds tasks, so this makes splits cost something.
  double task_overhead_flops = 0.0;
};

struct AttentionServer {
  // Relative throughput; a server of speed 0.5 should get half the FLOPs of
  // one of speed 1. Must be > 0 (drained or dead servers are left out).
  double speed = 1.0;
  // The worker rank on the same GPU (in-place mode): that worker's Q/K/V is
  // already there and costs no transfer. kNoWorker for dedicated servers.
  int32_t colocated_worker = kNoWorker;
};

struct PlanInput {
  // worker_documents[w][d]: length in tokens (>= 1) of document d of worker
  // w's micro-batch for this step.
  std::vector<std::vector<int64_t>> worker_documents;
  std::vector<AttentionServer> servers;
  ModelShape model;
  CostModel cost;
};

struct PlannedTask {
  int32_t worker = 0;
  int32_t document = 0;  // index in worker_documents[worker]
  int64_t q_begin = 0;   // query positions [q_begin, q_end); keys [0, q_end)
  int64_t q_end = 0;
  int32_t server = 0;    // index in PlanInput::servers
  bool operator==(const PlannedTask&) const = default;
};

struct ServerLoad {
  int64_t pairs = 0;   // causal (query, key) pairs
  int64_t tasks = 0;
  double flops = 0.0;  // pairs * FlopsPerPair + tasks * overhead
  double time = 0.0;   // flops / speed
  // Bytes this server receives: Q of every task whose worker is not
  // colocated with it, plus the K/V prefix [0, max q_end) of each such
  // document once (shared by all its tasks here).
  int64_t bytes_received = 0;
};

struct PlanStats {
  int64_t documents = 0;
  int64_t tasks = 0;
  int64_t split_documents = 0;      // documents cut into more than one task
  int64_t remote_tasks = 0;         // tasks not on their worker's own GPU
  int64_t remote_query_tokens = 0;  // query tokens those tasks carry
  int64_t planner_steps = 0;        // moves (DistCA) or pieces placed (ours)
};

struct Plan {
  // Sorted by (server, worker, document, q_begin).
  std::vector<PlannedTask> tasks;
  std::vector<ServerLoad> servers;  // parallel to PlanInput::servers
  double max_time = 0.0;
  // Time every server would take under perfect balance: total FLOPs / sum of
  // speeds. With equal speeds, the mean server time.
  double mean_time = 0.0;
  double imbalance = 1.0;  // max_time / mean_time (1 for an empty plan)
  int64_t q_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t bytes_moved = 0;  // q_bytes + kv_bytes
  PlanStats stats;
};

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_PLAN_H_
