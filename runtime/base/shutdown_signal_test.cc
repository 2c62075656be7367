#include "runtime/base/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

// A thread started before the handlers, with SIGTERM unblocked (as OpenBLAS
// starts its workers before main), receives the signal: the process lives
// and shuts down in order.
TEST(ShutdownSignalTest, ASignalToAThreadStartedEarlierRequestsShutdown) {
  absl::Notification started;
  std::atomic<bool> stop{false};
  std::thread early([&] {
    started.Notify();
    while (!stop.load()) absl::SleepFor(absl::Milliseconds(1));
  });
  started.WaitForNotification();
  InstallShutdownSignalHandlers();
  EXPECT_FALSE(ShutdownRequested());
  ASSERT_EQ(pthread_kill(early.native_handle(), SIGTERM), 0);
  EXPECT_TRUE(WaitForShutdown(absl::Seconds(30)));
  stop = true;
  early.join();
}

}  // namespace
}  // namespace corescape
