#include "worker/in_place_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/comm/communicator.h"

namespace corescape::worker {
namespace {

class Adapter final : public AbortableAttention {
 public:
  explicit Adapter(std::unique_ptr<attention::InPlaceCoreAttention> inner)
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
  void Abort(const std::string& reason) override { inner_->Abort(reason); }

 private:
  std::unique_ptr<attention::InPlaceCoreAttention> inner_;
};

}  // namespace

std::string InPlaceAttentionCommunicatorId(absl::string_view job_id) {
  return absl::StrCat(job_id, "/attn-inplace");
}

absl::StatusOr<std::shared_ptr<AbortableAttention>> ConnectInPlaceAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  if (assignment.attention_server_addresses_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", assignment.job_id(), " is IN_PLACE but its assignment names ",
                     assignment.attention_server_addresses_size(),
                     " attention servers; in-place attention runs on the workers"));
  }
  comm::CommunicatorOptions options;
  options.rank = assignment.rank();
  options.world_size = assignment.peer_data_addresses_size();
  options.generation = assignment.generation();
  options.peer_addresses.assign(assignment.peer_data_addresses().begin(),
                                assignment.peer_data_addresses().end());
  options.secret_token = assignment.data_plane_token();
  options.timeout = timeout;
  options.job_id = InPlaceAttentionCommunicatorId(assignment.job_id());
  auto communicator = comm::Communicator::Create(transport, options);
  if (!communicator.ok()) return communicator.status();
  attention::InPlaceOptions attention_options;
  attention_options.n_layers = config.model.n_layers;
  attention_options.tolerance = assignment.spec().attention().tolerance();
  attention_options.keep_qkv_for_backward = assignment.spec().attention().keep_qkv_for_backward();
  attention_options.threads = config.threads;
  auto executor =
      attention::InPlaceCoreAttention::Create(*std::move(communicator), attention_options);
  if (!executor.ok()) return executor.status();
  return std::shared_ptr<AbortableAttention>(std::make_shared<Adapter>(*std::move(executor)));
}

}  // namespace corescape::worker
