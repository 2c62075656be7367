#ifndef CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_

// In-place core attention (attention.mode = IN_PLACE): the W workers of a
// job are also its W attention servers. There is no server daemon; each
// worker computes its share of everyone's core attention.
//
// Per micro-batch, at the forward of layer 0, every worker tells every other
// worker its document lengths and each computes the same plan
// (micro_batch_plan.h, in_place: server s is worker s). The planner keeps
// every document at home and moves only what a worker holds beyond its fair
// share of the cost to workers with less: a worker with a long document
// ships part of its attention to workers with short ones (the straggler fix).
//
// Per executor call ("exchange"), a symmetric all-to-all-v over the job's
// in-place attention communicator (ranks = worker ranks), every message
// posted at once with async point-to-point so no order can deadlock. To each
// other worker p, this worker sends
//   kHeaderTag     ExchangeHeader (64 bytes). At the forward of layer 0 it
//                  is sent twice: first with num_documents = n, followed by
//   kDocumentsTag  n int64 lengths (omitted when n = 0); then, after
//                  planning, as every call, with payload_bytes set.
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
// When the executor is destroyed healthy it sends every peer an `end`
// header and waits for theirs, so nobody closes while a peer still reads.
//
// The model's tasks must be whole documents (q_begin 0, q_row = kv_row), as
// train::ToModelBatch makes them; calls follow the trainer's order (per
// micro-batch forward of layers 0..L-1, then optionally backward L-1..0),
// the same on every worker. One thread calls it; Abort may come from any.

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
#include "runtime/attention/wire_format.h"
#include "runtime/base/thread_pool.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/core_attention_executor.h"

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
};

// Counted per micro-batch, from its plan.
struct InPlaceStats {
  int64_t micro_batches = 0;
  int64_t exchanges = 0;
  int64_t tasks_computed = 0;       // kernel tasks run here, own and peers'
  int64_t peer_tasks_computed = 0;  // of those, tasks of other workers
  int64_t tasks_shipped = 0;        // this worker's tasks run by other workers
};

class InPlaceCoreAttention final : public model::CoreAttentionExecutor {
 public:
  // `communicator`: the job's in-place attention communicator, rank = this
  // worker's rank, world = the job's workers.
  static absl::StatusOr<std::unique_ptr<InPlaceCoreAttention>> Create(
      std::unique_ptr<comm::Communicator> communicator, const InPlaceOptions& options);
  // Ends with the peers (see above; best effort), then closes.
  ~InPlaceCoreAttention() override;

  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o, float* lse) override;
  absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                        absl::Span<const kernels::AttentionTask> tasks, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* d_o, int64_t rows, float* d_q, float* d_k,
                        float* d_v) override;

  // Fails the exchange in flight (and every later one) with `reason`; the
  // peers fail with it too.
  void Abort(const std::string& reason);

  // The plan of the current micro-batch (null before the first forward).
  const MicroBatchPlan* current_plan() const { return plan_ ? &*plan_ : nullptr; }
  const InPlaceStats& stats() const { return stats_; }
  comm::Communicator& communicator() { return *communicator_; }

 private:
  InPlaceCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                       const InPlaceOptions& options);

  // The parts of one exchange; sizes are functions of a WorkerShare (what a
  // source worker has on a computing worker).
  struct ExchangeSteps {
    std::function<int64_t(const WorkerShare&)> request_floats, reply_floats;
    std::function<void(int32_t peer, float* out)> fill_request;  // my rows for peer
    std::function<void(int32_t source, const float* in)> take;   // into the fused batch
    std::function<absl::Status()> compute;                       // the fused kernel call
    std::function<void(int32_t source, float* out)> put_reply;   // out of the fused batch
    std::function<void(int32_t peer, const float* in)> consume;  // my results from peer
  };

  ExchangeHeader MakeHeader(Pass pass, int layer, const kernels::AttentionShape& shape) const;
  // FailedPrecondition unless (pass, layer) may follow the previous call.
  absl::Status CheckCallOrder(Pass pass, int layer) const;
  // Forward of layer 0: shares document lengths, plans the micro-batch.
  absl::Status BeginMicroBatch(const kernels::AttentionShape& shape,
                               absl::Span<const kernels::AttentionTask> tasks, int64_t rows);
  // Later calls: the same tasks as at layer 0.
  absl::Status CheckSameMicroBatch(absl::Span<const kernels::AttentionTask> tasks,
                                   int64_t rows) const;
  absl::Status Exchange(ExchangeHeader header, const ExchangeSteps& steps);
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
  InPlaceFusedBatch batch_;
  uint64_t exchange_ = 0;
  int64_t micro_batch_ = -1;
  // The previous call of this micro-batch (none before the first forward).
  std::optional<std::pair<Pass, int>> last_call_;
  std::optional<MicroBatchPlan> plan_;
  std::vector<kernels::AttentionTask> tasks_;  // of the current micro-batch
  int64_t rows_ = 0;
  std::vector<std::vector<RowRange>> query_rows_;  // [worker as server]: my rows there
  std::vector<std::vector<RowRange>> kv_rows_;     // [worker as server]
  InPlaceStats stats_;
  // Reused across calls: memory stays at the largest micro-batch's. [peer];
  // the entries of this worker hold its own share.
  std::vector<std::vector<float>> requests_, inbound_, replies_, results_;
  std::vector<HeaderBytes> out_headers_, out_reply_headers_, in_headers_, in_reply_headers_;
  std::vector<std::vector<int64_t>> peer_documents_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_CORE_ATTENTION_H_
