#ifndef CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_

// In-place core attention (attention.mode = IN_PLACE): the W workers of a
// job are also its W attention servers. There is no server daemon; each
// worker computes its share of everyone's core attention.
//
// Per micro-batch, at the forward of layer 0, every worker tells every other
// worker its document lengths (and, once measured, its attention speed) and
// each computes the same plan (micro_batch_plan.h, in_place: server s is
// worker s, speeds from the announced ones). The planner keeps
// every document at home and moves only what a worker holds beyond its fair
// share of the cost to workers with less: a worker with a long document
// ships part of its attention to workers with short ones (the straggler fix).
//
// Per executor call ("exchange"), a symmetric all-to-all-v over the job's
// in-place attention communicator (ranks = worker ranks), every message
// posted at once with async point-to-point so no order can deadlock. To each
// other worker p, this worker sends
//   kHeaderTag     ExchangeHeader (64 bytes). At the forward of layer 0 it
//                  is sent twice: first announcing its documents message
//                  (num_documents = n, num_speed_weights = 1 once it has
//                  measured its speed), followed by
//   kDocumentsTag  the documents message (documents_message.h,
//                  DocumentsFormat::InPlace: n int64 lengths, then its speed
//                  as a one-weight VersionedSpeedWeights; omitted when empty); then,
//                  after planning, as every call, with payload_bytes set.
//   kPayloadTag    its rows that p computes, wire_format.h's request layout
//                  (forward: Q | K | V, each K/V prefix once per destination;
//                  backward: dO [| Q | K | V | O | LSE without
//                  keep_qkv_for_backward]); omitted when empty.
// then runs ONE fused kernel call over its own tasks plus everything it
// received (in_place_fused_batch.h) and answers each peer with
//   kReplyHeaderTag / kReplyPayloadTag   O | LSE, or dQ | dK | dV with the
//                  K/V gradients of a shared prefix summed here,
// and receives its own results the same way. Its own share never leaves the
// process. Because the very first message of every exchange is a header on
// one tag, workers whose calls are out of step see a mismatch and fail with
// it (header checks as wire_format.h's), never a hang.
//
// Ping-pong halves (Start*/Finish*) are micro-batches of their own whose
// headers carry the half (kPingPongHalfA/B); both halves' exchanges may be
// in flight at once, each with its own state.
//
// When the executor is destroyed healthy it sends every peer an `end`
// header and waits for theirs, so nobody closes while a peer still reads.
//
// The model's tasks must be whole documents (q_begin 0, q_row = kv_row), as
// train::ToModelBatch makes them; calls follow the trainer's order (per
// micro-batch forward of layers 0..L-1, then optionally backward L-1..0),
// the same on every worker. One thread calls it; Abort may come from any.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/attention/in_place_fused_batch.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/remote_core_attention.h"
#include "runtime/attention/wire_format.h"
#include "runtime/base/clock.h"
#include "runtime/base/thread_pool.h"
#include "runtime/comm/handle_set.h"
#include "runtime/comm/communicator.h"
#include "runtime/planner/speed_estimate.h"

namespace corescape::attention {

struct InPlaceOptions {
  int32_t n_layers = 1;
  double tolerance = 0.05;
  PlannerKind planner = PlannerKind::kCorescape;
  // The computing worker keeps the Q/K/V/O/LSE it received for a layer's
  // forward until that layer's backward (memory); false: every backward
  // request carries them again (bytes).
  bool keep_qkv_for_backward = true;
  // Threads of the fused kernel call (a pool the executor owns); < 1: the
  // default (CORESCAPE_NUM_THREADS or all cores).
  int threads = 1;
  // Plan with the workers' measured attention speeds (each worker times its
  // fused kernel calls and sends its speed with its documents), so a slow
  // or busy worker gets less; false: equal speeds.
  bool learn_speeds = true;
  // What this worker's fused kernel calls are timed with (read on the
  // calling thread just before and after each); tests give their own.
  const Clock* clock = RealClock::Get();
};

// Counted per micro-batch, from its plan.
struct InPlaceStats {
  int64_t micro_batches = 0;
  int64_t exchanges = 0;
  int64_t tasks_computed = 0;       // kernel tasks run here, own and peers'
  int64_t peer_tasks_computed = 0;  // of those, tasks of other workers
  int64_t tasks_shipped = 0;        // this worker's tasks run by other workers
  // The speed weights (one per worker, mean 1) of the last plan.
  std::vector<double> speed_weights;
};

class InPlaceCoreAttention final : public RemoteCoreAttention {
 public:
  // `communicator`: the job's in-place attention communicator, rank = this
  // worker's rank, world = the job's workers.
  static absl::StatusOr<std::unique_ptr<InPlaceCoreAttention>> Create(
      std::unique_ptr<comm::Communicator> communicator, const InPlaceOptions& options);
  // Ends with the peers (see above; best effort), then closes.
  ~InPlaceCoreAttention() override;

