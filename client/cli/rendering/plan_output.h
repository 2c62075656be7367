// Rendering of core-attention plans (GetAttentionPlan, Rebalance) for
// people and for scripts. Pure functions; the current time is a parameter.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_PLAN_OUTPUT_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_PLAN_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "corescape/v1/node.pb.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

// "1.23 GFLOP"; with per_second "1.23 GFLOP/s".
std::string FormatFlops(double flops, bool per_second = false);

// {"job_id", "generation", "attention_epoch", "step", "step_micro_batches",
//  "sent_to_workers", "planned_unix_ms", "planned_time", "imbalance",
//  "tolerance", "bytes_moved", "pushed_weights_version", "total_cost",
//  "task_count",
//  "worker_tokens": [...], "excluded_servers": [...],
//  "servers": [{"name", "address", "speed_weight", "measured_speed",
//               "cost", "share", "tasks", "bytes_received"}]}
// plus "tasks": [{"worker_rank", "document", "q_begin", "q_end", "server"}]
// with_tasks.
nlohmann::json AttentionPlanToJson(const corescape::v1::AttentionPlan& plan, bool with_tasks);

// Summary lines (job and attention epoch, step, the step's micro-batches
// planned ahead for worker 0, imbalance, bytes moved, servers left out), the
// per-server table (SERVER SPEED-WEIGHT MEASURED COST SHARE TASKS BYTES)
// and, with_tasks, the tasks (WORKER DOCUMENT QUERIES SERVER).
std::string RenderAttentionPlan(const corescape::v1::AttentionPlan& plan, int64_t now_unix_ms,
                                bool with_tasks);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_PLAN_OUTPUT_H_
