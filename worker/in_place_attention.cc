#include "worker/in_place_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/comm/communicator.h"
#include "worker/attention_forwarder.h"

namespace corescape::worker {

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
  return std::shared_ptr<AbortableAttention>(
      std::make_shared<AttentionForwarder<attention::InPlaceCoreAttention>>(
          *std::move(executor)));
}

}  // namespace corescape::worker
