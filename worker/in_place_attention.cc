#include "worker/in_place_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/comm/communicator.h"
#include "runtime/control/job_communicator.h"
#include "worker/attention_forwarder.h"

namespace corescape::worker {

absl::StatusOr<std::shared_ptr<AbortableAttention>> ConnectInPlaceAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  if (assignment.attention_server_addresses_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", assignment.job_id(), " is IN_PLACE but its assignment names ",
                     assignment.attention_server_addresses_size(),
                     " attention servers; in-place attention runs on the workers"));
  }
  auto communicator = comm::Communicator::Create(
      transport, JobCommunicatorOptions(assignment, JobCommunicator::kInPlaceAttention, timeout));
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
