#ifndef CORESCAPE_SCHEDULER_JOB_SERVICE_H_
#define CORESCAPE_SCHEDULER_JOB_SERVICE_H_

#include <atomic>

#include "corescape/v1/job.grpc.pb.h"
#include "runtime/base/stream_slots.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/authorization.h"
#include "scheduler/identity_quotas.h"
#include "scheduler/job_manager.h"

namespace corescape::scheduler {

// corescape.v1.JobService over the JobManager.
class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(JobManager* jobs, const Authorizer& authorizer = Authorizer::AllowAll())
      : jobs_(jobs), authorizer_(authorizer) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  // Replays the job's events after `after_sequence`, then follows it live
  // until it ends (or the client goes away).
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;

  void BeginShutdown() { shutting_down_ = true; }
  // Caps concurrent WatchJob streams (null: no cap). Set before serving.
  void LimitWatches(StreamSlots* slots) { watch_slots_ = slots; }
  // Caps each caller's WatchJob streams, pending jobs and submissions per
  // minute (null: no caps). Set before serving.
  void LimitPerIdentity(IdentityQuotas* quotas) { quotas_ = quotas; }

 private:
  JobManager* jobs_;
  StreamSlots* watch_slots_ = nullptr;
  IdentityQuotas* quotas_ = nullptr;
  // Held from counting a caller's pending jobs to recording its new one, so
  // concurrent submissions cannot all pass the count.
  absl::Mutex submit_mu_;
  const Authorizer& authorizer_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_JOB_SERVICE_H_
