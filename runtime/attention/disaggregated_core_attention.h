#ifndef CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/remote_core_attention.h"
#include "runtime/attention/shipped_plan.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "runtime/attention/wire_format.h"
#include "runtime/comm/communicator.h"

namespace corescape::attention {

// What a worker's exchange is doing, for tests that check the order of
// events (ExchangeEvent::Kind), e.g. that ping-pong keeps two halves'
// exchanges in flight at once.
struct ExchangeEvent {
  enum class Kind {
    kRequestsSent,       // every request of the exchange is posted
    kWaitingForReplies,  // the caller starts waiting for the replies
    kRepliesReceived,    // the replies are in the caller's buffers
  };
  Kind kind;
  ExchangeHeader header;
};

struct DisaggregatedOptions {
  int32_t workers = 1;  // communicator ranks 0..workers-1
  int32_t servers = 1;  // ranks workers..workers+servers-1
  int32_t n_layers = 1;
  double tolerance = 0.05;
  PlannerKind planner = PlannerKind::kCorescape;
  // The servers keep Q/K/V/O/LSE from forward for backward; false: they
  // drop them and every backward request carries them again.
  bool keep_qkv_for_backward = true;
  // Test hook, called on the calling thread; may be empty.
  std::function<void(const ExchangeEvent&)> on_exchange_event;
};

// The worker's side of disaggregated core attention: every layer's core
// attention runs on the attention servers. At the forward of layer 0 (a new
// micro-batch) the workers tell every rank their document lengths — worker
// 0 with the scheduler's plan of the micro-batch when it has one — and each
// participant takes the same plan (announced_micro_batch.h); then per call the
// worker sends each server its Q/K/V (or dO) rows in plan order and writes
// what comes back into O/LSE (or dQ, and adds dK/dV). Every message carries
// an ExchangeHeader that the receiver checks.
//
// The model's tasks must be whole documents (q_begin = 0, q_row = kv_row),
// as train::ToModelBatch makes them. Calls must follow the trainer's order:
// per micro-batch, forward of layers 0..L-1, then optionally backward of
// layers L-1..0. One thread calls it; Abort may come from any thread.
//
// Ping-pong (Start*/Finish*, model/core_attention_executor.h): each half is
// its own micro-batch (own document lengths, own plan) whose headers carry
// the half; a call's requests go out at Start and its replies are awaited at
// Finish, so one half's exchange is in flight while the other half computes.
class DisaggregatedCoreAttention final : public RemoteCoreAttention {
 public:
  // `communicator`: rank = this worker's rank, world = workers + servers.
  static absl::StatusOr<std::unique_ptr<DisaggregatedCoreAttention>> Create(
      std::unique_ptr<comm::Communicator> communicator, const DisaggregatedOptions& options);
  // Tells the servers this worker is done (best effort), then closes.
  ~DisaggregatedCoreAttention() override;

  absl::Status Forward(const model::AttentionForwardCall& call) override;
  absl::Status Backward(const model::AttentionBackwardCall& call) override;
  absl::Status StartForward(int half, const model::AttentionForwardCall& call) override;
  absl::Status FinishForward(int half) override;
  absl::Status StartBackward(int half, const model::AttentionBackwardCall& call) override;
  absl::Status FinishBackward(int half) override;

  // RemoteCoreAttention.
  void Abort(const std::string& reason) override;
  // Only worker rank 0's weights count: it sends them with its document
  // lengths and every participant plans with them. Until the first call
  // every server counts as equally fast.
  absl::Status SetSpeedWeights(VersionedSpeedWeights weights) override
      ABSL_LOCKS_EXCLUDED(weights_mu_);
  // Rank 0 ships the plan to every participant with the documents of the
  // micro-batch it matches; other ranks refuse it (FailedPrecondition).
  absl::Status OfferShippedPlan(ShippedPlan plan) override;
  // On by default.
  void ShipSchedulerPlans(bool on) override { ship_plans_.store(on); }
  // Where the plans so far came from.
  const PlanSourceCounts& plan_sources() const { return planner_.sources(); }

  // The plan of the micro-batch begun last (null before the first forward).
  const MicroBatchPlan* current_plan() const {
    return last_begun_ != nullptr && last_begun_->plan ? &*last_begun_->plan : nullptr;
  }
  comm::Communicator& communicator() { return *communicator_; }

 private:
  DisaggregatedCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                             const DisaggregatedOptions& options);

