#include "daemon/node_metrics.h"

#include <cmath>
#include <vector>

#include "runtime/comm/transport.h"

namespace corescape {
namespace {

using metrics::FamilyBuilder;
using metrics::MetricName;

const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *buckets;
}

template <typename Builder>
auto& Register(Builder builder, metrics::MetricsEndpoint* endpoint, const char* name,
               const char* help) {
  return builder.Name(MetricName(name)).Help(help).Register(endpoint->registry());
}

}  // namespace

NodeMetrics::NodeMetrics(metrics::MetricsEndpoint* endpoint, v1::NodeRole role,
                         const std::string& name)
    : endpoint_(endpoint),
      role_(v1::NodeRole_Name(role)),
      name_(name),
      steps_(Register(prometheus::BuildCounter(), endpoint, "worker_steps_total",
                      "training steps this worker's rank took")),
      step_(Register(prometheus::BuildGauge(), endpoint, "worker_step",
                     "the newest step this worker's rank took")),
      loss_(Register(prometheus::BuildGauge(), endpoint, "worker_loss",
                     "training loss of the newest step")),
      validation_loss_(Register(prometheus::BuildGauge(), endpoint, "worker_validation_loss",
                                "the newest validation loss")),
      tokens_per_second_(Register(prometheus::BuildGauge(), endpoint,
                                  "worker_tokens_per_second",
                                  "tokens per second of the job at the newest step")),
      model_tflops_per_second_(Register(prometheus::BuildGauge(), endpoint,
                                        "worker_model_tflops_per_second",
                                        "this rank's model TFLOP/s at the newest step")),
      mfu_(Register(prometheus::BuildGauge(), endpoint, "worker_mfu",
                    "this rank's model FLOPs utilization at the newest step (where its "
                    "device's peak is known)")),
      bytes_sent_(Register(prometheus::BuildCounter(), endpoint, "worker_bytes_sent_total",
                           "bytes sent over a plane in this rank's steps")),
      bytes_received_(Register(prometheus::BuildCounter(), endpoint,
                               "worker_bytes_received_total",
                               "bytes received over a plane in this rank's steps")),
      compute_seconds_(Register(prometheus::BuildHistogram(), endpoint,
                                "worker_step_compute_seconds",
                                "compute time of each step")),
      communication_seconds_(Register(prometheus::BuildHistogram(), endpoint,
                                      "worker_step_communication_seconds",
                                      "communication time of each step")),
      density_(Register(prometheus::BuildGauge(), endpoint, "worker_gradient_density",
                        "fraction of the gradient synchronized in the newest step (1: dense)")),
      mask_bytes_(Register(prometheus::BuildCounter(), endpoint, "worker_mask_bytes_total",
                           "bytes of the sparse optimizer's encoded mask parts")),
      checkpoint_step_(Register(prometheus::BuildGauge(), endpoint, "worker_checkpoint_step",
                                "step of the newest complete checkpoint")),
      checkpoint_write_seconds_(Register(prometheus::BuildHistogram(), endpoint,
                                         "worker_checkpoint_write_seconds",
                                         "time to snapshot and write each checkpoint")),
      job_failures_(Register(prometheus::BuildCounter(), endpoint, "node_job_failures_total",
                             "failures of its part of a job this node reported")),
      attention_micro_batches_(Register(prometheus::BuildCounter(), endpoint,
                                        "attention_server_micro_batches_total",
                                        "core-attention micro-batches computed")),
      attention_flops_(Register(prometheus::BuildCounter(), endpoint,
                                "attention_server_flops_total",
                                "planner cost (FLOPs) of the core-attention tasks computed")),
      attention_kernel_seconds_(Register(prometheus::BuildCounter(), endpoint,
                                         "attention_server_kernel_seconds_total",
                                         "seconds spent computing core-attention tasks")),
      attention_bytes_received_(Register(prometheus::BuildCounter(), endpoint,
                                         "attention_server_bytes_received_total",
                                         "payload bytes received from the workers")),
      attention_bytes_sent_(Register(prometheus::BuildCounter(), endpoint,
                                     "attention_server_bytes_sent_total",
                                     "payload bytes sent to the workers")),
      attention_queue_depth_(Register(prometheus::BuildGauge(), endpoint,
                                      "attention_server_queue_depth",
                                      "workers' requests received and not yet answered")) {}

