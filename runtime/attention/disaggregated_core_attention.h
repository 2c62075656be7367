#ifndef CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/wire_format.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::attention {

struct DisaggregatedOptions {
  int32_t workers = 1;  // communicator ranks 0..workers-1
  int32_t servers = 1;  // ranks workers..workers+servers-1
  int32_t n_layers = 1;
  double tolerance = 0.05;
  PlannerKind planner = PlannerKind::kCorescape;
  // The servers keep Q/K/V/O/LSE from forward for backward; false: they
  // drop them and every backward request carries them again.
  bool keep_qkv_for_backward = true;
};

// The worker's side of disaggregated core attention: every layer's core
// attention runs on the attention servers. At the forward of layer 0 (a new
// micro-batch) the workers tell every rank their document lengths and each
// participant computes the same plan (micro_batch_plan.h); then per call the
// worker sends each server its Q/K/V (or dO) rows in plan order and writes
// what comes back into O/LSE (or dQ, and adds dK/dV). Every message carries
// an ExchangeHeader that the receiver checks.
//
// The model's tasks must be whole documents (q_begin = 0, q_row = kv_row),
// as train::ToModelBatch makes them. Calls must follow the trainer's order:
// per micro-batch, forward of layers 0..L-1, then optionally backward of
// layers L-1..0. One thread calls it; Abort may come from any thread.
class DisaggregatedCoreAttention final : public model::CoreAttentionExecutor {
 public:
  // `communicator`: rank = this worker's rank, world = workers + servers.
  static absl::StatusOr<std::unique_ptr<DisaggregatedCoreAttention>> Create(
      std::unique_ptr<comm::Communicator> communicator, const DisaggregatedOptions& options);
  // Tells the servers this worker is done (best effort), then closes.
  ~DisaggregatedCoreAttention() override;

  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o,
                       float* lse) override;
  absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                        absl::Span<const kernels::AttentionTask> tasks, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* d_o, int64_t rows, float* d_q, float* d_k,
                        float* d_v) override;

  // Fails the exchange in flight (and every later one) with `reason`.
  void Abort(const std::string& reason);

  // The plan of the current micro-batch (null before the first forward).
  const MicroBatchPlan* current_plan() const { return plan_ ? &*plan_ : nullptr; }
  comm::Communicator& communicator() { return *communicator_; }

 private:
  DisaggregatedCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                             const DisaggregatedOptions& options);

  int server_rank(int32_t server) const { return options_.workers + server; }
  ExchangeHeader MakeHeader(Pass pass, int layer, const kernels::AttentionShape& shape) const;
  // Layer 0 forward: shares document lengths, plans the micro-batch.
  absl::Status BeginMicroBatch(const kernels::AttentionShape& shape,
                               absl::Span<const kernels::AttentionTask> tasks, int64_t rows);
  // Later calls: the same tasks as at layer 0.
  absl::Status CheckSameMicroBatch(absl::Span<const kernels::AttentionTask> tasks,
                                   int64_t rows) const;
  // One exchange with every server: request s is request_floats(s) floats
  // written by fill(s, out); the reply (reply_floats(s)) goes to consume.
  absl::Status Exchange(ExchangeHeader header, const std::function<int64_t(int32_t)>& request_floats,
                        const std::function<void(int32_t, float*)>& fill,
                        const std::function<int64_t(int32_t)>& reply_floats,
                        const std::function<void(int32_t, const float*)>& consume);
  // Aborts the communicator (a protocol error leaves the peers out of step)
  // and returns the error.
  absl::Status Fail(absl::Status status);

  std::unique_ptr<comm::Communicator> communicator_;
  const DisaggregatedOptions options_;
  const int32_t rank_;
  uint64_t exchange_ = 0;
  int64_t micro_batch_ = -1;
  std::optional<MicroBatchPlan> plan_;
  std::vector<kernels::AttentionTask> tasks_;  // of the current micro-batch
  int64_t rows_ = 0;
  std::vector<std::vector<RowRange>> query_rows_;  // [server]: this worker's rows there
  std::vector<std::vector<RowRange>> kv_rows_;     // [server]
  // Reused across calls: memory stays at the largest micro-batch's.
  std::vector<std::vector<float>> requests_, replies_;
  std::vector<HeaderBytes> send_headers_, reply_headers_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_DISAGGREGATED_CORE_ATTENTION_H_
