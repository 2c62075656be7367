#ifndef CORESCAPE_RUNTIME_ATTENTION_SHIPPED_PLAN_H_
#define CORESCAPE_RUNTIME_ATTENTION_SHIPPED_PLAN_H_

// A plan of one micro-batch made ahead of time by the scheduler (its
// AttentionStepPlan): worker rank 0 holds the plans of upcoming steps and
// ships the one matching a micro-batch with its document lengths at the
// forward of layer 0. Every participant uses it if it covers exactly the documents
// the workers announced, and plans the micro-batch itself otherwise
// (micro_batch_plan.h: PlanAnnouncedMicroBatch), so a late or stale plan
// costs a local planning call, never a wrong result.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/planner/plan.h"

namespace corescape::attention {

// Plans larger than this are refused on the wire (far above any real
// micro-batch: it bounds what a corrupt header makes a receiver allocate).
inline constexpr int64_t kMaxShippedPlanTasks = int64_t{1} << 24;

struct ShippedPlan {
  int64_t step = 0;                    // the training step it was planned for
  uint64_t speed_weights_version = 0;  // of the weights it was planned with
  // server: index into the participants' servers.
  std::vector<planner::PlannedTask> tasks;

  bool operator==(const ShippedPlan&) const = default;
};

// The lengths of `worker`'s documents that the plan covers: per document
// index, the largest q_end of its tasks (0 for an index with no task).
std::vector<int64_t> PlannedDocumentLengths(const ShippedPlan& plan, int32_t worker);

// In int64 words: step, speed-weights version, task count, then per task
// worker, document, q_begin, q_end, server.
std::vector<int64_t> EncodeShippedPlan(const ShippedPlan& plan);
// DataLoss naming `who` if the words are not one encoded plan (ranges are
// checked when the plan is adopted against the announced documents).
absl::StatusOr<ShippedPlan> DecodeShippedPlan(absl::Span<const int64_t> words,
                                              absl::string_view who);

// Worker rank 0's plans from the scheduler, waiting for their micro-batch.
// Thread-safe: the scheduler's session offers, the training thread takes.
class ShippedPlanQueue {
 public:
  // The queue keeps the newest `capacity` plans: a worker that falls behind
  // its plans (they came for steps it never ran) must not grow it forever.
  explicit ShippedPlanQueue(size_t capacity = 64) : capacity_(capacity) {}

  void Offer(ShippedPlan plan) ABSL_LOCKS_EXCLUDED(mu_);

  struct Found {
    uint64_t id = 0;  // for Consume
    ShippedPlan plan;
  };
  // The oldest plan whose worker-0 documents are `lengths`, left in the
  // queue: only the participants can tell whether it fits the other
  // workers' documents too (a validation micro-batch, which the scheduler
  // never plans, may match worker 0's lengths alone). nullopt if none.
  std::optional<Found> FindMatching(absl::Span<const int64_t> lengths) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The plan `id` was used: it and every plan offered before it leave the
  // queue (their micro-batches are past).
  void Consume(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    uint64_t id = 0;
    std::vector<int64_t> worker0_lengths;
    ShippedPlan plan;
  };
  const size_t capacity_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_SHIPPED_PLAN_H_