  using Handles = std::vector<std::unique_ptr<comm::CollectiveHandle>>;
  // A call started and not finished: its messages in flight and where its
  // replies go.
  struct InFlightExchange {
    ExchangeHeader header;
    std::function<void(int32_t, const float*)> consume;
    Handles header_receives, payload_receives, sends;
  };
  // One micro-batch: a plain one, or one ping-pong half. Both halves'
  // exchanges can be in flight at once, so each has its own plan, buffers
  // and posted messages, kept as InPlaceCoreAttention keeps them. Held by
  // pointer: the handles of a call in flight point into its buffers.
  struct MicroBatchState {
    MicroBatchState(int32_t workers, int32_t servers);
    int half = -1;  // -1: a plain micro-batch; 0 / 1: ping-pong half A / B
    int64_t micro_batch = -1;
    std::optional<MicroBatchPlan> plan;
    std::vector<kernels::AttentionTask> tasks;
    int64_t rows = 0;
    std::vector<std::vector<RowRange>> query_rows;  // [server]: this worker's rows there
    std::vector<std::vector<RowRange>> kv_rows;     // [server]
    // Reused across calls: memory stays at the largest micro-batch's.
    std::vector<std::vector<float>> requests, replies;     // [server]
    std::vector<HeaderBytes> send_headers, reply_headers;  // [rank]
    std::optional<InFlightExchange> in_flight;  // last: its handles use the buffers above
  };

  int server_rank(int32_t server) const { return options_.workers + server; }
  // `half` -1: a plain call.
  absl::Status StartForwardCall(int half, const model::AttentionForwardCall& c);
  absl::Status StartBackwardCall(int half, const model::AttentionBackwardCall& c);
  // Checks what every call checks first and returns the state of a plain
  // call (half -1) or of ping-pong `half`; a forward of layer 0 takes it for
  // a new micro-batch of that kind.
  absl::StatusOr<MicroBatchState*> PrepareCall(int half, Pass pass, int layer);
  ExchangeHeader MakeHeader(const MicroBatchState& state, Pass pass, int layer,
                            const kernels::AttentionShape& shape) const;
  // Layer 0 forward: shares document lengths, plans the micro-batch.
  absl::Status BeginMicroBatch(MicroBatchState& state, const kernels::AttentionShape& shape,
                               absl::Span<const kernels::AttentionTask> tasks, int64_t rows);
  // Later calls: the same tasks as at layer 0 (CheckSameMicroBatch).
  static absl::Status CheckSame(const MicroBatchState& state,
                                absl::Span<const kernels::AttentionTask> tasks, int64_t rows) {
    return CheckSameMicroBatch(state.plan.has_value(), state.tasks, state.rows, tasks, rows,
                               "disaggregated attention");
  }
  // Starts one exchange of `state` with every server: request s is
  // request_floats(s) floats written by fill(s, out); the reply
  // (reply_floats(s) floats) goes to consume at FinishExchange.
  absl::Status StartExchange(MicroBatchState& state, ExchangeHeader header,
                             const std::function<int64_t(int32_t)>& request_floats,
                             const std::function<void(int32_t, float*)>& fill,
                             const std::function<int64_t(int32_t)>& reply_floats,
                             std::function<void(int32_t, const float*)> consume);
  // Waits for the exchange of `pass` of a plain call (half -1) or of
  // ping-pong `half`, and checks and consumes the replies.
  absl::Status FinishExchange(int half, Pass pass);
  void Notify(ExchangeEvent::Kind kind, const ExchangeHeader& header) const;
  // Aborts the communicator (a protocol error leaves the peers out of step)
  // and returns the error.
  absl::Status Fail(absl::Status status);

  std::unique_ptr<comm::Communicator> communicator_;
  const DisaggregatedOptions options_;
  const int32_t rank_;
  uint64_t exchange_ = 0;
  int64_t next_micro_batch_ = 0;
  // [0]: plain micro-batches and ping-pong half A; [1]: half B.
  std::array<std::unique_ptr<MicroBatchState>, 2> states_;
  const MicroBatchState* last_begun_ = nullptr;
  absl::Mutex weights_mu_;
  VersionedSpeedWeights weights_ ABSL_GUARDED_BY(weights_mu_);  // rank 0 sends these
  ShippedPlanQueue shipped_plans_;  // rank 0: the scheduler's plans
  std::atomic<bool> ship_plans_{true};
  ParticipantPlanner planner_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_
