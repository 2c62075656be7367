#include "runtime/base/shutdown_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

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

// The write end of the pipe the signal handler wakes the watcher through.
volatile sig_atomic_t wake_fd = -1;

// Runs only in threads that have the signals unblocked: those a library
// started before main blocked them (OpenBLAS starts its workers in a
// constructor). Async-signal-safe: one write.
void WakeWatcher(int signal_number) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(signal_number);
  if (wake_fd >= 0) (void)!write(wake_fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

void InstallShutdownSignalHandlers() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // Threads started from here on inherit the block; the watcher takes the
  // signals from a signalfd.
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  const int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  int wake[2] = {-1, -1};
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) PLOG(FATAL) << "pipe2";
  wake_fd = wake[1];
  // A thread that existed before (and so has them unblocked) would
  // otherwise take the default action, which ends the process.
  struct sigaction action = {};
  action.sa_handler = WakeWatcher;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  if (signal_fd < 0) PLOG(FATAL) << "signalfd";
  std::thread([signal_fd, read_fd = wake[0]]() {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {read_fd, POLLIN, 0}};
    int signal_number = 0;
    while (signal_number == 0) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        PLOG(ERROR) << "poll on the shutdown signals";
        return;
      }
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info;
        if (read(signal_fd, &info, sizeof(info)) == sizeof(info)) signal_number = info.ssi_signo;
      }
      if (signal_number == 0 && (fds[1].revents & POLLIN)) {
        char byte = 0;
        if (read(read_fd, &byte, 1) == 1) signal_number = byte;
      }
    }
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
