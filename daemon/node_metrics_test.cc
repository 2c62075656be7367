#include "daemon/node_metrics.h"

#include <cstring>
#include <memory>
#include <string>

#include <ucp/api/ucp.h>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// One data message from a UCX client that holds the victim's UCP worker
// address (members are handed it only after the handshake's proofs; a
// stranger that learned it anyway is not bound to any connection).
void SendAsStranger(const std::string& worker_address) {
  ucp_config_t* config = nullptr;
  ASSERT_EQ(ucp_config_read(nullptr, nullptr, &config), UCS_OK);
  ASSERT_EQ(ucp_config_modify(config, "TLS", "tcp"), UCS_OK);
  ASSERT_EQ(ucp_config_modify(config, "NET_DEVICES", "lo"), UCS_OK);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  ucp_context_h context = nullptr;
  ASSERT_EQ(ucp_init(&params, config, &context), UCS_OK);
  ucp_config_release(config);
  ucp_worker_params_t worker_params{};
  ucp_worker_h worker = nullptr;
  ASSERT_EQ(ucp_worker_create(context, &worker_params, &worker), UCS_OK);
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(worker_address.data());
  ucp_ep_h ep = nullptr;
  ASSERT_EQ(ucp_ep_create(worker, &ep_params, &ep), UCS_OK);
  auto wait = [&](ucs_status_ptr_t request) {
    if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (ucp_request_check_status(request) == UCS_INPROGRESS && absl::Now() < deadline) {
      ucp_worker_progress(worker);
    }
    ucp_request_free(request);
  };
  // The transport's data-message header: tag, link token.
  char header[16] = {};
  const uint64_t tag = comm::CollectiveTag(1, 0, comm::CollectiveKind::kAllReduce, 0, 0);
  std::memcpy(header, &tag, sizeof(tag));
  float value = 1;
  ucp_request_param_t send{};
  send.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  send.flags = UCP_AM_SEND_FLAG_REPLY;
  wait(ucp_am_send_nbx(ep, /*id=*/1, header, sizeof(header), &value, sizeof(value), &send));
  ucp_request_param_t flush{};
  wait(ucp_ep_flush_nbx(ep, &flush));
  ucp_request_param_t close{};
  close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  close.flags = UCP_EP_CLOSE_FLAG_FORCE;
  wait(ucp_ep_close_nbx(ep, &close));
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
}

TEST_F(NodeMetricsTest, DataPlaneDropsAreExportedByReason) {
  comm::TransportOptions options;
  options.listen_address = "127.0.0.1:0";
  auto victim = comm::Transport::Create(options);
  ASSERT_TRUE(victim.ok()) << victim.status();
  metrics_->WatchDataPlane(victim->get());
  EXPECT_THAT(endpoint_->Scrape(),
              HasSubstr("corescape_data_plane_dropped_messages_total{node=\"w0\",reason=\""
                        "unauthenticated\",role=\"WORKER\"} 0"));

  SendAsStranger((*victim)->worker_address());

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
  // The collector reads the transport: stop serving before it goes.
  metrics_.reset();
  endpoint_.reset();
}

}  // namespace
}  // namespace corescape
