#include "client/cli/rendering/plan_output.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/rendering/job_output.h"
#include "client/cli/rendering/output.h"
#include "client/cli/rendering/table.h"

namespace corescape::cli {

namespace v1 = ::corescape::v1;

namespace {

double TotalCost(const v1::AttentionPlan& plan) {
  double total = 0;
  for (double cost : plan.server_cost()) total += cost;
  return total;
}

// Repeated fields the scheduler fills in parallel; an older scheduler may
// leave the new ones out, so read them defensively.
template <typename Repeated>
auto At(const Repeated& field, int i, decltype(field.Get(0)) fallback) {
  return i >= 0 && i < field.size() ? field.Get(i) : fallback;
}

std::string Share(double cost, double total) {
  return total > 0 ? absl::StrFormat("%.1f%%", 100 * cost / total) : "-";
}

// "step 12: 2 core-attention micro-batches planned ahead, sent to worker 0".
std::string PlannedAhead(const v1::AttentionPlan& plan) {
  const int count = plan.step_micro_batches();
  return absl::StrCat("step ", plan.step(), ": ", count, " core-attention micro-batch",
                      count == 1 ? "" : "es", " planned ahead, ",
                      plan.sent_to_workers() ? "sent to worker 0" : "not sent");
}

}  // namespace

std::string FormatFlops(double flops, bool per_second) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int prefix = 0;
  double value = flops;
  while (std::fabs(value) >= 1000 && prefix + 1 < 7) {
    value /= 1000;
    ++prefix;
  }
  const char* unit = per_second ? "/s" : "";
  // Two calls: absl checks a format string at compile time only when it is a constant.
  if (prefix == 0) return absl::StrFormat("%.0f %sFLOP%s", value, kPrefixes[prefix], unit);
  return absl::StrFormat("%.2f %sFLOP%s", value, kPrefixes[prefix], unit);
}

nlohmann::json AttentionPlanToJson(const v1::AttentionPlan& plan, bool with_tasks) {
  const double total = TotalCost(plan);
  nlohmann::json servers = nlohmann::json::array();
  for (int s = 0; s < plan.server_cost_size(); ++s) {
    const double cost = plan.server_cost(s);
    servers.push_back({
        {"name", At(plan.server_names(), s, std::string())},
        {"address", At(plan.attention_server_addresses(), s, std::string())},
        {"speed_weight", At(plan.server_speed_weights(), s, 1.0)},
        {"measured_speed", At(plan.server_measured_speed(), s, 0.0)},
        {"cost", cost},
        {"share", total > 0 ? cost / total : 0.0},
        {"tasks", At(plan.server_tasks(), s, int64_t{0})},
        {"bytes_received", At(plan.server_bytes_received(), s, int64_t{0})},
    });
  }
  nlohmann::json json = {
      {"job_id", plan.job_id()},
      {"generation", plan.generation()},
      {"step", plan.step()},
      {"planned_unix_ms", plan.planned_unix_ms()},
      {"planned_time", FormatIso8601Millis(plan.planned_unix_ms())},
      {"imbalance", plan.imbalance()},
      {"tolerance", plan.tolerance()},
      {"bytes_moved", plan.bytes_moved()},
      {"pushed_weights_version", plan.pushed_weights_version()},
      {"attention_epoch", plan.attention_epoch()},
      {"step_micro_batches", plan.step_micro_batches()},
      {"sent_to_workers", plan.sent_to_workers()},
      {"total_cost", total},
      {"task_count", plan.tasks_size()},
      {"worker_tokens", std::vector<int64_t>(plan.worker_tokens().begin(),
                                             plan.worker_tokens().end())},
      {"excluded_servers", std::vector<std::string>(plan.excluded_servers().begin(),
                                                    plan.excluded_servers().end())},
      {"servers", servers},
  };
  if (with_tasks) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const v1::AttentionTask& task : plan.tasks()) {
      tasks.push_back({{"worker_rank", task.worker_rank()},
                       {"document", task.document()},
                       {"q_begin", task.q_begin()},
                       {"q_end", task.q_end()},
                       {"server", task.server()}});
    }
    json["tasks"] = tasks;
  }
  return json;
}

std::string RenderAttentionPlan(const v1::AttentionPlan& plan, int64_t now_unix_ms,
                                bool with_tasks) {
  const double total = TotalCost(plan);
  int64_t tokens = 0;
  for (int64_t t : plan.worker_tokens()) tokens += t;
  Table summary({"", ""});
  summary.AddRow({"Job:", absl::StrCat(plan.job_id(), "  generation ", plan.generation(),
                                       "  attention epoch ", plan.attention_epoch())});
  summary.AddRow({"Step:", absl::StrCat(plan.step(), "  planned ",
                                        FormatAge(plan.planned_unix_ms(), now_unix_ms))});
  // Re-plans (Rebalance) and older schedulers plan no step ahead.
  if (plan.step_micro_batches() > 0) summary.AddRow({"Ahead:", PlannedAhead(plan)});
  summary.AddRow({"Workers:", absl::StrCat(plan.worker_tokens_size(), " (",
                                           FormatThousands(tokens), " tokens, ",
                                           FormatThousands(plan.tasks_size()), " tasks)")});
  summary.AddRow(
      {"Imbalance:", absl::StrFormat("%.4f (max/mean server time; tolerance %.3g)",
                                     plan.imbalance(), plan.tolerance())});
  summary.AddRow({"Cost:", FormatFlops(total)});
  summary.AddRow({"Moved:", absl::StrCat(FormatBytes(plan.bytes_moved()),
                                         " of Q/K/V to the servers")});
  if (plan.excluded_servers_size() > 0) {
    summary.AddRow({"Left out:", absl::StrJoin(plan.excluded_servers(), ", ")});
  }
  if (plan.pushed_weights_version() > 0) {
    summary.AddRow({"Weights:", absl::StrCat("version ", plan.pushed_weights_version(),
                                             " sent to the workers")});
  }
  Table servers({"SERVER", "SPEED-WEIGHT", "MEASURED", "COST", "SHARE", "TASKS", "BYTES"});
  for (int s = 0; s < plan.server_cost_size(); ++s) {
    const double measured = At(plan.server_measured_speed(), s, 0.0);
    servers.AddRow({
        At(plan.server_names(), s, absl::StrCat("server ", s)),
        absl::StrFormat("%.3f", At(plan.server_speed_weights(), s, 1.0)),
        measured > 0 ? FormatFlops(measured, /*per_second=*/true) : "-",
        FormatFlops(plan.server_cost(s)),
        Share(plan.server_cost(s), total),
        absl::StrCat(At(plan.server_tasks(), s, int64_t{0})),
        FormatBytes(At(plan.server_bytes_received(), s, int64_t{0})),
    });
  }
  std::string out = absl::StrCat(summary.RenderRowsOnly(), "\n", servers.Render());
  if (with_tasks) {
    Table tasks({"WORKER", "DOCUMENT", "QUERIES", "SERVER"});
    for (const v1::AttentionTask& task : plan.tasks()) {
      tasks.AddRow({absl::StrCat(task.worker_rank()), absl::StrCat(task.document()),
                    absl::StrCat("[", task.q_begin(), ", ", task.q_end(), ")"),
                    At(plan.server_names(), task.server(), absl::StrCat(task.server()))});
    }
    absl::StrAppend(&out, "\n", tasks.Render());
  }
  return out;
}

}  // namespace corescape::cli
