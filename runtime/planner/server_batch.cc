#include "runtime/planner/server_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace corescape::planner {

absl::StatusOr<ServerBatch> LayOutServerBatch(const Plan& plan, int32_t server) {
  if (server < 0 || server >= static_cast<int32_t>(plan.servers.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("server ", server, " is not in [0, ", plan.servers.size(), ")"));
  }
  ServerBatch batch;
  // Plan::tasks is sorted by (server, worker, document, q_begin).
  const auto first = std::lower_bound(
      plan.tasks.begin(), plan.tasks.end(), server,
      [](const PlannedTask& t, int32_t s) { return t.server < s; });
  for (auto it = first; it != plan.tasks.end() && it->server == server;) {
    const auto doc_begin = it;
    int64_t prefix = 0;
    for (; it != plan.tasks.end() && it->server == server && it->worker == doc_begin->worker &&
           it->document == doc_begin->document;
         ++it) {
      prefix = std::max(prefix, it->q_end);
    }
    const int64_t kv_row = batch.kv_rows;
    batch.documents.push_back(ServerDocument{doc_begin->worker, doc_begin->document, kv_row, prefix});
    batch.kv_rows += prefix;
    for (auto t = doc_begin; t != it; ++t) {
      batch.tasks.push_back(KernelTask{t->q_begin, t->q_end, batch.q_rows, kv_row});
      batch.plan_task.push_back(t - plan.tasks.begin());
      batch.q_rows += t->q_end - t->q_begin;
    }
  }
  return batch;
}

}  // namespace corescape::planner
