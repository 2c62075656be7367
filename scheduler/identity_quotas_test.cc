// Caps per caller identity over a real mutual-TLS scheduler on loopback:
// one submitter at its cap of watch streams, pending jobs or submissions a
// minute is refused, naming itself and the cap, while another submitter is
// still served.
#include "scheduler/identity_quotas.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "corescape/v1/job.grpc.pb.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/security/certificates.h"
#include "runtime/security/transport_security.h"
#include "scheduler/scheduler_server.h"

namespace corescape::scheduler {
namespace {

using ::testing::HasSubstr;

class IdentityQuotasTest : public ::testing::Test {
 protected:
  void Start(IdentityQuotaLimits limits) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = absl::StrCat(
        tmp != nullptr ? tmp : "/tmp", "/identity-quotas-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    security::CertificateDirectoryOptions certificates;
    certificates.directory = dir + "/tls";
    certificates.submitters = {"alice", "bob"};
    ASSERT_TRUE(security::InitCertificateDirectory(certificates).ok());
    ASSERT_TRUE(MakeDirectories(dir + "/data").ok());
    shard_ = dir + "/data/train-00000.shard";
    ASSERT_TRUE(WriteFileAtomically(shard_, "x").ok());

    SchedulerConfig config;
    config.listen_address = "127.0.0.1:0";
    config.state_dir = dir + "/state";
    config.version = "test";
    config.max_watch_streams = 8;  // more than one identity may hold
    config.identity_quotas = limits;
    auto security = security::TransportSecurity::FromTlsDir(certificates.directory, "scheduler");
    ASSERT_TRUE(security.ok()) << security.status();
    config.security = *security;
    auto server = SchedulerServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    for (const char* name : {"alice", "bob"}) {
      auto as = security::TransportSecurity::FromTlsDir(
          certificates.directory,
          security::CertificateStem({name, security::Role::kSubmitter}));
      ASSERT_TRUE(as.ok()) << as.status();
      channels_.push_back(as->CreateChannel(server_->bound_address()));
    }
  }
  std::shared_ptr<grpc::Channel> alice() { return channels_[0]; }
  std::shared_ptr<grpc::Channel> bob() { return channels_[1]; }

  // A job no worker will take: it stays PENDING.
  grpc::Status Submit(const std::shared_ptr<grpc::Channel>& channel,
                      std::string* job_id = nullptr) {
    v1::SubmitJobRequest request;
    v1::JobSpec& spec = *request.mutable_spec();
    spec.set_name("quota");
    spec.mutable_model()->set_preset("tiny");
    spec.mutable_data()->add_train_shards(shard_);
    spec.mutable_data()->set_sequence_length(64);
    spec.mutable_data()->set_micro_batch_size(4);
    spec.mutable_data()->set_gradient_accumulation(1);
    spec.set_steps(10);
    spec.mutable_placement()->set_workers(1);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::SubmitJobResponse response;
    grpc::Status status =
        v1::JobService::NewStub(channel)->SubmitJob(&context, request, &response);
    if (job_id != nullptr) *job_id = response.job().job_id();
    return status;
  }

  // A stream, `admitted` once it delivered its first event, else ended
  // with `status`.
  template <typename Event>
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<Event>> reader;
    bool admitted = false;
    grpc::Status status;
    ~Stream() {
      if (admitted) {
        context.TryCancel();
        reader->Finish();
      }
    }
  };
  template <typename Event>
  void Await(Stream<Event>& stream) {
    Event event;
    stream.admitted = stream.reader->Read(&event);
    if (!stream.admitted) stream.status = stream.reader->Finish();
  }
  std::unique_ptr<Stream<v1::JobEvent>> WatchJob(const std::shared_ptr<grpc::Channel>& channel,
                                                 const std::string& job_id) {
    auto stream = std::make_unique<Stream<v1::JobEvent>>();
    stream->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    stream->reader = v1::JobService::NewStub(channel)->WatchJob(&stream->context, request);
    Await(*stream);
    return stream;
  }
  std::unique_ptr<Stream<v1::ClusterEvent>> WatchEvents(
      const std::shared_ptr<grpc::Channel>& channel) {
    auto stream = std::make_unique<Stream<v1::ClusterEvent>>();
    stream->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream->reader = v1::OperatorService::NewStub(channel)->WatchEvents(
        &stream->context, v1::WatchEventsRequest());
    Await(*stream);
    return stream;
  }

