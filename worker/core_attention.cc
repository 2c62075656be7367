#include "worker/core_attention.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/disaggregated_core_attention.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_communicator.h"

namespace corescape::worker {
namespace {

absl::StatusOr<std::shared_ptr<attention::RemoteCoreAttention>> ConnectDisaggregated(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  const int servers = assignment.attention_server_addresses_size();
  if (servers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", assignment.job_id(), " is DISAGGREGATED but its assignment names no attention "
        "servers"));
  }
  auto communicator = comm::Communicator::Create(
      transport,
      job::JobCommunicatorOptions(assignment, job::JobCommunicator::kAttention, timeout));
  if (!communicator.ok()) return communicator.status();
  attention::DisaggregatedOptions options;
  options.workers = assignment.peer_data_addresses_size();
  options.servers = servers;
  options.n_layers = config.model.n_layers;
  options.tolerance = assignment.spec().attention().tolerance();
  options.keep_qkv_for_backward = assignment.spec().attention().keep_qkv_for_backward();
  auto executor = attention::DisaggregatedCoreAttention::Create(*std::move(communicator), options);
  if (!executor.ok()) return executor.status();
  return std::shared_ptr<attention::RemoteCoreAttention>(*std::move(executor));
}

absl::StatusOr<std::shared_ptr<attention::RemoteCoreAttention>> ConnectInPlace(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  if (assignment.attention_server_addresses_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", assignment.job_id(), " is IN_PLACE but its assignment names ",
                     assignment.attention_server_addresses_size(),
                     " attention servers; in-place attention runs on the workers"));
  }
  auto communicator = comm::Communicator::Create(
      transport, job::JobCommunicatorOptions(assignment, job::JobCommunicator::kInPlaceAttention,
                                             timeout));
  if (!communicator.ok()) return communicator.status();
  attention::InPlaceOptions options;
  options.n_layers = config.model.n_layers;
  options.tolerance = assignment.spec().attention().tolerance();
  options.keep_qkv_for_backward = assignment.spec().attention().keep_qkv_for_backward();
  options.threads = config.threads;
  auto executor = attention::InPlaceCoreAttention::Create(*std::move(communicator), options);
  if (!executor.ok()) return executor.status();
  return std::shared_ptr<attention::RemoteCoreAttention>(*std::move(executor));
}

}  // namespace

absl::StatusOr<std::shared_ptr<attention::RemoteCoreAttention>> ConnectCoreAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout) {
  switch (assignment.spec().attention().mode()) {
    case v1::DISAGGREGATED:
      return ConnectDisaggregated(transport, assignment, config, timeout);
    case v1::IN_PLACE:
      return ConnectInPlace(transport, assignment, config, timeout);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("job ", assignment.job_id(), " runs ",
                       v1::AttentionMode_Name(assignment.spec().attention().mode()),
                       " attention: no executor to connect"));
  }
}

}  // namespace corescape::worker
