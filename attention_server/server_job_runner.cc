#include "attention_server/server_job_runner.h"

#include "absl/strings/str_cat.h"
#include "attention_server/attention_timing_reports.h"
#include "glog/logging.h"
#include "runtime/attention/attention_server_session.h"
#include "daemon/job_failure_report.h"

namespace corescape::attention_server {

ServerJobRunner::ServerJobRunner(CommunicatorFactory communicator_factory, int threads,
                                 RunMetrics* metrics)
    : communicator_factory_(std::move(communicator_factory)),
      pool_(std::make_unique<ThreadPool>(threads > 0 ? threads : DefaultThreadCount())),
      metrics_(metrics),
      runs_(mu_, "attention for job", [](Run& run, const std::string& reason) {
        if (run.communicator != nullptr) run.communicator->Abort(reason);
      }) {}

ServerJobRunner::~ServerJobRunner() { Shutdown(); }

void ServerJobRunner::Handle(const v1::SchedulerCommand& command, NodeAgent& agent) {
  absl::MutexLock lock(&mu_);
  if (command.has_stop_job()) {
    runs_.Stop(command.stop_job());
    return;
  }
  if (!command.has_assign()) return;
  const v1::JobAssignment& assign = command.assign();
  const Run* current = runs_.current();
  if (current != nullptr && current->assignment.job_id() == assign.job_id() &&
      current->assignment.generation() == assign.generation() &&
      current->assignment.attention_epoch() >= assign.attention_epoch()) {
    return;  // redelivered
  }
  // A newer generation, or a newer attention epoch of the same one (the job
  // was re-planned after losing a server): serve it from a fresh session.
  runs_.StopCurrent(absl::StrCat("superseded by job ", assign.job_id(), " generation ",
                                 assign.generation(), " attention epoch ",
                                 assign.attention_epoch()));
  auto run = std::make_unique<Run>();
  run->assignment = assign;
  LOG(INFO) << "job " << assign.job_id() << " generation " << assign.generation()
            << " attention epoch " << assign.attention_epoch() << ": attention server "
            << assign.rank() - assign.peer_data_addresses_size() << " of "
            << assign.attention_server_addresses_size() << " for "
            << assign.peer_data_addresses_size() << " workers";
  NodeAgent* agent_ptr = &agent;
  runs_.Start(std::move(run), [this, agent_ptr](Run* started) { Serve(started, agent_ptr); });
}

void ServerJobRunner::Serve(Run* run, NodeAgent* agent) {
  const v1::JobAssignment& assignment = run->assignment;
  auto fail = [&](const absl::Status& status) {
    if (!run->stop) {
      // The workers abort the session when another server dies; the
      // scheduler then sends a new attention epoch (which stops this run).
      // Only a failure nobody re-plans or stops is reported.
      const absl::Duration timeout = AttentionFailoverTimeout(assignment);
      LOG(WARNING) << "attention for job " << assignment.job_id() << " (rank "
                   << assignment.rank() << ") failed: " << status << "; waiting up to "
                   << absl::FormatDuration(timeout) << " for a new attention epoch";
      absl::MutexLock lock(&mu_);
      auto stopped = [&]() { return run->stop.load(); };
      mu_.AwaitWithTimeout(absl::Condition(&stopped), timeout);
    }
    if (run->stop) {
      LOG(INFO) << "attention for job " << assignment.job_id() << " stopped: " << status;
      return;
    }
    LOG(ERROR) << "attention for job " << assignment.job_id() << " (rank " << assignment.rank()
               << ") failed: " << status;
    agent->Send(JobFailureMessage(assignment, status, assignment.attention_epoch()));
  };
  auto communicator = communicator_factory_(assignment);
  if (!communicator.ok()) return fail(communicator.status());
  std::shared_ptr<comm::Communicator> shared = *std::move(communicator);
  {
    absl::MutexLock lock(&mu_);
    run->communicator = shared;
    if (run->stop) shared->Abort("stop requested");
  }
  attention::ServerSessionOptions options;
  options.workers = assignment.peer_data_addresses_size();
  options.servers = assignment.attention_server_addresses_size();
  options.tolerance = assignment.spec().attention().tolerance();
  options.keep_qkv_for_backward = assignment.spec().attention().keep_qkv_for_backward();
  options.pool = pool_.get();
  // The communicator's counters, as of the last micro-batch observed.
  comm::ByteCounters observed = shared->counters();
  auto observe_traffic = [&]() {
    if (metrics_ == nullptr) return;
    const comm::ByteCounters now = shared->counters();
    const comm::ByteCounters delta = now - observed;
    observed = now;
    metrics_->ObserveAttention(assignment.job_id(), delta.total_received(), delta.total_sent());
  };
  if (metrics_ != nullptr) {
    options.on_queue_depth = [&](int32_t queued) {
      metrics_->ObserveAttentionQueue(assignment.job_id(), queued);
    };
  }
  options.on_micro_batch_timing = [&](const attention::MicroBatchTiming& t) {
    agent->Send(AttentionTimingMessage(assignment, t));
    observe_traffic();
  };
  attention::AttentionServerSession session(shared.get(), options);
  absl::Status served = session.Serve();
  observe_traffic();  // what came after the last micro-batch
  const attention::ServerSessionStats& stats = session.stats();
  LOG(INFO) << "attention for job " << assignment.job_id() << " generation "
            << assignment.generation() << ": " << stats.exchanges << " exchanges, "
            << stats.micro_batches << " micro-batches, " << stats.tasks << " tasks, "
            << stats.query_rows << " query rows, " << stats.kernel_seconds << " s in the kernel; "
            << stats.plan_sources.Describe();
  if (!served.ok()) return fail(served);
  LOG(INFO) << "attention for job " << assignment.job_id() << " done: the workers finished";
  absl::MutexLock lock(&mu_);
  run->communicator.reset();  // the last reference goes with `shared`
}

void ServerJobRunner::Shutdown() { runs_.Shutdown("attention server shutting down"); }

}  // namespace corescape::attention_server