void NodeMetrics::WatchAgent(const NodeAgent* agent) {
  endpoint_->AddCollector([agent, role = role_, name = name_]() {
    const std::map<std::string, std::string> labels = {{"node", name}, {"role", role}};
    std::vector<prometheus::MetricFamily> families;
    families.push_back(FamilyBuilder("node_registered",
                                     "1 while registered with the scheduler")
                           .Add(labels, agent->registered() ? 1 : 0)
                           .Build());
    families.push_back(FamilyBuilder("node_session_open",
                                     "1 while the session stream to the scheduler is open")
                           .Add(labels, agent->session_open() ? 1 : 0)
                           .Build());
    families.push_back(FamilyBuilder("node_incarnation",
                                     "the incarnation the scheduler gave this process")
                           .Add(labels, static_cast<double>(agent->incarnation()))
                           .Build());
    return families;
  });
}

void NodeMetrics::WatchDataPlane(const comm::Transport* transport) {
  endpoint_->AddCollector([transport, role = role_, name = name_]() {
    const comm::DroppedMessageCounts dropped = transport->dropped_messages();
    FamilyBuilder family("data_plane_dropped_messages_total",
                         "data-plane messages dropped on arrival, by reason (unauthenticated: "
                         "from a connection that did not complete the handshake)",
                         prometheus::MetricType::Counter);
    for (const comm::DropReasonText& text : comm::kDropReasons) {
      family.Add({{"node", name}, {"role", role}, {"reason", text.metric_label}},
                 static_cast<double>(dropped.count(text.reason)));
    }
    std::vector<prometheus::MetricFamily> families;
    families.push_back(family.Build());
    return families;
  });
}

void NodeMetrics::OnSend(const v1::NodeMessage& message) {
  switch (message.body_case()) {
    case v1::NodeMessage::kAttentionTiming:
      OnAttentionTiming(message.attention_timing());
      break;
    case v1::NodeMessage::kJobFailure:
      job_failures_.Add({{"job_id", message.job_failure().job_id()}}).Increment();
      break;
    default:
      break;
  }
}

void NodeMetrics::ObserveStep(const v1::StepReport& report, double density,
                              int64_t mask_bytes) {
  const std::map<std::string, std::string> job = {{"job_id", report.job_id()}};
  steps_.Add(job).Increment();
  step_.Add(job).Set(static_cast<double>(report.step()));
  loss_.Add(job).Set(report.loss());
  if (!std::isnan(report.validation_loss())) {
    validation_loss_.Add(job).Set(report.validation_loss());
  }
  tokens_per_second_.Add(job).Set(report.tokens_per_second());
  if (std::isfinite(report.model_tflops_per_second()) && report.model_tflops_per_second() > 0) {
    model_tflops_per_second_.Add(job).Set(report.model_tflops_per_second());
  }
  if (std::isfinite(report.mfu()) && report.mfu() > 0) mfu_.Add(job).Set(report.mfu());
  // The worker's reports carry the data plane's bytes (UCX between ranks
  // and to attention servers).
  const std::map<std::string, std::string> data = {{"job_id", report.job_id()},
                                                   {"plane", "data"}};
  if (report.bytes_sent() > 0) bytes_sent_.Add(data).Increment(report.bytes_sent());
  if (report.bytes_received() > 0) bytes_received_.Add(data).Increment(report.bytes_received());
  compute_seconds_.Add(job, DurationBuckets()).Observe(report.compute_seconds());
  communication_seconds_.Add(job, DurationBuckets()).Observe(report.communication_seconds());
  density_.Add(job).Set(density);
  if (mask_bytes > 0) mask_bytes_.Add(job).Increment(static_cast<double>(mask_bytes));
  if (report.checkpoint_step() >= 0) {
    checkpoint_step_.Add(job).Set(static_cast<double>(report.checkpoint_step()));
  }
}

void NodeMetrics::ObserveCheckpoint(const std::string& job_id, double seconds) {
  checkpoint_write_seconds_.Add({{"job_id", job_id}}, DurationBuckets()).Observe(seconds);
}

void NodeMetrics::ObserveAttention(const std::string& job_id, int64_t bytes_in,
                                   int64_t bytes_out) {
  const std::map<std::string, std::string> job = {{"job_id", job_id}};
  if (bytes_in > 0) attention_bytes_received_.Add(job).Increment(static_cast<double>(bytes_in));
  if (bytes_out > 0) attention_bytes_sent_.Add(job).Increment(static_cast<double>(bytes_out));
}

void NodeMetrics::ObserveAttentionQueue(const std::string& job_id, int32_t queued_requests) {
  attention_queue_depth_.Add({{"job_id", job_id}}).Set(queued_requests);
}

void NodeMetrics::OnAttentionTiming(const v1::AttentionTaskTiming& timing) {
  const std::map<std::string, std::string> job = {{"job_id", timing.job_id()}};
  attention_micro_batches_.Add(job).Increment();
  if (timing.cost_units() > 0) attention_flops_.Add(job).Increment(timing.cost_units());
  if (timing.seconds() > 0) attention_kernel_seconds_.Add(job).Increment(timing.seconds());
}

}  // namespace corescape
