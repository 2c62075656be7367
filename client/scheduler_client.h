// A thin, synchronous client for the scheduler's OperatorService and
// JobService. Every call carries a deadline so that a dead or unreachable
// scheduler turns into an error instead of a hang, and every gRPC status is
// returned as the absl::Status with the same code and message.
#ifndef CORESCAPE_CLIENT_SCHEDULER_CLIENT_H_
#define CORESCAPE_CLIENT_SCHEDULER_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/job.grpc.pb.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "grpcpp/support/status.h"
#include "runtime/security/transport_security.h"

namespace corescape::client {

inline constexpr absl::Duration kDefaultRpcTimeout = absl::Seconds(5);

// True when the status means the scheduler could not be reached or did not
// answer in time (as opposed to answering with an error).
bool IsUnreachable(const absl::Status& status);

// Same code, same message.
absl::Status ToAbslStatus(const grpc::Status& status);

class SchedulerClient {
 public:
  // Uses one channel to `address` ("host:port"), secured as `security`
  // says. gRPC connects lazily, so this never fails; an unreachable
  // scheduler shows up as UNAVAILABLE or DEADLINE_EXCEEDED on the first call.
  SchedulerClient(std::string address, const security::TransportSecurity& security,
                  absl::Duration rpc_timeout = kDefaultRpcTimeout);

  // For tests and callers that configure their own channel.
  SchedulerClient(std::string address, std::shared_ptr<grpc::Channel> channel,
                  absl::Duration rpc_timeout = kDefaultRpcTimeout);

  const std::string& address() const { return address_; }
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  void set_rpc_timeout(absl::Duration rpc_timeout) {
    rpc_timeout_ = rpc_timeout;
  }

  // OperatorService.
  absl::StatusOr<corescape::v1::ListNodesResponse> ListNodes(
      const corescape::v1::ListNodesRequest& request = {});
  // Every page of ListNodes from request.page_token on (by name).
  absl::StatusOr<std::vector<corescape::v1::NodeInfo>> ListAllNodes(
      corescape::v1::ListNodesRequest request = {});
  absl::StatusOr<corescape::v1::DrainNodeResponse> DrainNode(
      const corescape::v1::DrainNodeRequest& request);
  absl::StatusOr<corescape::v1::GetClusterStatusResponse> GetClusterStatus(
      const corescape::v1::GetClusterStatusRequest& request = {});
  absl::StatusOr<corescape::v1::RebalanceResponse> Rebalance(
      const corescape::v1::RebalanceRequest& request);
  absl::StatusOr<corescape::v1::GetAttentionPlanResponse> GetAttentionPlan(
      const corescape::v1::GetAttentionPlanRequest& request);

  // JobService. WatchJob is a server stream: OpenWatchJob returns the raw
  // reader on `context` (no deadline is set; the caller owns the context and
  // may TryCancel it). client/job_watch.h resumes it across lost streams.
  absl::StatusOr<corescape::v1::SubmitJobResponse> SubmitJob(
      const corescape::v1::SubmitJobRequest& request);
  absl::StatusOr<corescape::v1::GetJobResponse> GetJob(
      const corescape::v1::GetJobRequest& request);
  absl::StatusOr<corescape::v1::ListJobsResponse> ListJobs(
      const corescape::v1::ListJobsRequest& request = {});
  // Every page of ListJobs from request.page_token on (newest first).
  absl::StatusOr<std::vector<corescape::v1::Job>> ListAllJobs(
      corescape::v1::ListJobsRequest request = {});
  absl::StatusOr<corescape::v1::CancelJobResponse> CancelJob(
      const corescape::v1::CancelJobRequest& request);
  std::unique_ptr<grpc::ClientReaderInterface<corescape::v1::JobEvent>>
  OpenWatchJob(grpc::ClientContext* context,
               const corescape::v1::WatchJobRequest& request);

 private:
  // Runs one unary call with a fresh context carrying the deadline.
  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(Call&& call);

  std::string address_;
  absl::Duration rpc_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<corescape::v1::OperatorService::Stub> operator_stub_;
  std::unique_ptr<corescape::v1::JobService::Stub> job_stub_;
};

}  // namespace corescape::client

#endif  // CORESCAPE_CLIENT_SCHEDULER_CLIENT_H_
