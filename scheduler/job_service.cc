#include "scheduler/job_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/list_pages.h"
#include "scheduler/request_validation.h"
#include "scheduler/status_conversion.h"

namespace corescape::scheduler {
namespace {

absl::Status ValidateJobId(const std::string& job_id) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: required");
  if (job_id.size() > 64) return absl::InvalidArgumentError("job_id: longer than 64 characters");
  return absl::OkStatus();
}

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  auto caller = authorizer_.AllowRoles(
      *context, {security::Role::kSubmitter, security::Role::kOperator}, "submitting a job");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::MutexLock lock(&submit_mu_);
  if (quotas_ != nullptr) {
    const std::string identity = authorizer_.QuotaIdentity(*context);
    if (absl::Status s = quotas_->CheckPendingJobs(
            identity, jobs_->CountPendingSubmittedBy(caller->name));
        !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (absl::Status s = quotas_->AdmitSubmit(identity); !s.ok()) return ToGrpcStatus(s);
  }
  auto job = jobs_->Submit(*request, caller->name);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context,
                                    const v1::GetJobRequest* request,
                                    v1::GetJobResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return ToGrpcStatus(s);
  auto job = jobs_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  std::vector<v1::JobState> states;
  for (int state : request->states()) {
    if (!v1::JobState_IsValid(state) || state == v1::JOB_STATE_UNSPECIFIED) {
      return ToGrpcStatus(
          absl::InvalidArgumentError(absl::StrCat("states: unknown job state ", state)));
    }
    states.push_back(static_cast<v1::JobState>(state));
  }
  if (request->limit() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError("limit: must not be negative"));
  }
  auto page_size = ResolvePageSize(request->page_size());
  if (!page_size.ok()) return ToGrpcStatus(page_size.status());
  // limit alone (older callers) is the page size, bounded like one.
  if (request->limit() > 0) {
    *page_size = std::min(request->page_size() == 0 ? kMaxPageSize : *page_size,
                          request->limit());
  }
  auto page = jobs_->ListPage(states, *page_size, request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (v1::Job& job : page->items) *response->add_jobs() = std::move(job);
  response->set_next_page_token(std::move(page->next_page_token));
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return ToGrpcStatus(s);
  auto identity_slot =
      IdentityQuotas::AcquireWatchStreamFrom(quotas_, authorizer_.QuotaIdentity(*context));
  if (!identity_slot.ok()) return ToGrpcStatus(identity_slot.status());
  auto slot = StreamSlots::AcquireFrom(watch_slots_);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  uint64_t after = request->after_sequence();
  while (!context->IsCancelled()) {
    if (shutting_down_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler is shutting down");
    }
    auto events = jobs_->EventsAfter(request->job_id(), after);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const v1::JobEvent& event : *events) {
      if (!writer->Write(event)) return grpc::Status::OK;
      after = event.sequence();
    }
    // Ends once the job has ended and every event has been sent.
    auto job = jobs_->Get(request->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (JobManager::IsFinal(job->state())) {
      auto rest = jobs_->EventsAfter(request->job_id(), after);
      if (rest.ok() && rest->empty()) return grpc::Status::OK;
      continue;
    }
    jobs_->WaitForEvents(request->job_id(), after, absl::Milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request,
                                       v1::CancelJobResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return ToGrpcStatus(s);
  if (request->reason().size() > 1024) {
    return ToGrpcStatus(absl::InvalidArgumentError("reason: longer than 1024 bytes"));
  }
  if (authorizer_.enforcing()) {
    auto existing = jobs_->Get(request->job_id());
    if (!existing.ok()) return ToGrpcStatus(existing.status());
    if (absl::Status s = authorizer_.AllowCancel(*context, existing->submitted_by()); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  auto job = jobs_->Cancel(request->job_id(), request->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

}  // namespace corescape::scheduler
