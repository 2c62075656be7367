#ifndef CORESCAPE_RUNTIME_ATTENTION_REMOTE_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_ATTENTION_REMOTE_CORE_ATTENTION_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/attention/shipped_plan.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::attention {

// A core-attention executor whose attention is shared with other processes
// over an attention communicator: on the job's attention servers
// (DisaggregatedCoreAttention) or among its workers (InPlaceCoreAttention).
// Besides the model's calls, the worker's job runner controls it from its
// session thread through what follows; each executor says which of these
// apply to it and refuses the rest with FailedPrecondition.
class RemoteCoreAttention : public model::CoreAttentionExecutor {
 public:
  // Fails the exchange in flight (and every later one) with `reason`, on
  // this process and its peers (any thread): a stop, or a newer attention
  // epoch, must not wait for a timeout.
  virtual void Abort(const std::string& reason) = 0;

  // The attention servers' speed weights (the scheduler's
  // AttentionSpeedWeights) for the plans of the next micro-batches (any
  // thread). InvalidArgument, and nothing changes, unless there is one
  // finite weight > 0 per server.
  virtual absl::Status SetSpeedWeights(VersionedSpeedWeights weights) = 0;

  // The scheduler's plan of an upcoming micro-batch (shipped_plan.h; any
  // thread). Only worker rank 0's count: it ships them with its documents.
  virtual absl::Status OfferShippedPlan(ShippedPlan plan) = 0;

  // Whether worker rank 0 ships the scheduler's plans with the next
  // micro-batches (any thread): off during validation, which the scheduler
  // never plans and whose lengths could match worker 0's part of a queued
  // plan while the other workers' differ.
  virtual void ShipSchedulerPlans(bool on) = 0;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_REMOTE_CORE_ATTENTION_H_
