#include "daemon/node_metrics.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace corescape
