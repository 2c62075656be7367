#include "runtime/planner/planner_test_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/server_batch.h"

namespace corescape::planner {

ModelShape DistcaShape() {
  return ModelShape{.hidden = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
                    .bytes_per_element = 2};
}

PlanInput InPlaceInput(std::vector<std::vector<int64_t>> worker_documents) {
  PlanInput input;
  input.model = DistcaShape();
  for (int32_t w = 0; w < static_cast<int32_t>(worker_documents.size()); ++w) {
    input.servers.push_back(AttentionServer{.speed = 1.0, .colocated_worker = w});
  }
  input.worker_documents = std::move(worker_documents);
  return input;
}

PlanInput DistcaWorkedExample() {
  return InPlaceInput({{16384},
                       {8192, 8192},
                       {4096, 4096, 4096, 4096},
                       {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}});
}

std::vector<std::vector<int64_t>> RandomBatches(std::mt19937_64& rng, int workers,
                                                int64_t tokens, int64_t max_length) {
  std::uniform_real_distribution<double> log_length(0.0, std::log(static_cast<double>(max_length)));
  std::vector<std::vector<int64_t>> batches(workers);
  for (auto& batch : batches) {
    int64_t left = tokens;
    while (left > 0) {
      const int64_t length = std::max<int64_t>(1, std::llround(std::exp(log_length(rng))));
      batch.push_back(std::min(length, left));
      left -= batch.back();
    }
  }
  return batches;
}

std::string CheckPlan(const PlanInput& input, const Plan& plan) {
  const int n_workers = static_cast<int>(input.worker_documents.size());
  std::vector<std::vector<std::vector<int>>> hits(n_workers);
  int64_t doc_pairs = 0;
  for (int w = 0; w < n_workers; ++w) {
    for (int64_t length : input.worker_documents[w]) {
      hits[w].emplace_back(length, 0);
      doc_pairs += DocumentPairs(length);
    }
  }
  int64_t task_pairs = 0;
  std::vector<int64_t> server_pairs(input.servers.size(), 0), server_tasks(input.servers.size(), 0);
  for (const PlannedTask& t : plan.tasks) {
    if (t.worker < 0 || t.worker >= n_workers || t.document < 0 ||
        t.document >= static_cast<int>(hits[t.worker].size())) {
      return absl::StrCat("task names a missing document: worker ", t.worker, " doc ", t.document);
    }
    const int64_t length = input.worker_documents[t.worker][t.document];
    if (t.q_begin < 0 || t.q_end <= t.q_begin || t.q_end > length) {
      return absl::StrCat("bad range [", t.q_begin, ", ", t.q_end, ") of a ", length,
                          "-token document");
    }
    if (t.server < 0 || t.server >= static_cast<int>(input.servers.size())) {
      return absl::StrCat("bad server ", t.server);
    }
    for (int64_t p = t.q_begin; p < t.q_end; ++p) ++hits[t.worker][t.document][p];
    // Pairs counted the slow way: query p sees keys 0..p.
    for (int64_t p = t.q_begin; p < t.q_end; ++p) {
      task_pairs += p + 1;
      server_pairs[t.server] += p + 1;
    }
    ++server_tasks[t.server];
  }
  for (int w = 0; w < n_workers; ++w) {
    for (size_t d = 0; d < hits[w].size(); ++d) {
      for (size_t p = 0; p < hits[w][d].size(); ++p) {
        if (hits[w][d][p] != 1) {
          return absl::StrCat("worker ", w, " doc ", d, " token ", p, " covered ",
                              hits[w][d][p], " times");
        }
      }
    }
  }
  if (task_pairs != doc_pairs) {
    return absl::StrCat("pairs not conserved: tasks ", task_pairs, " documents ", doc_pairs);
  }
  for (size_t s = 0; s < input.servers.size(); ++s) {
    if (server_pairs[s] != plan.servers[s].pairs || server_tasks[s] != plan.servers[s].tasks) {
      return absl::StrCat("server ", s, " load disagrees with its tasks");
    }
    absl::StatusOr<ServerBatch> batch = LayOutServerBatch(plan, static_cast<int32_t>(s));
    if (!batch.ok()) return batch.status().ToString();
    for (const KernelTask& k : batch->tasks) {
      const auto doc = std::find_if(batch->documents.begin(), batch->documents.end(),
                                    [&](const ServerDocument& d) { return d.kv_row == k.kv_row; });
      if (doc == batch->documents.end() || doc->kv_rows < k.q_end) {
        return absl::StrCat("server ", s, ": a task's K/V block lacks part of prefix [0, ",
                            k.q_end, ")");
      }
    }
  }
  return "";
}

}  // namespace corescape::planner
