#include "worker/communicator_group.h"

namespace corescape::worker {

absl::StatusOr<std::unique_ptr<CommunicatorGroup>> CommunicatorGroup::Connect(
    comm::Transport* transport, const v1::JobAssignment& assignment, absl::Duration timeout) {
  comm::CommunicatorOptions options;
  options.rank = assignment.rank();
  options.world_size = assignment.world_size();
  options.generation = assignment.generation();
  options.peer_addresses.assign(assignment.peer_data_addresses().begin(),
                                assignment.peer_data_addresses().end());
  options.secret_token = assignment.data_plane_token();
  options.timeout = timeout;
  options.job_id = assignment.job_id();
  auto communicator = comm::Communicator::Create(transport, options);
  if (!communicator.ok()) return communicator.status();
  return std::unique_ptr<CommunicatorGroup>(new CommunicatorGroup(*std::move(communicator)));
}

}  // namespace corescape::worker
