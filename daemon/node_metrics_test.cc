#include "daemon/node_metrics.h"

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/hello_handler_test_util.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/message_tag.h"
#include "runtime/comm/transport.h"

namespace corescape {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class NodeMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto endpoint = metrics::MetricsEndpoint::Start("127.0.0.1:0", "node-metrics-test");
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = *std::move(endpoint);
    metrics_ = std::make_unique<NodeMetrics>(endpoint_.get(), v1::WORKER, "w0");
  }

  static v1::StepReport Report(int64_t step) {
    v1::StepReport report;
    report.set_job_id("j");
    report.set_rank(1);
    report.set_step(step);
    report.set_checkpoint_step(-1);
    return report;
  }

  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;
  std::unique_ptr<NodeMetrics> metrics_;
};

TEST_F(NodeMetricsTest, StepsOfEveryRankCarryDensityAndMaskBytes) {
  metrics_->ObserveStep(Report(1), 0.25, 100);
  metrics_->ObserveStep(Report(2), 0.125, 50);
  const std::string text = endpoint_->Scrape();
  EXPECT_THAT(text, HasSubstr("corescape_worker_steps_total{job_id=\"j\"} 2"));
  EXPECT_THAT(text, HasSubstr("corescape_worker_step{job_id=\"j\"} 2"));
  EXPECT_THAT(text, HasSubstr("corescape_worker_gradient_density{job_id=\"j\"} 0.125"));
  EXPECT_THAT(text, HasSubstr("corescape_worker_mask_bytes_total{job_id=\"j\"} 150"));
  EXPECT_THAT(text, Not(HasSubstr("corescape_worker_checkpoint_step{")));
}

TEST_F(NodeMetricsTest, StepReportsSentAreLeftToObserveStep) {
  // Rank 0's report goes out too; counting it again would double its steps.
  v1::NodeMessage message;
  *message.mutable_step_report() = Report(1);
  metrics_->OnSend(message);
  metrics_->ObserveStep(Report(1), 1.0, 0);
  const std::string text = endpoint_->Scrape();
  EXPECT_THAT(text, HasSubstr("corescape_worker_steps_total{job_id=\"j\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("corescape_worker_mask_bytes_total{")));
}

TEST_F(NodeMetricsTest, CheckpointWritesAreTimed) {
  metrics_->ObserveCheckpoint("j", 0.003);
  metrics_->ObserveCheckpoint("j", 20);
  const std::string text = endpoint_->Scrape();
  EXPECT_THAT(text, HasSubstr("corescape_worker_checkpoint_write_seconds_count{job_id=\"j\"} 2"));
  EXPECT_THAT(text, HasSubstr("corescape_worker_checkpoint_write_seconds_sum{job_id=\"j\"} 20.003"));
  EXPECT_THAT(text,
              HasSubstr("corescape_worker_checkpoint_write_seconds_bucket{job_id=\"j\",le=\"0.005\"} 1"));
}

TEST_F(NodeMetricsTest, AttentionTrafficAddsUp) {
  metrics_->ObserveAttention("j", 1000, 400);
  metrics_->ObserveAttention("j", 24, 0);
  const std::string text = endpoint_->Scrape();
  EXPECT_THAT(text, HasSubstr("corescape_attention_server_bytes_received_total{job_id=\"j\"} 1024"));
  EXPECT_THAT(text, HasSubstr("corescape_attention_server_bytes_sent_total{job_id=\"j\"} 400"));
}

TEST_F(NodeMetricsTest, AttentionQueueDepthFollowsTheSession) {
  metrics_->ObserveAttentionQueue("j", 2);
  EXPECT_THAT(endpoint_->Scrape(), HasSubstr("corescape_attention_server_queue_depth{job_id=\"j\"} 2"));
  metrics_->ObserveAttentionQueue("j", 0);
  EXPECT_THAT(endpoint_->Scrape(), HasSubstr("corescape_attention_server_queue_depth{job_id=\"j\"} 0"));
}

// Accepts every hello with a challenge and never adopts the endpoint: the
// dialer is left between its hello and a confirmation it cannot produce.
class ChallengeEveryHello : public comm::HelloHandler {
 public:
  Verdict OnHello(comm::EndpointId, const std::string&, const comm::HelloMessage& hello) override {
    return comm::AcceptingVerdict(hello, /*acceptor_rank=*/1,
                                  std::string(comm::kHandshakeNonceBytes, 'a'),
                                  std::string(comm::kHandshakeProofBytes, 'p'));
  }
  bool OnConfirm(comm::EndpointId, const std::string&,
                 absl::StatusOr<comm::HelloMessage>) override {
    return false;
  }
};

TEST_F(NodeMetricsTest, DataPlaneDropsAreExportedByReason) {
  comm::TransportOptions options;
  options.listen_address = "127.0.0.1:0";
  auto victim = comm::Transport::Create(options);
  ASSERT_TRUE(victim.ok()) << victim.status();
  auto stranger = comm::Transport::Create(options);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  metrics_->WatchDataPlane(victim->get());
  EXPECT_THAT(endpoint_->Scrape(),
              HasSubstr("corescape_data_plane_dropped_messages_total{node=\"w0\",reason=\""
                        "unauthenticated\",role=\"WORKER\"} 0"));

  ChallengeEveryHello handler;
  ASSERT_TRUE((*victim)->RegisterHelloHandler("j", 1, &handler).ok());
  comm::HelloMessage hello;
  hello.generation = 1;
  hello.world_size = 2;
  hello.job_id = "j";
  hello.nonce = std::string(comm::kHandshakeNonceBytes, 'n');
  absl::Notification answered;
  comm::EndpointId endpoint = 0;
  (*stranger)->Connect((*victim)->address(), hello,
                       [&](comm::EndpointId e, absl::StatusOr<comm::HelloMessage> reply) {
                         EXPECT_TRUE(reply.ok()) << reply.status();
                         endpoint = e;
                         answered.Notify();
                       });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_NE(endpoint, 0u);
  // The stranger lets its own side send (it knows no link token: any will
  // do) and sends a data message before its handshake is complete, then
  // gives up on the handshake.
  (*stranger)->AuthorizeEndpoint(endpoint, {.key = 1, .source_rank = 0, .link_token = 7});
  float value = 1;
  auto send = (*stranger)->Send(
      endpoint, comm::CollectiveTag(1, 0, comm::CollectiveKind::kAllReduce, 0, 0), &value,
      sizeof(value));
  ASSERT_TRUE((*stranger)->WaitFor(*send, absl::Now() + absl::Seconds(20)));
  EXPECT_TRUE(send->status().ok()) << send->status();
  comm::HelloMessage refusal = hello;
  refusal.type = comm::HelloType::kReject;
  refusal.nonce.clear();
  refusal.reason = "cannot prove the secret";
  (*stranger)->SendHandshake(endpoint, refusal);

  const std::string expected =
      "corescape_data_plane_dropped_messages_total{node=\"w0\",reason=\"unauthenticated\","
      "role=\"WORKER\"} 1";
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (endpoint_->Scrape().find(expected) == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(endpoint_->Scrape(), HasSubstr(expected));
  EXPECT_THAT(endpoint_->Scrape(),
              HasSubstr("corescape_data_plane_dropped_messages_total{node=\"w0\",reason=\""
                        "forged\",role=\"WORKER\"} 0"));
  (*victim)->UnregisterHelloHandler("j", 1);
  // The collector reads the transport: stop serving before it goes.
  metrics_.reset();
  endpoint_.reset();
}

}  // namespace
}  // namespace corescape