  absl::Status Forward(const model::AttentionForwardCall& call) override;
  absl::Status Backward(const model::AttentionBackwardCall& call) override;
  // Ping-pong (model/core_attention_executor.h): each half is its own
  // micro-batch with its own plan. Start posts the half's requests (and the
  // receives for the peers' requests and replies) and returns; Finish takes
  // the peers' requests, runs this worker's fused kernel call for the half,
  // replies, and waits for its own results. So while the trainer computes
  // one half, the other half's rows are on the wire. Every worker calls
  // Start/Finish in the same order; Finish(h) waits only on the peers'
  // Start(h) and Finish(h), so no order of arrival can deadlock.
  absl::Status StartForward(int half, const model::AttentionForwardCall& call) override;
  absl::Status FinishForward(int half) override;
  absl::Status StartBackward(int half, const model::AttentionBackwardCall& call) override;
  absl::Status FinishBackward(int half) override;

  // RemoteCoreAttention. The workers plan with their own measured speeds,
  // among themselves: there are no attention servers to weigh and no
  // scheduler plans, so SetSpeedWeights and OfferShippedPlan are refused
  // (FailedPrecondition) and ShipSchedulerPlans changes nothing.
  void Abort(const std::string& reason) override;
  absl::Status SetSpeedWeights(VersionedSpeedWeights weights) override;
  absl::Status OfferShippedPlan(ShippedPlan plan) override;
  void ShipSchedulerPlans(bool /*on*/) override {}

  // The plan of the micro-batch begun last (null before the first forward).
  const MicroBatchPlan* current_plan() const {
    return last_begun_ != nullptr && last_begun_->plan ? &*last_begun_->plan : nullptr;
  }
  const InPlaceStats& stats() const { return stats_; }
  comm::Communicator& communicator() { return *communicator_; }

 private:
  InPlaceCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                       const InPlaceOptions& options);

  // The parts of one exchange; sizes are functions of a WorkerShare (what a
  // source worker has on a computing worker). They run at Start (requests)
  // and at Finish (the rest), so they hold copies of what they use.
  struct ExchangeSteps {
    std::function<int64_t(const WorkerShare&)> request_floats, reply_floats;
    std::function<void(int32_t peer, float* out)> fill_request;  // my rows for peer
    std::function<void(int32_t source, const float* in)> take;   // into the fused batch
    std::function<absl::Status()> compute;                       // the fused kernel call
    std::function<void(int32_t source, float* out)> put_reply;   // out of the fused batch
    std::function<void(int32_t peer, const float* in)> consume;  // my results from peer
  };
  // A started exchange: its messages in flight and what Finish does next.
  struct InFlightExchange {
    ExchangeHeader header;
    ExchangeSteps steps;
    comm::HandleSet request_headers, request_payloads, reply_headers, reply_payloads, sends;
  };
  // One micro-batch: a plain one, or one ping-pong half. Both halves'
  // exchanges can be in flight at once, so each has its own plan, fused
  // batch, buffers and posted messages. Held by pointer: `batch` points at
  // `plan`, which must not move.
  struct MicroBatchState {
    MicroBatchState(int32_t self, int32_t workers, ThreadPool* pool);
    int half = -1;  // -1: a plain micro-batch; 0 / 1: ping-pong half A / B
    int64_t micro_batch = -1;
    // The previous call of this micro-batch (none before its first forward).
    std::optional<std::pair<Pass, int>> last_call;
    std::optional<MicroBatchPlan> plan;
    std::vector<kernels::AttentionTask> tasks;
    int64_t rows = 0;
    std::vector<std::vector<RowRange>> query_rows;  // [worker as server]: my rows there
    std::vector<std::vector<RowRange>> kv_rows;     // [worker as server]
    InPlaceFusedBatch batch;
    // Reused across calls: memory stays at the largest micro-batch's.
    // [peer]; the entries of this worker hold its own share.
    std::vector<std::vector<float>> requests, inbound, replies, results;
    std::vector<HeaderBytes> out_headers, out_reply_headers, in_headers, in_reply_headers;
    std::vector<std::vector<int64_t>> peer_messages;  // [peer]: its documents message
    // This worker's kernel time on the micro-batch and the plan's cost of
    // it; recorded into the speed estimate at the state's next micro-batch.
    double timed_cost = 0, timed_seconds = 0;
    std::optional<InFlightExchange> in_flight;  // last: its handles use the buffers above
  };

