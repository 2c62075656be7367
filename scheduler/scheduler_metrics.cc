#include "scheduler/scheduler_metrics.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/job.pb.h"

namespace corescape::scheduler {
namespace {

using metrics::FamilyBuilder;
using metrics::MetricName;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::vector<MetricFamily> CollectNodes(const NodeRegistry& registry) {
  // Every role × state, zeros included, so a count that drops to nothing
  // reads 0 instead of vanishing from queries.
  std::map<std::pair<v1::NodeRole, v1::NodeState>, int> counts;
  for (v1::NodeRole role : {v1::WORKER, v1::ATTENTION_SERVER}) {
    for (int state = v1::NodeState_MIN; state <= v1::NodeState_MAX; ++state) {
      if (v1::NodeState_IsValid(state) && state != 0) {
        counts[{role, static_cast<v1::NodeState>(state)}] = 0;
      }
    }
  }
  FamilyBuilder heartbeat_age("scheduler_node_heartbeat_age_seconds",
                              "seconds since the node's last heartbeat");
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const v1::NodeInfo& node : registry.List()) {
    ++counts[{node.role(), node.state()}];
    if (node.last_heartbeat_unix_ms() > 0) {
      heartbeat_age.Add({{"node", node.name()}, {"state", v1::NodeState_Name(node.state())}},
                        (now_ms - node.last_heartbeat_unix_ms()) / 1000.0);
    }
  }
  FamilyBuilder nodes("scheduler_nodes", "nodes by role and state");
  for (const auto& [key, count] : counts) {
    nodes.Add({{"role", v1::NodeRole_Name(key.first)}, {"state", v1::NodeState_Name(key.second)}},
              count);
  }
  std::vector<MetricFamily> families;
  families.push_back(nodes.Build());
  families.push_back(heartbeat_age.Build());
  return families;
}

std::vector<MetricFamily> CollectJobs(const JobManager& jobs) {
  FamilyBuilder by_state("scheduler_jobs", "jobs by state");
  for (int state = v1::JobState_MIN; state <= v1::JobState_MAX; ++state) {
    if (!v1::JobState_IsValid(state) || state == v1::JOB_STATE_UNSPECIFIED) continue;
    by_state.Add({{"state", v1::JobState_Name(state)}},
                 jobs.CountInState(static_cast<v1::JobState>(state)));
  }
  FamilyBuilder recoveries_total("scheduler_job_recoveries_total",
                                 "restarts of jobs from checkpoints, all jobs",
                                 MetricType::Counter);
  FamilyBuilder step("job_step", "the newest step rank 0 reported");
  FamilyBuilder total_steps("job_total_steps", "steps the job runs");
  FamilyBuilder loss("job_loss", "training loss of the newest step");
  FamilyBuilder validation_loss("job_validation_loss", "the newest validation loss");
  FamilyBuilder tokens("job_tokens_per_second", "tokens per second of the newest step");
  FamilyBuilder model_tflops("job_model_tflops_per_second",
                             "model TFLOP/s per GPU (rank 0's) of the newest step");
  FamilyBuilder mfu("job_mfu", "model FLOPs utilization of the newest step (where the peak is known)");
  FamilyBuilder sent("job_bytes_sent_total", "data-plane bytes rank 0 sent",
                     MetricType::Counter);
  FamilyBuilder received("job_bytes_received_total", "data-plane bytes rank 0 received",
                         MetricType::Counter);
  FamilyBuilder recoveries("job_recoveries", "restarts of the job from checkpoints");
  FamilyBuilder checkpoint("job_checkpoint_step", "step of the newest checkpoint");
  double all_recoveries = 0;
  for (const v1::Job& job : jobs.List({}, 0)) all_recoveries += job.recoveries();
  recoveries_total.Add({}, all_recoveries);
  for (const v1::Job& job : jobs.List({}, SchedulerMetrics::kJobsListed)) {
    const std::map<std::string, std::string> labels = {
        {"job_id", job.job_id()}, {"name", job.spec().name()},
        {"state", v1::JobState_Name(job.state())}};
    const v1::JobProgress& progress = job.progress();
    step.Add(labels, progress.step());
    total_steps.Add(labels, job.spec().steps());
    recoveries.Add(labels, job.recoveries());
    if (progress.step() > 0) {
      loss.Add(labels, progress.loss());
      tokens.Add(labels, progress.tokens_per_second());
      if (progress.model_tflops_per_second() > 0) {
        model_tflops.Add(labels, progress.model_tflops_per_second());
      }
      if (progress.mfu() > 0) mfu.Add(labels, progress.mfu());
      sent.Add(labels, progress.bytes_sent());
      received.Add(labels, progress.bytes_received());
      checkpoint.Add(labels, progress.checkpoint_step());
    }
    if (progress.validation_loss() > 0 || std::isnan(progress.validation_loss())) {
      validation_loss.Add(labels, progress.validation_loss());
    }
  }
  std::vector<MetricFamily> families;
  for (FamilyBuilder* builder : {&by_state, &recoveries_total, &step, &total_steps, &loss,
                                 &validation_loss, &tokens, &model_tflops, &mfu, &sent,
                                 &received, &recoveries,
                                 &checkpoint}) {
    families.push_back(builder->Build());
  }
  return families;
}

std::vector<MetricFamily> CollectAttentionPlans(const JobManager& jobs,
                                                const AttentionPlanning& planning) {
  FamilyBuilder imbalance("scheduler_attention_plan_imbalance",
                          "newest plan: max/mean of server load over speed (1 = perfect)");
  FamilyBuilder step("scheduler_attention_plan_step",
                     "step of the newest plan (one is made per training step)");
  FamilyBuilder moved("scheduler_attention_plan_bytes_moved",
                      "newest plan: bytes moved to balance it");
  FamilyBuilder cost("scheduler_attention_plan_server_cost",
                     "newest plan: planner FLOPs per server");
  for (const v1::Job& job : jobs.List({v1::RUNNING, v1::RECOVERING}, 0)) {
    if (job.spec().attention().mode() != v1::DISAGGREGATED) continue;
    absl::StatusOr<v1::AttentionPlan> plan = planning.LatestPlan(job.job_id());
    if (!plan.ok()) continue;  // not planned yet
    const std::map<std::string, std::string> labels = {{"job_id", job.job_id()}};
    imbalance.Add(labels, plan->imbalance());
    step.Add(labels, plan->step());
    moved.Add(labels, plan->bytes_moved());
    for (int i = 0; i < plan->server_cost_size() && i < plan->server_names_size(); ++i) {
      cost.Add({{"job_id", job.job_id()}, {"server", plan->server_names(i)}},
               plan->server_cost(i));
    }
  }
  std::vector<MetricFamily> families;
  for (FamilyBuilder* builder : {&imbalance, &step, &moved, &cost}) {
    families.push_back(builder->Build());
  }
  return families;
}

// One RPC: counted and timed when its status goes out.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(absl::string_view method,
                        prometheus::Family<prometheus::Counter>* rpcs,
                        prometheus::Family<prometheus::Histogram>* seconds)
      : method_(absl::StripPrefix(method, "/")), rpcs_(rpcs), seconds_(seconds),
        start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      rpcs_->Add({{"method", method_}, {"code", CodeName(status.error_code())}}).Increment();
      seconds_->Add({{"method", method_}}, RpcBuckets())
          .Observe(absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  static const prometheus::Histogram::BucketBoundaries& RpcBuckets() {
    static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60};
    return *buckets;
  }
  static std::string CodeName(grpc::StatusCode code) {
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  }

  const std::string method_;
  prometheus::Family<prometheus::Counter>* rpcs_;
  prometheus::Family<prometheus::Histogram>* seconds_;
  const absl::Time start_;
};

