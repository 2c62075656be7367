#include "scheduler/operator_service.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "scheduler/node_listing.h"
#include "scheduler/request_validation.h"
#include "scheduler/status_conversion.h"

namespace corescape::scheduler {

grpc::Status OperatorServiceImpl::ListNodes(grpc::ServerContext* context,
                                            const v1::ListNodesRequest* request,
                                            v1::ListNodesResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateListNodesRequest(*request); !s.ok()) {
    return ToGrpcStatus(s);
  }
  auto page = ListNodesPage(*registry_, *request, jobs_->RunningJobsByNode());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (v1::NodeInfo& node : page->items) *response->add_nodes() = std::move(node);
  response->set_next_page_token(std::move(page->next_page_token));
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::DrainNode(grpc::ServerContext* context,
                                            const v1::DrainNodeRequest* request,
                                            v1::DrainNodeResponse* response) {
  if (absl::Status s = authorizer_.AllowOperator(*context, "draining a node"); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = ValidateDrainNodeRequest(*request); !s.ok()) {
    return ToGrpcStatus(s);
  }
  auto node = registry_->Drain(request->name(), request->reason());
  if (!node.ok()) return ToGrpcStatus(node.status());
  *response->mutable_node() = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::GetClusterStatus(
    grpc::ServerContext* context, const v1::GetClusterStatusRequest* request,
    v1::GetClusterStatusResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  const NodeRegistryOptions& options = registry_->options();
  response->set_scheduler_id(options.scheduler_id);
  response->set_version(version_);
  response->set_started_unix_ms(absl::ToUnixMillis(started_));
  response->set_lease_ttl_ms(absl::ToInt64Milliseconds(options.lease_ttl));
  for (const v1::NodeInfo& node : registry_->List()) {
    switch (node.state()) {
      case v1::ALIVE:
        if (node.role() == v1::WORKER) {
          response->set_workers_alive(response->workers_alive() + 1);
        } else {
          response->set_attention_servers_alive(response->attention_servers_alive() + 1);
        }
        break;
      case v1::DEAD:
        response->set_nodes_dead(response->nodes_dead() + 1);
        break;
      case v1::DRAINING:
        response->set_nodes_draining(response->nodes_draining() + 1);
        break;
      default:
        break;
    }
  }
  response->set_jobs_pending(jobs_->CountInState(v1::PENDING));
  response->set_jobs_running(jobs_->CountInState(v1::RUNNING) +
                             jobs_->CountInState(v1::RECOVERING));
  for (v1::ClusterEvent& event : events_->Newest(20)) {
    *response->add_recent_events() = std::move(event);
  }
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::WatchEvents(
    grpc::ServerContext* context, const v1::WatchEventsRequest* request,
    grpc::ServerWriter<v1::ClusterEvent>* writer) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  auto identity_slot =
      IdentityQuotas::AcquireWatchStreamFrom(quotas_, authorizer_.QuotaIdentity(*context));
  if (!identity_slot.ok()) return ToGrpcStatus(identity_slot.status());
  auto slot = StreamSlots::AcquireFrom(watch_slots_);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  uint64_t after = request->after_sequence();
  while (!context->IsCancelled()) {
    for (const v1::ClusterEvent& event : events_->After(after)) {
      if (!writer->Write(event)) return grpc::Status::OK;
      after = event.sequence();
    }
    events_->WaitForEventsAfter(after, absl::Milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::Rebalance(grpc::ServerContext* context,
                                            const v1::RebalanceRequest* request,
                                            v1::RebalanceResponse* response) {
  if (absl::Status s = authorizer_.AllowOperator(*context, "rebalancing"); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (attention_planning_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "Rebalance: this scheduler does no core-attention planning");
  }
  auto plans = attention_planning_->Rebalance(request->job_id());
  if (!plans.ok()) return ToGrpcStatus(plans.status());
  for (v1::AttentionPlan& plan : *plans) {
    events_->Append(v1::ClusterEvent::ATTENTION_REPLANNED, "", plan.job_id(),
                    absl::StrFormat("step %d re-planned over %d attention servers: "
                                    "imbalance %.3f, %d bytes moved",
                                    plan.step(), plan.server_names_size(), plan.imbalance(),
                                    plan.bytes_moved()));
    *response->add_plans() = std::move(plan);
  }
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::GetAttentionPlan(
    grpc::ServerContext* context, const v1::GetAttentionPlanRequest* request,
    v1::GetAttentionPlanResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (attention_planning_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "GetAttentionPlan: this scheduler does no core-attention planning");
  }
  auto plan = attention_planning_->LatestPlan(request->job_id());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *response->mutable_plan() = *std::move(plan);
  return grpc::Status::OK;
}

}  // namespace corescape::scheduler
