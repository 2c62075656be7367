#ifndef CORESCAPE_SCHEDULER_NODE_SERVICE_H_
#define CORESCAPE_SCHEDULER_NODE_SERVICE_H_

#include <atomic>

#include "corescape/v1/node.grpc.pb.h"
#include "runtime/base/stream_slots.h"
#include "scheduler/attention_planning.h"
#include "scheduler/authorization.h"
#include "scheduler/job_manager.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {

// corescape.v1.NodeService: registration, the session stream (lease
// renewals in, lease grants and commands out), deregistration.
class NodeServiceImpl final : public v1::NodeService::Service {
 public:
  // `reports` receives step and failure reports from sessions,
  // `attention_reports` attention demands and task timings (either may be
  // null).
  NodeServiceImpl(NodeRegistry* registry, NodeReportSink* reports,
                  AttentionReportSink* attention_reports = nullptr,
                  const Authorizer& authorizer = Authorizer::AllowAll())
      : registry_(registry),
        reports_(reports),
        attention_reports_(attention_reports),
        authorizer_(authorizer) {}

  grpc::Status Register(grpc::ServerContext* context,
                        const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::SchedulerCommand, v1::NodeMessage>* stream)
      override;
  grpc::Status Deregister(grpc::ServerContext* context,
                          const v1::DeregisterRequest* request,
                          v1::DeregisterResponse* response) override;

  // Ends open sessions with UNAVAILABLE so nodes reconnect to the next
  // scheduler instead of waiting out the shutdown grace period.
  void BeginShutdown() { shutting_down_ = true; }
  // Caps concurrent Session streams (null: no cap). Set before serving.
  void LimitSessions(StreamSlots* slots) { session_slots_ = slots; }

 private:
  NodeRegistry* registry_;
  StreamSlots* session_slots_ = nullptr;
  NodeReportSink* reports_;
  AttentionReportSink* attention_reports_;
  const Authorizer& authorizer_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_NODE_SERVICE_H_
