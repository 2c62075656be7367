#include "daemon/run_supervisor.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "corescape/v1/node.pb.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

struct TestRun {
  v1::JobAssignment assignment;
  std::atomic<bool> stop{false};
  std::thread thread;
  absl::Notification stopped;  // set by the abort callback
};

std::unique_ptr<TestRun> RunOf(const std::string& job) {
  auto run = std::make_unique<TestRun>();
  run->assignment.set_job_id(job);
  return run;
}

TEST(RunSupervisorTest, StoppedRunIsAbortedAndJoinedBeforeTheNextRunStarts) {
  absl::Mutex mu;
  std::vector<std::string> aborts;  // guarded by mu
  RunSupervisor<TestRun> runs(mu, "job", [&](TestRun& run, const std::string& reason) {
    aborts.push_back(run.assignment.job_id() + ": " + reason);
    run.stopped.Notify();
  });
  std::atomic<bool> first_returned{false};
  std::atomic<bool> first_returned_before_second{false};
  absl::Notification second_ran;
  {
    absl::MutexLock lock(&mu);
    runs.Start(RunOf("a"), [&](TestRun* run) {
      // Blocks until aborted, as a run in a collective does.
      run->stopped.WaitForNotification();
      EXPECT_TRUE(run->stop);
      first_returned = true;
    });
    EXPECT_EQ(runs.current()->assignment.job_id(), "a");
  }
  {
    absl::MutexLock lock(&mu);
    runs.StopCurrent("superseded");  // returns without waiting for "a"
    EXPECT_EQ(runs.current(), nullptr);
    runs.Start(RunOf("b"), [&](TestRun*) {
      first_returned_before_second = first_returned.load();
      second_ran.Notify();
    });
  }
  second_ran.WaitForNotification();
  EXPECT_TRUE(first_returned_before_second) << "run b started before run a's thread was joined";
  runs.Shutdown("shutting down");
  absl::MutexLock lock(&mu);
  EXPECT_EQ(aborts, (std::vector<std::string>{"a: superseded", "b: shutting down"}));
  EXPECT_EQ(runs.current(), nullptr);
}

// A run stopped before its thread begins finds itself among the stopped
// runs: it must not join itself, and is joined later.
TEST(RunSupervisorTest, RunStoppedBeforeItsThreadBeginsIsJoinedLater) {
  absl::Mutex mu;
  RunSupervisor<TestRun> runs(mu, "job", [](TestRun&, const std::string&) {});
  absl::Notification ran;
  {
    // Under the lock, so the thread cannot begin before the stop.
    absl::MutexLock lock(&mu);
    runs.Start(RunOf("a"), [&](TestRun* run) {
      EXPECT_TRUE(run->stop);
      ran.Notify();
    });
    runs.StopCurrent("stopped at once");
  }
  ran.WaitForNotification();
  runs.Shutdown("shutting down");
}

TEST(RunSupervisorTest, StopWithoutARunDoesNothing) {
  absl::Mutex mu;
  int aborts = 0;
  RunSupervisor<TestRun> runs(mu, "job", [&](TestRun&, const std::string&) { ++aborts; });
  {
    absl::MutexLock lock(&mu);
    runs.StopCurrent("nothing to stop");
  }
  runs.Shutdown("shutting down");
  EXPECT_EQ(aborts, 0);
}

}  // namespace
}  // namespace corescape
