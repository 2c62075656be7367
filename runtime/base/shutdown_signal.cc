#include "runtime/base/shutdown_signal.h"

#include <signal.h>

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "glog/logging.h"

namespace corescape {
namespace {

absl::Notification& ShutdownNotification() {
  static absl::Notification* notification = new absl::Notification();
  return *notification;
}

}  // namespace

void InstallShutdownSignalHandlers() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set]() {
    int signal_number = 0;
    sigwait(&set, &signal_number);
    LOG(INFO) << "received signal " << signal_number << ", shutting down";
    RequestShutdown();
  }).detach();
}

bool ShutdownRequested() { return ShutdownNotification().HasBeenNotified(); }

void RequestShutdown() {
  // Notify() may be called only once; signals and callers can race.
  static absl::Mutex* mu = new absl::Mutex();
  absl::MutexLock lock(mu);
  if (!ShutdownNotification().HasBeenNotified()) ShutdownNotification().Notify();
}

bool WaitForShutdown(absl::Duration timeout) {
  return ShutdownNotification().WaitForNotificationWithTimeout(timeout);
}

}  // namespace corescape
