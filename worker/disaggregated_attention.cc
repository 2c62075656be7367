#include "worker/disaggregated_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/disaggregated_core_attention.h"
#include "runtime/attention/wire_format.h"
#include "runtime/comm/communicator.h"
#include "worker/in_place_attention.h"

namespace corescape::worker {
namespace {

class Adapter final : public AbortableAttention {
 public:
  explicit Adapter(std::unique_ptr<attention::DisaggregatedCoreAttention> inner)
      : inner_(std::move(inner)) {}
  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o,
                       float* lse) override {
    return inner_->Forward(layer, shape, tasks, q, k, v, rows, o, lse);
  }
  absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                        absl::Span<const kernels::AttentionTask> tasks, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* d_o, int64_t rows, float* d_q, float* d_k,
                        float* d_v) override {
    return inner_->Backward(layer, shape, tasks, q, k, v, o, lse, d_o, rows, d_q, d_k, d_v);
  }
  // Ping-pong: straight through, so both halves' exchanges can be in flight.
  absl::Status StartForward(int half, int layer, const kernels::AttentionShape& shape,
                            absl::Span<const kernels::AttentionTask> tasks, const float* q,
                            const float* k, const float* v, int64_t rows, float* o,
                            float* lse) override {
    return inner_->StartForward(half, layer, shape, tasks, q, k, v, rows, o, lse);
  }
  absl::Status FinishForward(int half) override { return inner_->FinishForward(half); }
  absl::Status StartBackward(int half, int layer, const kernels::AttentionShape& shape,
                             absl::Span<const kernels::AttentionTask> tasks, const float* q,
                             const float* k, const float* v, const float* o, const float* lse,
                             const float* d_o, int64_t rows, float* d_q, float* d_k,
                             float* d_v) override {
    return inner_->StartBackward(half, layer, shape, tasks, q, k, v, o, lse, d_o, rows, d_q, d_k,
                                 d_v);
  }
  absl::Status FinishBackward(int half) override { return inner_->FinishBackward(half); }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }
  absl::Status SetSpeedWeights(uint64_t version, const std::vector<double>& weights) override {
    return inner_->SetSpeedWeights(attention::SpeedWeights{version, weights});
  }

 private:
  std::unique_ptr<attention::DisaggregatedCoreAttention> inner_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<AbortableAttention>> ConnectDisaggregatedAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  // IN_PLACE jobs: the workers serve each other's attention.
  if (assignment.spec().attention().mode() == v1::IN_PLACE) {
    return ConnectInPlaceAttention(transport, assignment, config, timeout);
  }
  const int workers = assignment.peer_data_addresses_size();
  const int servers = assignment.attention_server_addresses_size();
  if (servers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", assignment.job_id(), " is DISAGGREGATED but its assignment names no attention "
        "servers"));
  }
  comm::CommunicatorOptions options;
  options.rank = assignment.rank();
  options.world_size = workers + servers;
  options.generation = assignment.generation();
  options.peer_addresses.assign(assignment.peer_data_addresses().begin(),
                                assignment.peer_data_addresses().end());
  options.peer_addresses.insert(options.peer_addresses.end(),
                                assignment.attention_server_addresses().begin(),
                                assignment.attention_server_addresses().end());
  options.secret_token = assignment.data_plane_token();
  options.timeout = timeout;
  options.job_id =
      attention::AttentionCommunicatorId(assignment.job_id(), assignment.attention_epoch());
  auto communicator = comm::Communicator::Create(transport, options);
  if (!communicator.ok()) return communicator.status();
  attention::DisaggregatedOptions attention_options;
  attention_options.workers = workers;
  attention_options.servers = servers;
  attention_options.n_layers = config.model.n_layers;
  attention_options.tolerance = assignment.spec().attention().tolerance();
  attention_options.keep_qkv_for_backward = assignment.spec().attention().keep_qkv_for_backward();
  auto executor =
      attention::DisaggregatedCoreAttention::Create(*std::move(communicator), attention_options);
  if (!executor.ok()) return executor.status();
  return std::shared_ptr<AbortableAttention>(std::make_shared<Adapter>(*std::move(executor)));
}

}  // namespace corescape::worker
