#include "runtime/planner/plan_summary.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "runtime/planner/causal_pairs.h"

namespace corescape::planner {

absl::Status ValidatePlanInput(const PlanInput& input) {
  if (input.servers.empty()) {
    return absl::InvalidArgumentError("servers: at least one attention server is needed");
  }
  const int64_t n_workers = static_cast<int64_t>(input.worker_documents.size());
  std::vector<bool> colocated(n_workers, false);
  for (size_t s = 0; s < input.servers.size(); ++s) {
    const AttentionServer& server = input.servers[s];
    if (!std::isfinite(server.speed) || server.speed <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("servers[", s, "].speed must be finite and > 0, got ", server.speed));
    }
    if (server.colocated_worker == kNoWorker) continue;
    if (server.colocated_worker < 0 || server.colocated_worker >= n_workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "servers[", s, "].colocated_worker ", server.colocated_worker,
          " is not a worker rank in [0, ", n_workers, ")"));
    }
    if (colocated[server.colocated_worker]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "servers[", s, "].colocated_worker ", server.colocated_worker,
          " is already colocated with another server"));
    }
    colocated[server.colocated_worker] = true;
  }
  for (int64_t w = 0; w < n_workers; ++w) {
    const auto& docs = input.worker_documents[w];
    for (size_t d = 0; d < docs.size(); ++d) {
      if (docs[d] < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "worker_documents[", w, "][", d, "] = ", docs[d], ": lengths must be >= 1"));
      }
    }
  }
  const ModelShape& m = input.model;
  if (m.n_heads <= 0 || m.n_kv_heads <= 0 || m.head_dim <= 0 || m.bytes_per_element <= 0) {
    return absl::InvalidArgumentError(
        "model: n_heads, n_kv_heads, head_dim and bytes_per_element must be > 0");
  }
  if (m.n_heads % m.n_kv_heads != 0) {
    return absl::InvalidArgumentError("model: n_kv_heads must divide n_heads");
  }
  if (m.hidden != static_cast<int64_t>(m.n_heads) * m.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: hidden ", m.hidden, " must equal n_heads * head_dim = ",
        static_cast<int64_t>(m.n_heads) * m.head_dim, " (the width of a Q row)"));
  }
  const CostModel& c = input.cost;
  if (!std::isfinite(c.backward_factor) || c.backward_factor < 0 ||
      !std::isfinite(c.task_overhead_flops) || c.task_overhead_flops < 0) {
    return absl::InvalidArgumentError(
        "cost: backward_factor and task_overhead_flops must be finite and >= 0");
  }
  return absl::OkStatus();
}

std::vector<InputDocument> FlattenDocuments(const PlanInput& input) {
  std::vector<InputDocument> documents;
  for (int32_t w = 0; w < static_cast<int32_t>(input.worker_documents.size()); ++w) {
    for (int32_t i = 0; i < static_cast<int32_t>(input.worker_documents[w].size()); ++i) {
      documents.push_back(InputDocument{w, i, input.worker_documents[w][i]});
    }
  }
  return documents;
}

double FlopsPerPair(const PlanInput& input) {
  return 4.0 * input.model.n_heads * input.model.head_dim *
         (1.0 + input.cost.backward_factor);
}

int64_t QBytesPerToken(const ModelShape& model) {
  return model.hidden * model.bytes_per_element;
}

int64_t KvBytesPerToken(const ModelShape& model) {
  return 2LL * model.n_kv_heads * model.head_dim * model.bytes_per_element;
}

