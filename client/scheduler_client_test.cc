// SchedulerClient against an in-process fake OperatorService: answers come
// through, gRPC errors keep their code and message, deadlines hold, and an
// unimplemented JobService is reported as UNIMPLEMENTED.
#include "client/scheduler_client.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace corescape::client {
namespace {

namespace v1 = ::corescape::v1;

class FakeOperatorService final : public v1::OperatorService::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext*,
                         const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override {
    v1::NodeInfo* node = response->add_nodes();
    node->set_name("worker-0");
    node->set_role(request->role() == v1::NODE_ROLE_UNSPECIFIED
                       ? v1::WORKER
                       : request->role());
    node->set_state(v1::ALIVE);
    return grpc::Status::OK;
  }

  grpc::Status DrainNode(grpc::ServerContext*,
                         const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override {
    if (request->name().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name is empty");
    }
    if (request->name() != "worker-0") {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("no node named '", request->name(), "'"));
    }
    response->mutable_node()->set_name(request->name());
    response->mutable_node()->set_state(v1::DRAINING);
    return grpc::Status::OK;
  }

  // Answers only after the client's deadline has passed.
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest*,
                                v1::GetClusterStatusResponse*) override {
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
    return grpc::Status(grpc::StatusCode::CANCELLED, "client gave up");
  }
};

class SchedulerClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  FakeOperatorService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

TEST_F(SchedulerClientTest, ListNodesPassesRequestAndResponse) {
  SchedulerClient client(address_, security::TransportSecurity::Insecure());
  EXPECT_EQ(client.address(), address_);
  v1::ListNodesRequest request;
  request.set_role(v1::ATTENTION_SERVER);
  absl::StatusOr<v1::ListNodesResponse> response = client.ListNodes(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->nodes_size(), 1);
  EXPECT_EQ(response->nodes(0).name(), "worker-0");
  EXPECT_EQ(response->nodes(0).role(), v1::ATTENTION_SERVER);
}

TEST_F(SchedulerClientTest, ServerErrorsKeepCodeAndMessage) {
  SchedulerClient client(address_, security::TransportSecurity::Insecure());
  v1::DrainNodeRequest request;
  request.set_name("nope");
  absl::StatusOr<v1::DrainNodeResponse> missing = client.DrainNode(request);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no node named 'nope'");
  EXPECT_FALSE(IsUnreachable(missing.status()));

  request.set_name("");
  EXPECT_EQ(client.DrainNode(request).status().code(),
            absl::StatusCode::kInvalidArgument);

  request.set_name("worker-0");
  absl::StatusOr<v1::DrainNodeResponse> drained = client.DrainNode(request);
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->node().state(), v1::DRAINING);
}

TEST_F(SchedulerClientTest, SlowAnswerHitsTheDeadline) {
  SchedulerClient client(address_, security::TransportSecurity::Insecure(), absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::GetClusterStatusResponse> status =
      client.GetClusterStatus();
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(IsUnreachable(status.status()));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(SchedulerClientTest, ServiceNotRegisteredIsUnimplemented) {
  SchedulerClient client(address_, security::TransportSecurity::Insecure());
  v1::GetJobRequest request;
  request.set_job_id("j-1");
  absl::StatusOr<v1::GetJobResponse> job = client.GetJob(request);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(client.ListJobs().status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(SchedulerClientUnreachableTest, RefusedConnectionIsUnavailableAndFast) {
  // Port 1 on loopback: nothing listens, the connection is refused.
  SchedulerClient client("127.0.0.1:1", security::TransportSecurity::Insecure(), absl::Seconds(5));
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::ListNodesResponse> response = client.ListNodes();
  ASSERT_FALSE(response.ok());
  EXPECT_TRUE(IsUnreachable(response.status())) << response.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(StatusConversionTest, SameCodeAndMessage) {
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  absl::Status converted =
      ToAbslStatus(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "why"));
  EXPECT_EQ(converted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(converted.message(), "why");
  EXPECT_TRUE(IsUnreachable(absl::UnavailableError("x")));
  EXPECT_TRUE(IsUnreachable(absl::DeadlineExceededError("x")));
  EXPECT_FALSE(IsUnreachable(absl::NotFoundError("x")));
  EXPECT_FALSE(IsUnreachable(absl::OkStatus()));
}

}  // namespace
}  // namespace corescape::client
