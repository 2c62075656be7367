#ifndef CORESCAPE_SCHEDULER_OPERATOR_SERVICE_H_
#define CORESCAPE_SCHEDULER_OPERATOR_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "runtime/base/stream_slots.h"
#include "scheduler/identity_quotas.h"
#include "scheduler/attention_planning.h"
#include "scheduler/authorization.h"
#include "scheduler/event_log.h"
#include "scheduler/job_manager.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {

// corescape.v1.OperatorService: what the CLI and dashboards call.
class OperatorServiceImpl final : public v1::OperatorService::Service {
 public:
  // `attention_planning` may be null: GetAttentionPlan and Rebalance then
  // answer UNIMPLEMENTED.
  OperatorServiceImpl(NodeRegistry* registry, EventLog* events, JobManager* jobs,
                      std::string version, absl::Time started,
                      AttentionPlanning* attention_planning = nullptr,
                      const Authorizer& authorizer = Authorizer::AllowAll())
      : registry_(registry),
        events_(events),
        jobs_(jobs),
        attention_planning_(attention_planning),
        version_(std::move(version)),
        started_(started),
        authorizer_(authorizer) {}

  grpc::Status ListNodes(grpc::ServerContext* context,
                         const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status DrainNode(grpc::ServerContext* context,
                         const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override;
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest* request,
                                v1::GetClusterStatusResponse* response) override;
  grpc::Status WatchEvents(grpc::ServerContext* context,
                           const v1::WatchEventsRequest* request,
                           grpc::ServerWriter<v1::ClusterEvent>* writer) override;
  grpc::Status Rebalance(grpc::ServerContext* context,
                         const v1::RebalanceRequest* request,
                         v1::RebalanceResponse* response) override;
  grpc::Status GetAttentionPlan(grpc::ServerContext* context,
                                const v1::GetAttentionPlanRequest* request,
                                v1::GetAttentionPlanResponse* response) override;

  // Caps concurrent WatchEvents streams (null: no cap). Set before serving.
  void LimitWatches(StreamSlots* slots) { watch_slots_ = slots; }
  // Caps each caller's WatchEvents streams, with its WatchJob streams (null:
  // no cap). Set before serving.
  void LimitPerIdentity(IdentityQuotas* quotas) { quotas_ = quotas; }

 private:
  NodeRegistry* registry_;
  StreamSlots* watch_slots_ = nullptr;
  IdentityQuotas* quotas_ = nullptr;
  EventLog* events_;
  JobManager* jobs_;
  AttentionPlanning* attention_planning_;
  const std::string version_;
  const absl::Time started_;
  const Authorizer& authorizer_;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_OPERATOR_SERVICE_H_