class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RpcMetricsInterceptorFactory(prometheus::Family<prometheus::Counter>* rpcs,
                               prometheus::Family<prometheus::Histogram>* seconds)
      : rpcs_(rpcs), seconds_(seconds) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(info->method(), rpcs_, seconds_);
  }

 private:
  prometheus::Family<prometheus::Counter>* rpcs_;
  prometheus::Family<prometheus::Histogram>* seconds_;
};

}  // namespace

SchedulerMetrics::SchedulerMetrics(metrics::MetricsEndpoint* endpoint,
                                   const NodeRegistry* registry, const JobManager* jobs,
                                   const AttentionPlanning* planning)
    : lease_expiries_(prometheus::BuildCounter()
                          .Name(MetricName("scheduler_lease_expiries_total"))
                          .Help("nodes declared DEAD because their lease ran out")
                          .Register(endpoint->registry())),
      rpcs_(prometheus::BuildCounter()
                .Name(MetricName("scheduler_rpcs_total"))
                .Help("RPCs answered, by method and status code")
                .Register(endpoint->registry())),
      rpc_seconds_(prometheus::BuildHistogram()
                       .Name(MetricName("scheduler_rpc_duration_seconds"))
                       .Help("time from an RPC's start to its status, by method")
                       .Register(endpoint->registry())) {
  lease_expiries_.Add({});  // present (at 0) before the first expiry
  endpoint->AddCollector([registry]() { return CollectNodes(*registry); });
  endpoint->AddCollector([jobs]() { return CollectJobs(*jobs); });
  if (planning != nullptr) {
    endpoint->AddCollector(
        [jobs, planning]() { return CollectAttentionPlans(*jobs, *planning); });
  }
}

void SchedulerMetrics::CountLeaseExpiries(int expired) {
  if (expired > 0) lease_expiries_.Add({}).Increment(expired);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
SchedulerMetrics::RpcInterceptorFactory() {
  return std::make_unique<RpcMetricsInterceptorFactory>(&rpcs_, &rpc_seconds_);
}

}  // namespace corescape::scheduler