  // The state of a plain call (half -1) or of ping-pong `half`;
  // InvalidArgument for another half, FailedPrecondition if that state (or,
  // for a plain call, any) still has an exchange in flight.
  absl::StatusOr<MicroBatchState*> StateFor(int half, bool starting);
  // What every Start*Call checks first (communicator health, the state's
  // availability, the layer, the kind and order of calls); fails the
  // communicator on a violation. A forward of layer 0 takes the state for
  // `half`.
  absl::StatusOr<MicroBatchState*> PrepareCall(int half, Pass pass, int layer);
  // CheckPeerHeader for every peer's header, against its payload's size.
  absl::Status CheckPeerHeaders(const ExchangeHeader& expected,
                                const std::vector<HeaderBytes>& headers,
                                const std::vector<std::vector<float>>& payloads,
                                const char* what) const;
  // FailedPrecondition unless a call of `half` (-1: whole) continues the
  // state's micro-batch, begun by a layer-0 forward of the same kind.
  absl::Status CheckSameKind(const MicroBatchState& state, int half) const;
  ExchangeHeader MakeHeader(const MicroBatchState& state, Pass pass, int layer,
                            const kernels::AttentionShape& shape) const;
  // FailedPrecondition unless (pass, layer) may follow the state's previous call.
  absl::Status CheckCallOrder(const MicroBatchState& state, Pass pass, int layer) const;
  // Forward of layer 0: shares document lengths, plans the micro-batch.
  absl::Status BeginMicroBatch(MicroBatchState& state, const kernels::AttentionShape& shape,
                               absl::Span<const kernels::AttentionTask> tasks, int64_t rows);
  // Later calls: the same tasks as at layer 0 (CheckSameMicroBatch).
  static absl::Status CheckSame(const MicroBatchState& state,
                                absl::Span<const kernels::AttentionTask> tasks, int64_t rows) {
    return CheckSameMicroBatch(state.plan.has_value(), state.tasks, state.rows, tasks, rows,
                               "in-place attention");
  }
  absl::Status StartForwardCall(int half, const model::AttentionForwardCall& c);
  absl::Status StartBackwardCall(int half, const model::AttentionBackwardCall& c);
  absl::Status FinishCall(int half, Pass pass);
  // Posts every receive and every request of one exchange of `state`.
  absl::Status StartExchange(MicroBatchState& state, ExchangeHeader header, ExchangeSteps steps);
  // Takes the peers' requests, computes, replies, and consumes the results.
  absl::Status FinishExchange(MicroBatchState& state);
  // Decodes a peer's header and checks it against the expected exchange and
  // (expected_floats >= 0) the plan's payload size.
  absl::StatusOr<ExchangeHeader> CheckPeerHeader(const ExchangeHeader& expected,
                                                 const HeaderBytes& bytes, int32_t peer,
                                                 int64_t expected_floats, const char* what) const;
  // Aborts the communicator (a protocol error leaves the peers out of step)
  // and returns the error.
  absl::Status Fail(absl::Status status);

  std::unique_ptr<comm::Communicator> communicator_;
  const InPlaceOptions options_;
  const int32_t self_;
  const int32_t workers_;
  std::unique_ptr<ThreadPool> pool_;
  uint64_t exchange_ = 0;       // exchanges started
  int64_t next_micro_batch_ = 0;
  // [0]: plain micro-batches and ping-pong half A; [1]: half B.
  std::array<std::unique_ptr<MicroBatchState>, 2> states_;
  const MicroBatchState* last_begun_ = nullptr;
  planner::SpeedEstimate own_speed_;  // this worker's attention kernel
  InPlaceStats stats_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_
