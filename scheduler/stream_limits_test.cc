// The scheduler's caps on concurrent streams, over a real server on
// loopback: cap streams are served, one more is refused with
// RESOURCE_EXHAUSTED naming the cap, and closing one lets another in.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "corescape/v1/job.grpc.pb.h"
#include "corescape/v1/node.grpc.pb.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler_server.h"

namespace corescape::scheduler {
namespace {

constexpr int kCap = 2;

class StreamLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    SchedulerConfig config;
    config.listen_address = "127.0.0.1:0";
    config.state_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/stream-limits-",
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    config.version = "test";
    config.max_sessions = kCap;
    config.max_watch_streams = kCap;
    auto server = SchedulerServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->bound_address(), grpc::InsecureChannelCredentials());
  }

  // A WatchEvents stream; `admitted` once it delivered the scheduler's first
  // event (SCHEDULER_STARTED), else it ended with `status`.
  struct Watch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::ClusterEvent>> reader;
    bool admitted = false;
    grpc::Status status;
  };
  std::unique_ptr<Watch> OpenWatch() {
    auto watch = std::make_unique<Watch>();
    watch->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    watch->reader = v1::OperatorService::NewStub(channel_)->WatchEvents(
        &watch->context, v1::WatchEventsRequest());
    v1::ClusterEvent event;
    watch->admitted = watch->reader->Read(&event);
    if (!watch->admitted) watch->status = watch->reader->Finish();
    return watch;
  }
  void Close(Watch& watch) {
    watch.context.TryCancel();
    watch.reader->Finish();
  }

  std::unique_ptr<SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Opens streams until one is admitted; the scheduler frees a slot when the
// handler of a closed stream returns, which it notices within its wait.
template <typename Open>
auto OpenOnceAdmitted(Open open) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  auto stream = open();
  while (!stream->admitted && absl::Now() < deadline) stream = open();
  return stream;
}

TEST_F(StreamLimitsTest, WatchStreamsPastTheCapAreRefusedUntilOneCloses) {
  std::vector<std::unique_ptr<Watch>> open;
  for (int i = 0; i < kCap; ++i) {
    open.push_back(OpenWatch());
    ASSERT_TRUE(open.back()->admitted) << open.back()->status.error_message();
  }
  std::unique_ptr<Watch> refused = OpenWatch();
  ASSERT_FALSE(refused->admitted);
  EXPECT_EQ(refused->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused->status.error_message().find("2 concurrent watch streams"),
            std::string::npos)
      << refused->status.error_message();
  EXPECT_NE(refused->status.error_message().find("--max_watch_streams"), std::string::npos);

  // WatchJob shares the cap.
  {
    grpc::ClientContext context;
    v1::WatchJobRequest request;
    request.set_job_id("job-1");
    auto reader = v1::JobService::NewStub(channel_)->WatchJob(&context, request);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }

  Close(*open.front());
  open.erase(open.begin());
  auto again = OpenOnceAdmitted([&] { return OpenWatch(); });
  EXPECT_TRUE(again->admitted) << again->status.error_message();
  open.push_back(std::move(again));
  for (auto& watch : open) Close(*watch);
}

TEST_F(StreamLimitsTest, SessionsPastTheCapAreRefusedUntilOneCloses) {
  auto node_stub = v1::NodeService::NewStub(channel_);
  std::vector<uint64_t> incarnations;
  for (int i = 0; i <= kCap; ++i) {
    grpc::ClientContext context;
    v1::RegisterRequest request;
    request.set_name(absl::StrCat("w", i));
    request.set_role(v1::WORKER);
    request.set_host("127.0.0.1");
    request.set_pid(100 + i);
    request.set_grpc_address("127.0.0.1:1");
    v1::RegisterResponse response;
    grpc::Status status = node_stub->Register(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    incarnations.push_back(response.incarnation());
  }
  struct Session {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::NodeMessage, v1::SchedulerCommand>> stream;
    bool admitted = false;
    grpc::Status status;
  };
  auto open_session = [&](int i) {
    auto session = std::make_unique<Session>();
    session->stream = node_stub->Session(&session->context);
    v1::NodeMessage hello;
    hello.mutable_open()->set_name(absl::StrCat("w", i));
    hello.mutable_open()->set_incarnation(incarnations[i]);
    session->stream->Write(hello);
    v1::SchedulerCommand grant;
    session->admitted = session->stream->Read(&grant) && grant.has_lease();
    if (!session->admitted) session->status = session->stream->Finish();
    return session;
  };
  std::vector<std::unique_ptr<Session>> open;
  for (int i = 0; i < kCap; ++i) {
    open.push_back(open_session(i));
    ASSERT_TRUE(open.back()->admitted) << open.back()->status.error_message();
  }
  auto refused = open_session(kCap);
  ASSERT_FALSE(refused->admitted);
  EXPECT_EQ(refused->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused->status.error_message().find("2 concurrent Session streams"),
            std::string::npos)
      << refused->status.error_message();
  EXPECT_NE(refused->status.error_message().find("--max_sessions"), std::string::npos);

  open.front()->context.TryCancel();
  open.front()->stream->Finish();
  open.erase(open.begin());
  auto again = OpenOnceAdmitted([&] { return open_session(kCap); });
  EXPECT_TRUE(again->admitted) << again->status.error_message();
  open.push_back(std::move(again));
  for (auto& session : open) {
    session->context.TryCancel();
    session->stream->Finish();
  }
}

}  // namespace
}  // namespace corescape::scheduler
