#include "scheduler/attention_failover.h"

#include "absl/strings/str_cat.h"
#include "scheduler/data_plane_secret.h"

namespace corescape::scheduler {

int AssignedAttentionServers(const v1::Job& job) {
  if (job.spec().attention().mode() != v1::DISAGGREGATED) return 0;
  if (job.assigned_attention_servers() > 0) return job.assigned_attention_servers();
  return job.spec().attention().attention_servers();
}

std::vector<LostAttentionServer> FindLostAttentionServers(
    const v1::Job& job, const std::map<std::string, v1::NodeInfo>& nodes) {
  std::vector<LostAttentionServer> lost;
  const int servers = AssignedAttentionServers(job);
  const int workers = job.assigned_nodes_size() - servers;
  for (int index = 0; index < servers && workers >= 0; ++index) {
    const int rank = workers + index;
    const std::string& name = job.assigned_nodes(rank);
    const std::string who = absl::StrCat("attention server ", index, " (", name, ")");
    std::string why;
    auto it = nodes.find(name);
    if (it == nodes.end()) {
      why = absl::StrCat(who, " vanished");
    } else if (it->second.state() == v1::DEAD || it->second.state() == v1::DEREGISTERED) {
      why = absl::StrCat(who, " is ", v1::NodeState_Name(it->second.state()));
    } else if (it->second.state() == v1::DRAINING) {
      why = absl::StrCat(who, " is draining");
    } else if (rank < job.assigned_incarnations_size() &&
               it->second.incarnation() != job.assigned_incarnations(rank)) {
      why = absl::StrCat(who, " restarted (incarnation ", it->second.incarnation(), ")");
    }
    if (why.empty()) continue;
    LostAttentionServer l{index, name, std::move(why)};
    l.reachable = it != nodes.end() && it->second.state() == v1::DRAINING;
    if (l.reachable) l.incarnation = it->second.incarnation();
    lost.push_back(std::move(l));
  }
  return lost;
}

std::vector<v1::JobAssignment> ParticipantAssignments(
    const v1::Job& job, const std::string& job_secret,
    const std::vector<v1::NodeInfo>& workers, const std::vector<v1::NodeInfo>& servers,
    absl::Duration failover_timeout) {
  const int worker_count = static_cast<int>(workers.size());
  const int total = worker_count + static_cast<int>(servers.size());
  std::vector<v1::JobAssignment> assignments(total);
  const std::string data_plane_secret = GenerationSecret(job_secret, job.generation());
  for (int rank = 0; rank < total; ++rank) {
    v1::JobAssignment& assign = assignments[rank];
    assign.set_job_id(job.job_id());
    assign.set_generation(job.generation());
    assign.set_rank(rank);
    assign.set_world_size(rank < worker_count ? worker_count : total);
    for (const v1::NodeInfo& peer : workers) {
      assign.add_peer_data_addresses(peer.data_address());
      assign.add_peer_names(peer.name());
    }
    for (const v1::NodeInfo& server : servers) {
      assign.add_attention_server_addresses(server.data_address());
      assign.add_peer_names(server.name());
    }
    *assign.mutable_spec() = job.spec();
    assign.set_resume_from_step(job.progress().checkpoint_step());
    assign.set_gradient_accumulation(job.gradient_accumulation());
    assign.set_data_plane_token(data_plane_secret);
    assign.set_attention_epoch(job.attention_epoch());
    assign.set_attention_failover_timeout_ms(absl::ToInt64Milliseconds(failover_timeout));
  }
  return assignments;
}

}  // namespace corescape::scheduler
