#ifndef CORESCAPE_DAEMON_RUN_SUPERVISOR_H_
#define CORESCAPE_DAEMON_RUN_SUPERVISOR_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "corescape/v1/node.pb.h"
#include "glog/logging.h"

namespace corescape {

// The job runs of a node daemon (the worker's training, the attention
// server's serving): at most one current run, each on its own thread. A
// stopped run is told to stop and its blocking work aborted at once, but
// its thread is joined later — by the next run's thread before it starts
// working, or at Shutdown — so the session thread that delivers commands
// never blocks on a join.
//
// `Run` has `v1::JobAssignment assignment`, `std::atomic<bool> stop` and
// `std::thread thread`. The supervisor shares the daemon runner's mutex, so
// the runner's other state and the current run change under one lock.
template <typename Run>
class RunSupervisor {
 public:
  // `what` names a run in the log ("job", "attention for job"); `abort`
  // interrupts what a stopping run blocks on (its communicators), under
  // the lock.
  RunSupervisor(absl::Mutex& mu, std::string what,
                std::function<void(Run&, const std::string& reason)> abort)
      : mu_(mu), what_(std::move(what)), abort_(std::move(abort)) {}
  Run* current() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return current_.get(); }

  // Stops the current run, if any: sets its `stop`, aborts it, and keeps it
  // to be joined.
  void StopCurrent(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (current_ == nullptr) return;
    LOG(INFO) << "stopping " << what_ << " " << current_->assignment.job_id() << " generation "
              << current_->assignment.generation() << ": " << reason;
    current_->stop = true;
    abort_(*current_, reason);
    stopping_.push_back(std::move(current_));
  }

  // The scheduler's StopJob: stops the current run if it is of that job and
  // of that generation or an older one.
  void Stop(const v1::StopJobCommand& stop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (current_ != nullptr && current_->assignment.job_id() == stop.job_id() &&
        current_->assignment.generation() <= stop.generation()) {
      StopCurrent(stop.reason());
    }
  }

  // Makes `run` the current run (stop the previous one first) and runs
  // body(run) on its thread, after the threads of every stopped run have
  // been joined: they must be gone before it takes the cores and ports.
  void Start(std::unique_ptr<Run> run, std::function<void(Run*)> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Run* raw = run.get();
    raw->thread = std::thread([this, raw, body = std::move(body)]() {
      JoinStopped();
      body(raw);
    });
    current_ = std::move(run);
  }

  // Stops the current run and joins every run's thread.
  void Shutdown(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      StopCurrent(reason);
    }
    JoinStopped();
  }

 private:
  void JoinStopped() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::unique_ptr<Run>> runs;
    {
      absl::MutexLock lock(&mu_);
      // A run stopped before its thread got here stays, to be joined by
      // the next run or Shutdown: a thread cannot join itself.
      std::vector<std::unique_ptr<Run>> self;
      for (auto& run : stopping_) {
        (run->thread.get_id() == std::this_thread::get_id() ? self : runs)
            .push_back(std::move(run));
      }
      stopping_ = std::move(self);
    }
    for (auto& run : runs) {
      if (run->thread.joinable()) run->thread.join();
    }
  }

  absl::Mutex& mu_;
  const std::string what_;
  const std::function<void(Run&, const std::string&)> abort_;
  std::unique_ptr<Run> current_ ABSL_GUARDED_BY(mu_);
  // Runs told to stop, joined by the next run (never on the session thread).
  std::vector<std::unique_ptr<Run>> stopping_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_RUN_SUPERVISOR_H_