absl::StatusOr<Plan> SummarizePlan(const PlanInput& input, std::vector<PlannedTask> tasks) {
  const int n_servers = static_cast<int>(input.servers.size());
  const int n_workers = static_cast<int>(input.worker_documents.size());
  for (const PlannedTask& t : tasks) {
    if (t.server < 0 || t.server >= n_servers || t.worker < 0 || t.worker >= n_workers ||
        t.document < 0 ||
        t.document >= static_cast<int64_t>(input.worker_documents[t.worker].size()) ||
        t.q_begin < 0 || t.q_end <= t.q_begin ||
        t.q_end > input.worker_documents[t.worker][t.document]) {
      return absl::InternalError(absl::StrCat(
          "task out of range: worker ", t.worker, " document ", t.document, " [",
          t.q_begin, ", ", t.q_end, ") server ", t.server));
    }
  }

  // Coverage: in (worker, document, q_begin) order each document's ranges
  // must tile [0, length).
  std::vector<int32_t> order(tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const PlannedTask& x = tasks[a];
    const PlannedTask& y = tasks[b];
    return std::tie(x.worker, x.document, x.q_begin) < std::tie(y.worker, y.document, y.q_begin);
  });
  Plan plan;
  PlanStats& stats = plan.stats;
  size_t next = 0;
  for (int w = 0; w < n_workers; ++w) {
    const auto& docs = input.worker_documents[w];
    for (int d = 0; d < static_cast<int>(docs.size()); ++d) {
      int64_t covered = 0;
      int pieces = 0;
      while (next < order.size() && tasks[order[next]].worker == w &&
             tasks[order[next]].document == d) {
        const PlannedTask& t = tasks[order[next]];
        if (t.q_begin != covered) {
          return absl::InternalError(absl::StrCat(
              "worker ", w, " document ", d, ": tasks leave a gap or overlap at position ",
              covered, " (next task begins at ", t.q_begin, ")"));
        }
        covered = t.q_end;
        ++pieces;
        ++next;
      }
      if (covered != docs[d]) {
        return absl::InternalError(absl::StrCat("worker ", w, " document ", d,
                                                ": tasks cover [0, ", covered,
                                                ") of ", docs[d], " tokens"));
      }
      ++stats.documents;
      if (pieces > 1) ++stats.split_documents;
    }
  }

  std::sort(tasks.begin(), tasks.end(), [](const PlannedTask& x, const PlannedTask& y) {
    return std::tie(x.server, x.worker, x.document, x.q_begin) <
           std::tie(y.server, y.worker, y.document, y.q_begin);
  });
  const double flops_per_pair = FlopsPerPair(input);
  const int64_t q_bytes_per_token = QBytesPerToken(input.model);
  const int64_t kv_bytes_per_token = KvBytesPerToken(input.model);
  plan.servers.assign(n_servers, ServerLoad{});
  // Tasks are grouped by (server, worker, document), so the K/V prefix a
  // remote document needs on a server is the max q_end of its group.
  for (size_t i = 0; i < tasks.size();) {
    const PlannedTask& first = tasks[i];
    const bool remote = input.servers[first.server].colocated_worker != first.worker;
    int64_t kv_prefix = 0;
    size_t j = i;
    for (; j < tasks.size() && tasks[j].server == first.server &&
           tasks[j].worker == first.worker && tasks[j].document == first.document;
         ++j) {
      const PlannedTask& t = tasks[j];
      ServerLoad& load = plan.servers[t.server];
      load.pairs += CausalPairs(t.q_begin, t.q_end);
      ++load.tasks;
      kv_prefix = std::max(kv_prefix, t.q_end);
      if (remote) {
        const int64_t q = (t.q_end - t.q_begin) * q_bytes_per_token;
        load.bytes_received += q;
        plan.q_bytes += q;
        ++stats.remote_tasks;
        stats.remote_query_tokens += t.q_end - t.q_begin;
      }
    }
    if (remote) {
      plan.servers[first.server].bytes_received += kv_prefix * kv_bytes_per_token;
      plan.kv_bytes += kv_prefix * kv_bytes_per_token;
    }
    i = j;
  }
  double total_flops = 0.0, total_speed = 0.0;
  for (int s = 0; s < n_servers; ++s) {
    ServerLoad& load = plan.servers[s];
    load.flops = static_cast<double>(load.pairs) * flops_per_pair +
                 static_cast<double>(load.tasks) * input.cost.task_overhead_flops;
    load.time = load.flops / input.servers[s].speed;
    plan.max_time = std::max(plan.max_time, load.time);
    total_flops += load.flops;
    total_speed += input.servers[s].speed;
  }
  plan.mean_time = total_flops / total_speed;
  plan.imbalance = plan.mean_time > 0 ? plan.max_time / plan.mean_time : 1.0;
  plan.bytes_moved = plan.q_bytes + plan.kv_bytes;
  stats.tasks = static_cast<int64_t>(tasks.size());
  plan.tasks = std::move(tasks);
  return plan;
}

}  // namespace corescape::planner
