#include "runtime/base/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape {

absl::Status NotifyServiceManager(absl::string_view state) {
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  if (socket_name == nullptr || socket_name[0] == '\0') return absl::OkStatus();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t length = std::strlen(socket_name);
  if (socket_name[0] != '/' && socket_name[0] != '@') {
    return absl::InvalidArgumentError(
        absl::StrCat("$NOTIFY_SOCKET '", socket_name, "': not a path or @abstract name"));
  }
  if (length >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("$NOTIFY_SOCKET '", socket_name, "': too long"));
  }
  std::memcpy(address.sun_path, socket_name, length);
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // abstract namespace
  const socklen_t address_length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "NOTIFY_SOCKET: socket");
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&address), address_length);
  const int send_errno = errno;
  close(fd);
  if (sent < 0) {
    return absl::ErrnoToStatus(send_errno, absl::StrCat("NOTIFY_SOCKET ", socket_name));
  }
  return absl::OkStatus();
}

void NotifyReady(absl::string_view status) {
  if (absl::Status s = NotifyServiceManager(absl::StrCat("READY=1\nSTATUS=", status));
      !s.ok()) {
    LOG(WARNING) << "cannot report readiness: " << s;
  }
}

void NotifyStopping() {
  if (absl::Status s = NotifyServiceManager("STOPPING=1"); !s.ok()) {
    LOG(WARNING) << "cannot report stopping: " << s;
  }
}

std::optional<absl::Duration> ServiceWatchdogInterval() {
  const char* usec_text = std::getenv("WATCHDOG_USEC");
  if (usec_text == nullptr) return std::nullopt;
  if (const char* pid_text = std::getenv("WATCHDOG_PID"); pid_text != nullptr) {
    int64_t pid = 0;
    // Set by systemd for the main process; children it spawns must not ping.
    if (!absl::SimpleAtoi(pid_text, &pid) || pid != getpid()) return std::nullopt;
  }
  int64_t usec = 0;
  if (!absl::SimpleAtoi(usec_text, &usec) || usec <= 0) return std::nullopt;
  return absl::Microseconds(usec);
}

void NotifyWatchdog() {
  if (absl::Status s = NotifyServiceManager("WATCHDOG=1"); !s.ok()) {
    LOG_EVERY_N(WARNING, 100) << "watchdog ping: " << s;
  }
}

ServiceWatchdog::ServiceWatchdog(std::function<bool()> healthy) {
  const std::optional<absl::Duration> interval = ServiceWatchdogInterval();
  if (!interval.has_value()) return;
  LOG(INFO) << "systemd watchdog armed: " << *interval << "; pinging every "
            << *interval / 2;
  thread_ = std::thread([this, period = *interval / 2, healthy = std::move(healthy)]() {
    do {
      if (!healthy()) {
        LOG(WARNING) << "health check failed; withholding the watchdog ping";
        continue;
      }
      NotifyWatchdog();
    } while (!stop_.WaitForNotificationWithTimeout(period));
  });
}

ServiceWatchdog::~ServiceWatchdog() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace corescape
