#include "runtime/control/attention_communicator.h"

#include "runtime/attention/wire_format.h"

namespace corescape {

comm::CommunicatorOptions AttentionCommunicatorOptions(const v1::JobAssignment& assignment,
                                                       absl::Duration timeout) {
  comm::CommunicatorOptions options;
  options.rank = assignment.rank();
  options.world_size =
      assignment.peer_data_addresses_size() + assignment.attention_server_addresses_size();
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
  return options;
}

}  // namespace corescape
