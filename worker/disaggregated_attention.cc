#include "worker/disaggregated_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/disaggregated_core_attention.h"
#include "runtime/comm/communicator.h"
#include "runtime/control/job_communicator.h"
#include "worker/attention_forwarder.h"
#include "worker/in_place_attention.h"

namespace corescape::worker {

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
  auto communicator = comm::Communicator::Create(
      transport, JobCommunicatorOptions(assignment, JobCommunicator::kAttention, timeout));
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
  return std::shared_ptr<AbortableAttention>(
      std::make_shared<AttentionForwarder<attention::DisaggregatedCoreAttention>>(
          *std::move(executor)));
}

}  // namespace corescape::worker
