#include "client/scheduler_client.h"

#include <chrono>
#include <utility>

#include "grpc/grpc.h"
#include "grpcpp/support/channel_arguments.h"

namespace corescape::client {

namespace v1 = ::corescape::v1;

bool IsUnreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numeric values.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

namespace {

// gRPC's default reconnect backoff grows to 120 s, so a scheduler that
// restarts would stay "unavailable" to a long-lived client (a watch) for
// minutes after it is back. A CLI talks to one scheduler: retry within 1 s.
std::shared_ptr<grpc::Channel> CreateSchedulerChannel(
    const std::string& address, const security::TransportSecurity& security) {
  grpc::ChannelArguments args;
  security::SetReconnectBackoff(args, absl::Milliseconds(100), absl::Seconds(1));
  return security.CreateChannel(address, args);
}

}  // namespace

SchedulerClient::SchedulerClient(std::string address,
                                 const security::TransportSecurity& security,
                                 absl::Duration rpc_timeout)
    : SchedulerClient(address, CreateSchedulerChannel(address, security), rpc_timeout) {}

SchedulerClient::SchedulerClient(std::string address,
                                 std::shared_ptr<grpc::Channel> channel,
                                 absl::Duration rpc_timeout)
    : address_(std::move(address)),
      rpc_timeout_(rpc_timeout),
      channel_(std::move(channel)),
      operator_stub_(v1::OperatorService::NewStub(channel_)),
      job_stub_(v1::JobService::NewStub(channel_)) {}

template <typename Response, typename Call>
absl::StatusOr<Response> SchedulerClient::Unary(Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(rpc_timeout_));
  Response response;
  grpc::Status status = call(&context, &response);
  if (!status.ok()) return ToAbslStatus(status);
  return response;
}

absl::StatusOr<v1::ListNodesResponse> SchedulerClient::ListNodes(
    const v1::ListNodesRequest& request) {
  return Unary<v1::ListNodesResponse>(
      [&](grpc::ClientContext* context, v1::ListNodesResponse* response) {
        return operator_stub_->ListNodes(context, request, response);
      });
}

namespace {

// Calls `list` page after page, following next_page_token, and gathers each
// page's `items`. A token repeated by the server would loop forever: an error.
template <typename Item, typename Request, typename List, typename Items>
absl::StatusOr<std::vector<Item>> AllPages(Request request, List&& list, Items&& items) {
  std::vector<Item> all;
  while (true) {
    auto page = list(request);
    if (!page.ok()) return page.status();
    for (const Item& item : items(*page)) all.push_back(item);
    if (page->next_page_token().empty()) return all;
    if (page->next_page_token() == request.page_token()) {
      return absl::InternalError("the scheduler returned the same page token twice");
    }
    request.set_page_token(page->next_page_token());
  }
}

}  // namespace

absl::StatusOr<std::vector<v1::NodeInfo>> SchedulerClient::ListAllNodes(
    v1::ListNodesRequest request) {
  return AllPages<v1::NodeInfo>(
      std::move(request), [&](const v1::ListNodesRequest& r) { return ListNodes(r); },
      [](const v1::ListNodesResponse& r) -> const auto& { return r.nodes(); });
}

absl::StatusOr<v1::DrainNodeResponse> SchedulerClient::DrainNode(
    const v1::DrainNodeRequest& request) {
  return Unary<v1::DrainNodeResponse>(
      [&](grpc::ClientContext* context, v1::DrainNodeResponse* response) {
        return operator_stub_->DrainNode(context, request, response);
      });
}

absl::StatusOr<v1::GetClusterStatusResponse> SchedulerClient::GetClusterStatus(
    const v1::GetClusterStatusRequest& request) {
  return Unary<v1::GetClusterStatusResponse>(
      [&](grpc::ClientContext* context,
          v1::GetClusterStatusResponse* response) {
        return operator_stub_->GetClusterStatus(context, request, response);
      });
}

absl::StatusOr<v1::RebalanceResponse> SchedulerClient::Rebalance(
    const v1::RebalanceRequest& request) {
  return Unary<v1::RebalanceResponse>(
      [&](grpc::ClientContext* context, v1::RebalanceResponse* response) {
        return operator_stub_->Rebalance(context, request, response);
      });
}

absl::StatusOr<v1::GetAttentionPlanResponse> SchedulerClient::GetAttentionPlan(
    const v1::GetAttentionPlanRequest& request) {
  return Unary<v1::GetAttentionPlanResponse>(
      [&](grpc::ClientContext* context,
          v1::GetAttentionPlanResponse* response) {
        return operator_stub_->GetAttentionPlan(context, request, response);
      });
}

absl::StatusOr<v1::SubmitJobResponse> SchedulerClient::SubmitJob(
    const v1::SubmitJobRequest& request) {
  return Unary<v1::SubmitJobResponse>(
      [&](grpc::ClientContext* context, v1::SubmitJobResponse* response) {
        return job_stub_->SubmitJob(context, request, response);
      });
}

absl::StatusOr<v1::GetJobResponse> SchedulerClient::GetJob(
    const v1::GetJobRequest& request) {
  return Unary<v1::GetJobResponse>(
      [&](grpc::ClientContext* context, v1::GetJobResponse* response) {
        return job_stub_->GetJob(context, request, response);
      });
}

absl::StatusOr<v1::ListJobsResponse> SchedulerClient::ListJobs(
    const v1::ListJobsRequest& request) {
  return Unary<v1::ListJobsResponse>(
      [&](grpc::ClientContext* context, v1::ListJobsResponse* response) {
        return job_stub_->ListJobs(context, request, response);
      });
}

absl::StatusOr<std::vector<v1::Job>> SchedulerClient::ListAllJobs(v1::ListJobsRequest request) {
  return AllPages<v1::Job>(
      std::move(request), [&](const v1::ListJobsRequest& r) { return ListJobs(r); },
      [](const v1::ListJobsResponse& r) -> const auto& { return r.jobs(); });
}

absl::StatusOr<v1::CancelJobResponse> SchedulerClient::CancelJob(
    const v1::CancelJobRequest& request) {
  return Unary<v1::CancelJobResponse>(
      [&](grpc::ClientContext* context, v1::CancelJobResponse* response) {
        return job_stub_->CancelJob(context, request, response);
      });
}

std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>>
SchedulerClient::OpenWatchJob(grpc::ClientContext* context,
                              const v1::WatchJobRequest& request) {
  return job_stub_->WatchJob(context, request);
}

}  // namespace corescape::client
