#ifndef CORESCAPE_ATTENTION_SERVER_SERVER_JOB_RUNNER_H_
#define CORESCAPE_ATTENTION_SERVER_SERVER_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "corescape/v1/node.pb.h"
#include "runtime/base/thread_pool.h"
#include "runtime/comm/communicator.h"
#include "daemon/node_agent.h"
#include "daemon/run_metrics.h"
#include "daemon/run_supervisor.h"

namespace corescape::attention_server {

// Connects the job's attention communicator from an assignment.
using CommunicatorFactory = std::function<absl::StatusOr<std::unique_ptr<comm::Communicator>>(
    const v1::JobAssignment& assignment)>;

// The attention server's side of a DISAGGREGATED job: on JobAssignment it
// serves the job's core attention (runtime/attention AttentionServerSession)
// on a thread until the workers end the job; StopJob or a newer assignment
// (a new generation, or a new attention epoch after another server was
// lost) aborts it. A failed session first waits, bounded, for such a
// command; only then is it reported like a worker's failure
// (JobFailureReport with its attention rank), so the scheduler recovers
// the job.
class ServerJobRunner {
 public:
  // metrics (may be null) sees the traffic of every micro-batch served; it
  // must outlive the runner.
  ServerJobRunner(CommunicatorFactory communicator_factory, int threads,
                  RunMetrics* metrics = nullptr);
  ~ServerJobRunner();

  void Handle(const v1::SchedulerCommand& command, NodeAgent& agent);
  void Shutdown();

 private:
  struct Run {
    v1::JobAssignment assignment;
    std::atomic<bool> stop{false};
    std::thread thread;
    std::shared_ptr<comm::Communicator> communicator;  // once connected
  };

  void Serve(Run* run, NodeAgent* agent);

  const CommunicatorFactory communicator_factory_;
  std::unique_ptr<ThreadPool> pool_;
  RunMetrics* const metrics_;
  absl::Mutex mu_;
  RunSupervisor<Run> runs_;
};

}  // namespace corescape::attention_server

#endif  // CORESCAPE_ATTENTION_SERVER_SERVER_JOB_RUNNER_H_
