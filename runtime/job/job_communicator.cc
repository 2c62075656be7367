#include "runtime/job/job_communicator.h"

#include "absl/strings/str_cat.h"
#include "runtime/attention/wire_format.h"

namespace corescape::job {

comm::CommunicatorOptions JobCommunicatorOptions(const v1::JobAssignment& assignment,
                                                 JobCommunicator which, absl::Duration timeout) {
  comm::CommunicatorOptions options;
  options.rank = assignment.rank();
  options.generation = assignment.generation();
  options.peer_addresses.assign(assignment.peer_data_addresses().begin(),
                                assignment.peer_data_addresses().end());
  options.secret_token = assignment.data_plane_token();
  options.timeout = timeout;
  switch (which) {
    case JobCommunicator::kDataParallel:
      options.world_size = assignment.world_size();
      options.job_id = assignment.job_id();
      break;
    case JobCommunicator::kAttention:
      options.peer_addresses.insert(options.peer_addresses.end(),
                                    assignment.attention_server_addresses().begin(),
                                    assignment.attention_server_addresses().end());
      options.world_size = static_cast<int>(options.peer_addresses.size());
      options.job_id =
          attention::AttentionCommunicatorId(assignment.job_id(), assignment.attention_epoch());
      break;
    case JobCommunicator::kInPlaceAttention:
      options.world_size = assignment.peer_data_addresses_size();
      options.job_id = attention::InPlaceAttentionCommunicatorId(assignment.job_id());
      break;
    case JobCommunicator::kControl:
      options.world_size = assignment.world_size();
      options.job_id = absl::StrCat(assignment.job_id(), "/control");
      break;
  }
  return options;
}

absl::StatusOr<std::unique_ptr<train::CommunicatorGroup>> ConnectDataParallelGroup(
    comm::Transport* transport, const v1::JobAssignment& assignment, absl::Duration timeout) {
  return train::CommunicatorGroup::Connect(
      transport, JobCommunicatorOptions(assignment, JobCommunicator::kDataParallel, timeout),
      JobCommunicatorOptions(assignment, JobCommunicator::kControl, timeout));
}

}  // namespace corescape::job