  std::string shard_;
  std::unique_ptr<SchedulerServer> server_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
};

TEST_F(IdentityQuotasTest, OneIdentityAtItsStreamCapDoesNotStopAnothersWatchEvents) {
  Start({.max_watch_streams = 3, .max_pending_jobs = 100, .max_submits_per_minute = 100});
  std::string job_id;
  ASSERT_TRUE(Submit(alice(), &job_id).ok());

  // Alice opens WatchJob streams until refused (the global cap is 8).
  std::vector<std::unique_ptr<Stream<v1::JobEvent>>> held;
  std::unique_ptr<Stream<v1::JobEvent>> refused;
  for (int i = 0; i < 8; ++i) {
    auto stream = WatchJob(alice(), job_id);
    if (!stream->admitted) {
      refused = std::move(stream);
      break;
    }
    held.push_back(std::move(stream));
  }
  EXPECT_EQ(held.size(), 3u);
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused->status.error_message(), HasSubstr("submitter 'alice'"));
  EXPECT_THAT(refused->status.error_message(), HasSubstr("--max_watch_streams_per_identity"));
  // WatchEvents counts against the same cap.
  auto alice_events = WatchEvents(alice());
  EXPECT_FALSE(alice_events->admitted);
  EXPECT_EQ(alice_events->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  auto bob_events = WatchEvents(bob());
  EXPECT_TRUE(bob_events->admitted) << bob_events->status.error_message();
  auto bob_job = WatchJob(bob(), job_id);
  EXPECT_TRUE(bob_job->admitted) << bob_job->status.error_message();
}

TEST_F(IdentityQuotasTest, SubmissionsPastTheRateAreRefusedNamingTheIdentity) {
  Start({.max_watch_streams = 64, .max_pending_jobs = 100, .max_submits_per_minute = 5});
  for (int i = 0; i < 5; ++i) {
    grpc::Status status = Submit(alice());
    ASSERT_TRUE(status.ok()) << i << ": " << status.error_message();
  }
  grpc::Status refused = Submit(alice());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("submitter 'alice' submitted 5 jobs"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_submits_per_minute_per_identity"));
  grpc::Status bobs = Submit(bob());
  EXPECT_TRUE(bobs.ok()) << bobs.error_message();
}

TEST_F(IdentityQuotasTest, SubmissionsPastThePendingCapAreRefusedNamingTheIdentity) {
  Start({.max_watch_streams = 64, .max_pending_jobs = 3, .max_submits_per_minute = 100});
  for (int i = 0; i < 3; ++i) {
    grpc::Status status = Submit(alice());
    ASSERT_TRUE(status.ok()) << i << ": " << status.error_message();
  }
  grpc::Status refused = Submit(alice());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("submitter 'alice' has 3 jobs PENDING"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_pending_jobs_per_identity"));
  grpc::Status bobs = Submit(bob());
  EXPECT_TRUE(bobs.ok()) << bobs.error_message();
}

// The submission window slides: a minute after, the identity may submit
// again.
TEST(IdentityQuotasClockTest, TheSubmissionWindowIsOneMinute) {
  FakeClock clock;
  IdentityQuotas quotas({.max_submits_per_minute = 2}, &clock);
  EXPECT_TRUE(quotas.AdmitSubmit("a").ok());
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(quotas.AdmitSubmit("a").ok());
  EXPECT_EQ(quotas.AdmitSubmit("a").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(quotas.AdmitSubmit("b").ok());
  clock.Advance(absl::Seconds(31));
  EXPECT_TRUE(quotas.AdmitSubmit("a").ok());
  EXPECT_EQ(quotas.AdmitSubmit("a").code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace corescape::scheduler
